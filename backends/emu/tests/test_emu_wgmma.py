"""wgmma on emu:sm_90 (the CUDA backend's Hopper lowering, executed from the intrinsic table).

- the example GEMM in fp16 / bf16 (ragged M, N, K and K tails) and the fp8 example (e4m3 and
  e5m2, B given as (N, K)) against NumPy; FlashAttention's P @ V takes A from registers;
- the asynchronous model: deleting the wgmma wait, weakening it, or deleting the wgmma fence is
  reported by the emulator (a register race, a refilled stage still being read, a missing
  fence); a corrupted accumulator lane map breaks the result.
"""

import dataclasses
import importlib

import numpy as np
import pytest

import tilecore
from tilecore import plugins
from tilecore.emulator.machine import EmuArtifact
from tilecore.errors import TileRuntimeError
from tilecore.hookspec import hookimpl
from tilecore.ir.stmt import SeqStmt
from tilecore.ir.thread import AsyncFence, AsyncWait
from tilecore.ir.visit import rewrite

tilecore_cuda = pytest.importorskip("tilecore_cuda")
from tilecore_cuda import intrinsics as cuda_intrinsics  # noqa: E402
from tilecore_cuda.lowering import tile_gemm_tensorize as cuda_tensorize  # noqa: E402

gemm = importlib.import_module("gemm")
EMU = "emu:sm_90"


def _check_gemm(sizes, cfg, dtype):
    kernel = tilecore.compile(gemm.program(**sizes, **cfg, dtype=dtype), out_idx=[-1], target=EMU)
    assert "wgmma.mma_async" in kernel.get_kernel_source()
    a, b = gemm.make_inputs(np.random.default_rng(1), **sizes, dtype=dtype)
    c = kernel(a, b)
    np.testing.assert_allclose(c.astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)
    return kernel


@pytest.mark.parametrize("dtype, sizes, cfg", [
    ("float16", dict(M=128, N=128, K=64), dict(block_M=128, block_N=128, block_K=32, num_stages=2)),
    # ragged M and N, K = 100: a K tail inside the last 32-wide tile (zero-filled by cp.async)
    ("float16", dict(M=160, N=72, K=100), dict(block_M=128, block_N=64, block_K=32, num_stages=3)),
    # two warpgroups splitting M, 64-byte swizzled A rows, bf16
    ("bfloat16", dict(M=130, N=72, K=40), dict(block_M=128, block_N=64, block_K=32, num_stages=2,
                                              threads=256)),
])
def test_example_gemm_on_emu_sm_90(dtype, sizes, cfg):
    _check_gemm(sizes, cfg, dtype)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_gemm_on_emu_sm_90(dtype):
    fp8 = importlib.import_module("gemm_fp8")
    sizes = dict(M=80, N=72, K=160)  # ragged in every dimension, a K tail of 32
    func = fp8.program(**sizes, block_M=64, block_N=64, block_K=64, dtype=dtype, out_dtype="float32")
    kernel = tilecore.compile(func, out_idx=fp8.OUT_IDX, target=EMU)
    assert "wgmma.mma_async.sync.aligned.m64n64k32.f32" in kernel.get_kernel_source()
    a, b = fp8.make_inputs(np.random.default_rng(2), **sizes, dtype=dtype)
    # fp8 products are exact in float32; only the summation order differs (the example's
    # default scales multiply to 1)
    want = a.astype(np.float32) @ b.astype(np.float32).T
    np.testing.assert_allclose(kernel(a, b), want, rtol=1e-5, atol=1e-4)


def test_flash_attention_takes_a_from_registers():
    fa = importlib.import_module("flash_attention")
    sizes = fa.TEST_SIZES[1]
    kernel = tilecore.compile(fa.program(**sizes), out_idx=fa.OUT_IDX, target=EMU)
    ir = kernel.get_kernel_source()
    assert "A=A_frag" in ir  # P @ V: P is a fragment, used from registers
    q, k, v = fa.make_inputs(np.random.default_rng(0), **sizes)
    np.testing.assert_allclose(kernel(q, k, v).astype(np.float32),
                               fa.reference(q, k, v, is_causal=sizes["is_causal"]).astype(np.float32),
                               **fa.TOLERANCE)


# ----------------------------------------------------------------------------- mutations


def _lowered(num_stages=2, K=96, pass_configs=None):
    func = gemm.program(M=128, N=64, K=K, block_M=64, block_N=64, block_K=32, num_stages=num_stages)
    kernel = tilecore.jit(func, out_idx=[-1], target=EMU, pass_configs=pass_configs)
    a, b = gemm.make_inputs(np.random.default_rng(0), M=128, N=64, K=K)
    return kernel.stages[-1][1], a, b


def _mutate(module, match, replace_with):
    """The module with every statement `match(s)` accepts replaced by `replace_with(s)` (a
    statement, or None to delete it); the number replaced."""
    count = [0]

    def fn(n):
        if isinstance(n, SeqStmt) and any(match(s) for s in n.stmts):
            keep = []
            for s in n.stmts:
                if match(s):
                    count[0] += 1
                    s = replace_with(s)
                if s is not None:
                    keep.append(s)
            return SeqStmt(tuple(keep), n.loc)
        return None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn))), count[0]


