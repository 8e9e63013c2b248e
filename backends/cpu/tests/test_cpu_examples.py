"""Every example runs on cpu and matches both its NumPy reference and the interp oracle."""

import importlib

import numpy as np
import pytest
from tilecore_conformance.corpus import example_files
from tilecore_conformance.corpus import sizes_for as _split
from tilecore_cpu import artifact

import tilecore
from tilecore import dtypes as dt
from tilecore import plugins
from tilecore.example_protocol import as_outputs, assert_outputs_match

EXAMPLES = [p.stem for p in example_files()]


# The prange launcher is the same generated loop for every kernel (only the block body differs,
# and the serial runs check that): it compiles separately and slowly (about 2 CPU-s per example),
# so it runs on examples covering the block bodies' kinds: 1-D elementwise, tile gemm, fp8,
# row reductions, a pipelined online softmax, split-KV decoding.
PARALLEL = ("elementwise_add", "gemm", "gemm_fp8", "softmax", "flash_attention", "flash_decoding")


def cases():
    """Every example at every test size on the serial launcher; the first size of the PARALLEL
    examples also on the prange launcher."""
    for name in EXAMPLES:
        mod = importlib.import_module(name)
        for i, sizes in enumerate(mod.TEST_SIZES):
            yield pytest.param(name, sizes, "serial", id=f"{name}-{i}-serial")
        if name in PARALLEL:
            yield pytest.param(name, mod.TEST_SIZES[0], "parallel", id=f"{name}-0-parallel")


def test_the_parallel_examples_exist():
    assert set(PARALLEL) <= set(EXAMPLES)



def _as_f32(x):
    return np.asarray(x).astype(np.float32)


@pytest.mark.parametrize("name,sizes,mode", list(cases()))
def test_example_on_cpu(name, sizes, mode, monkeypatch):
    if mode == "parallel":  # small inputs (or a busy machine) run blocks serially unless forced
        monkeypatch.setattr(artifact, "PARALLEL", "always")
    mod = importlib.import_module(name)
    func = mod.program(**_split(mod.program, sizes))
    cpu = tilecore.jit(func, out_idx=mod.OUT_IDX, target="cpu")
    oracle = tilecore.jit(func, out_idx=mod.OUT_IDX, target="interp")
    args = mod.make_inputs(np.random.default_rng(1), **_split(mod.make_inputs, sizes))
    out = cpu(*args)
    ref = mod.reference(*args, **_split(mod.reference, sizes))
    want = oracle(*args)
    assert_outputs_match(out, ref, mod.TOLERANCE, check_nan=False)
    if mod.TOLERANCE["rtol"] == 0 and mod.TOLERANCE["atol"] == 0:
        assert_outputs_match(out, want, mod.TOLERANCE, check_nan=False)
        return
    for o, w in zip(as_outputs(out), as_outputs(want)):
        rtol, atol = plugins.manager().hook.tile_tolerance(target=cpu.target, dtype=dt.from_numpy(o.dtype))
        np.testing.assert_allclose(_as_f32(o), _as_f32(w), rtol=rtol, atol=atol)


def test_kernel_source_is_the_generated_python():
    mod = importlib.import_module("gemm")
    k = tilecore.jit(mod.program(M=128, N=128, K=64), out_idx=[-1], target="cpu")
    src = k.get_kernel_source()
    assert "def block(" in src and "def launch_serial(" in src and "np.dot(" in src
    compile(src, "<generated>", "exec")
