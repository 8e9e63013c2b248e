"""Every eager-style example twin (`examples/*_eager.py` with a `TWIN = ...` line) against its
factory-style twin: at each of the twin's TEST_SIZES its `program` builds the same PrimFunc
(printed IR and attributes, the function's name aside), which is why the corpus readers skip it
(every target's run of the twin is a run of this program); and the eager call a user makes
(`run`: tensors in, constants bound from their shapes, the returned T.empty outputs out) gives
bit for bit the twin's outputs on interp, and on cpu and emu:sm_90a for a cheap subset."""

import dataclasses
import importlib

import numpy as np
import pytest
from optional_backends import needs_interp, target_params

import tilecore
from tilecore.example_protocol import TWIN_LINE, as_outputs, example_files, sizes_for
from tilecore.ir.printer import print_func

TWINS = [p.stem for p in example_files(twins=True) if TWIN_LINE.search(p.read_text())]
# (example, TEST_SIZES index) run on the compiled backends: one cheap size each, chosen so that
# cpu runs a row kernel's two-pass branch and emu:sm_90a an fp8 wgmma GEMM and a decode kernel
SUBSET = {"cpu": [("softmax_eager", 2), ("gemv_eager", 1)],
          "emu:sm_90a": [("gemm_fp8_eager", 0), ("mla_decoding_eager", 0)]}


def _printed(func) -> str:
    """The PrimFunc's printed IR and attributes under one name (the eager function's name,
    `matmul` in gemm_eager, is the only thing allowed to differ)."""
    return print_func(dataclasses.replace(func, name="kernel")) + repr([k for k, _ in func.attrs])


def _twin(name: str):
    mod = importlib.import_module(name)
    return mod, importlib.import_module(mod.TWIN)


def test_the_eager_twins_are_found():
    assert {"gemm_eager", "softmax_eager", "rmsnorm_eager", "layernorm_eager", "gemv_eager",
            "gemm_bias_gelu_eager", "gemm_fp8_eager", "flash_attention_eager", "flash_decoding_eager",
            "mla_decoding_eager"} <= set(TWINS)
    corpus = {p.stem for p in example_files()}
    assert not corpus & set(TWINS) and "elementwise_add_eager" in corpus  # not a twin: T.const vs T.dynamic


@pytest.mark.parametrize("name", TWINS)
def test_eager_example_builds_its_twins_prim_func(name):
    mod, twin = _twin(name)
    assert mod.OUT_IDX == twin.OUT_IDX
    for sizes in twin.TEST_SIZES + getattr(mod, "TWIN_SIZES", []):
        for fn in getattr(mod, "TWIN_PROGRAMS", ("program",)):  # flash_decoding: and combine_program
            want = getattr(twin, fn)(**sizes_for(getattr(twin, fn), sizes))
            got = getattr(mod, fn)(**sizes_for(getattr(mod, fn), sizes))
            assert _printed(got) == _printed(want), f"{name}.{fn} at {sizes}"


def _outputs_match_twin(name: str, index: int, target: str) -> None:
    mod, twin = _twin(name)
    sizes = twin.TEST_SIZES[index]
    args = twin.make_inputs(np.random.default_rng(2), **sizes_for(twin.make_inputs, sizes))
    got = as_outputs(mod.run([a.copy() for a in args], target, **sizes))
    lazy = tilecore.jit(twin.program(**sizes_for(twin.program, sizes)), out_idx=twin.OUT_IDX, target=target)
    want = as_outputs(lazy(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)  # one program: the same bits


# the first size of each, and the second where it binds differently: flash_attention's grouped
# causal size (kv_heads from K's shape), flash_decoding's paged cache (the second split kernel)
INTERP_CASES = [(name, 0) for name in TWINS] + [("flash_attention_eager", 1), ("flash_decoding_eager", 1)]


@needs_interp
@pytest.mark.parametrize("name,index", INTERP_CASES)
def test_eager_call_matches_its_twin_on_interp(name, index):
    _outputs_match_twin(name, index, "interp")


@pytest.mark.parametrize("target", target_params(*SUBSET))
def test_eager_call_matches_its_twin_on_compiled_targets(target):
    for name, index in SUBSET[target]:
        _outputs_match_twin(name, index, target)
