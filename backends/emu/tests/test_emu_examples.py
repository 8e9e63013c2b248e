"""The emulator on the examples: tensor-core lowering in the IR and sm_90 emulation (every example
at every size on emu:sm_80 against interp is the conformance corpus test)."""

import importlib

import numpy as np
import pytest
from tilecore_conformance.corpus import example_files
from tilecore_conformance.corpus import sizes_for as _split

import tilecore
from tilecore.example_protocol import assert_outputs_match

# Every example at every test size on `emu` (emu:cuda:sm_80) against interp is the conformance
# plugin's corpus test (`test_corpus_example[emu-<example>-<n>]`: `emu` is a runnable target, so
# every CI run has it); it is not repeated here (the same kernels through the same emulator
# cost about a minute of CI). `pytest --tile-target=emu:sm_80` runs it alone.
EXAMPLES = [p.stem for p in example_files()]


def test_the_corpus_target_emu_is_sm_80():
    """The corpus test runs on `emu`, which must stay the cuda sm_80 lowering this file once
    checked each example on (were the default to move, parametrize the examples here again)."""
    from tilecore import plugins

    assert str(plugins.resolve("emu")) == "emu:cuda:sm_80"


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
