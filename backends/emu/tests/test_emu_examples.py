"""Every example, at every test size, on `emu:sm_80` against the `interp` oracle."""

import importlib
import time

import numpy as np
import pytest
from tilecore_conformance.corpus import example_files
from tilecore_conformance.corpus import sizes_for as _split

import tilecore
from tilecore.example_protocol import assert_outputs_match

EXAMPLES = [p.stem for p in example_files()]



def cases():
    for name in EXAMPLES:
        mod = importlib.import_module(name)
        for i, sizes in enumerate(mod.TEST_SIZES):
            yield pytest.param(name, sizes, id=f"{name}-{i}")


@pytest.mark.parametrize("name,sizes", list(cases()))
def test_example_on_emu_matches_interp(name, sizes):
    mod = importlib.import_module(name)
    func = mod.program(**_split(mod.program, sizes))
    args = mod.make_inputs(np.random.default_rng(1), **_split(mod.make_inputs, sizes))
    ref = tilecore.jit(func, out_idx=mod.OUT_IDX, target="interp")(*args)
    t0 = time.perf_counter()
    kernel = tilecore.jit(func, out_idx=mod.OUT_IDX, target="emu:sm_80")
    out = kernel(*args)
    print(f"{name} {sizes}: emu compile+run {time.perf_counter() - t0:.2f}s")
    assert_outputs_match(out, ref, mod.TOLERANCE)


def test_fp16_gemm_uses_tensor_cores():
    """The lowered gemm holds ldmatrix + mma.sync intrinsic calls and no SIMT fallback loop."""
    mod = importlib.import_module("gemm")
    kernel = tilecore.jit(mod.program(M=128, N=128, K=64), out_idx=[-1], target="emu:sm_80")
    ir = kernel.get_ir("lower-threads")
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ir
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ir
    assert "barrier()" in kernel.get_ir("insert-barriers")
    # T.Pipelined(num_stages=3) on sm_80: three cp.async stages, tile k+2 issued during tile k's math
    staged = kernel.get_ir("async-pipeline")
    assert "shared float16 A_shared[" in staged and "async A_shared[" in staged
    assert "async_wait(cp.async, pending=1)" in staged
    assert "A_next" not in kernel.get_ir("prefetch-pipelined")


@pytest.mark.parametrize("name", ["gemm", "flash_attention"])
def test_sm90_emulates_the_sm90_lowering(name):
    mod = importlib.import_module(name)
    sizes = mod.TEST_SIZES[0]
    func = mod.program(**_split(mod.program, sizes))
    args = mod.make_inputs(np.random.default_rng(2), **_split(mod.make_inputs, sizes))
    ref = tilecore.jit(func, out_idx=mod.OUT_IDX, target="interp")(*args)
    out = tilecore.jit(func, out_idx=mod.OUT_IDX, target="emu:sm_90")(*args)
    assert_outputs_match(out, ref, mod.TOLERANCE)