def _run(module, a, b):
    EmuArtifact(module).run([a, b, np.zeros((128, 64), dtype=np.float16)], {})


def _is_wgmma_wait(s):
    return isinstance(s, AsyncWait) and s.queue == "wgmma"


def test_unmodified_kernel_runs_clean():
    final, a, b = _lowered()
    _run(final, a, b)


@pytest.mark.parametrize("K, expect", [
    (32, "register race: .* of a wgmma in flight"),  # one k tile: the epilogue reads the accumulator
    (96, "data race on shared buffer [AB]_shared: .* still reads it"),  # the next refill of the stage
])
def test_deleted_wgmma_wait_is_a_race(K, expect):
    final, a, b = _lowered(K=K)
    mutated, n = _mutate(final, _is_wgmma_wait, lambda s: None)
    assert n == 1
    with pytest.raises(TileRuntimeError, match=expect) as err:
        _run(mutated, a, b)
    assert "gemm.py:" in str(err.value)


@pytest.mark.parametrize("num_stages, pending", [(2, 1), (3, 2)])
def test_weakened_wgmma_wait_lets_the_pipeline_refill_a_stage_being_read(num_stages, pending):
    # 2 stages: the loop waits for group 0 and the pipeline issues 1 tile ahead; 3 stages: the
    # loop keeps one group in flight (wait 1) and issues one tile less far ahead. One more
    # pending group and the next refill hits a stage a wgmma still reads.
    final, a, b = _lowered(num_stages=num_stages, K=160)
    mutated, _ = _mutate(final, lambda s: _is_wgmma_wait(s) and s.pending == pending - 1,
                         lambda s: dataclasses.replace(s, pending=pending))
    with pytest.raises(TileRuntimeError, match="still reads it"):
        _run(mutated, a, b)


@pytest.mark.parametrize("num_stages", [3, 4])
@pytest.mark.parametrize("tma", [False, True])
def test_pipeline_keeps_one_wgmma_group_in_flight(num_stages, tma):
    configs = None if tma else {"tl.disable_tma_lower": True}
    final, a, b = _lowered(num_stages=num_stages, K=320, pass_configs=configs)  # 10 k tiles
    text = EmuArtifact(final).source
    loop = text[text.index("for k in"):]
    assert "async_wait(wgmma, pending=1)" in loop
    assert loop.index("async_wait(wgmma, pending=0)") > loop.index("async_wait(wgmma, pending=1)")
    # copies run s - 2 tiles ahead: the cp.async wait in the loop leaves s - 3 groups pending;
    # TMA (tilecore.lower.tma_pipeline) refills stage (k + s - 2) % s
    if tma:
        assert f"stage_next = ({num_stages - 2} + k) % {num_stages}" in loop and "mbarrier_wait" in loop
    else:
        assert f"async_wait(cp.async, pending={num_stages - 3})" in loop
    c = np.zeros((128, 64), dtype=np.float16)
    EmuArtifact(final).run([a, b, c], {})
    np.testing.assert_allclose(c.astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)


def test_deleted_wgmma_fence_is_reported():
    final, a, b = _lowered()
    mutated, n = _mutate(final, lambda s: isinstance(s, AsyncFence) and s.kind == "wgmma", lambda s: None)
    assert n == 1
    with pytest.raises(TileRuntimeError, match="wgmma fence"):
        _run(mutated, a, b)


class CorruptWgmma:
    """Answers like the CUDA backend, with one entry of the wgmma accumulator lane map wrong."""

    @hookimpl(tryfirst=True)
    def tile_gemm_tensorize(self, target, query):
        plan = cuda_tensorize(target=target, query=query)
        if plan is None or plan.mma.kind != "wgmma":
            return plan
        good = plan.mma.operand("D").map
        bad = good.with_entry(5, 1, good.at(5, 0))
        n = plan.mma.shape[1]
        return dataclasses.replace(plan, mma=cuda_intrinsics.wgmma(n, query.a_dtype, d_map=bad))


def test_corrupt_wgmma_lane_map_breaks_the_result():
    plugins.register(CorruptWgmma(), name="corrupt-wgmma")
    try:
        kernel = tilecore.compile(gemm.program(M=64, N=64, K=32, block_M=64, block_N=64, block_K=32),
                                  out_idx=[-1], target=EMU)
        a, b = gemm.make_inputs(np.random.default_rng(0), M=64, N=64, K=32)
        out = kernel(a, b).astype(np.float32)
    finally:
        plugins.unregister("corrupt-wgmma")
    ref = gemm.reference(a, b).astype(np.float32)
    assert np.isnan(out).any() or not np.allclose(out, ref, **gemm.TOLERANCE)


def test_disable_wgmma_is_not_silently_dropped():
    from tilecore.errors import TileConfigWarning
    from tilecore.lower import tensorize

    tensorize._WGMMA_WARNED.clear()
    prog = gemm.program(M=128, N=64, K=64, block_M=128, block_N=64, block_K=64, num_stages=1)
    with pytest.warns(TileConfigWarning, match="tl.disable_wgmma' is not honoured"):
        k = tilecore.compile(prog, target="emu:sm_90a", pass_configs={"tl.disable_wgmma": True})
    assert "wgmma.mma_async" in k.get_ir("final")
