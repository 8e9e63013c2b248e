"""wgmma's scale-d on emu:sm_90a (tilecore/lower/accum_zero.py, tilecore/emulator/wgmma.py).

An accumulator cleared right before its k loop, and a `clear_accum=True` gemm, start with
scale-d 0 on the first k step instead of zeroing stores:

- GEMMs against NumPy with the clear gone: ragged M, N, K, a single k tile, the cp.async and
  TMA pipelines, the persistent warp-specialized kernel (each block walks several tiles, so
  the first k step of every tile must ignore the previous tile's accumulator), bf16;
- the emulator executes scale-d: every k step with scale-d 0, or none at all (the clear gone
  and nothing zeroing), gives wrong numbers or an uninitialized read; a scale-d that differs
  inside a warpgroup is an error;
- a clear followed by the gemm into it (no loop) and `clear_accum=True` start the same way;
- the clear stays where dropping it could change values: the accumulator also touched in the
  loop, the gemm under a branch, a loop without a compile-time trip count, mma.sync (sm_80).
"""

import dataclasses
import importlib

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.emulator.machine import EmuArtifact
from tilecore.errors import TileRuntimeError
from tilecore.ir.expr import binop, const
from tilecore.ir.thread import IntrinsicCall
from tilecore.ir.visit import rewrite

pytest.importorskip("tilecore_cuda")
from test_emu_tma import two_sms  # noqa: E402,F401  (fixture: 2 multiprocessors, persistent)

gemm = importlib.import_module("gemm")
EMU = "emu:sm_90a"
ZEROING = "C_local[0] = 0"  # the printed zeroing store of the accumulator's first register


def _kernel(M, N, K, target=EMU, configs=None, dtype="float16", **cfg):
    return tilecore.jit(gemm.program(M=M, N=N, K=K, dtype=dtype, **cfg), out_idx=gemm.OUT_IDX,
                        target=target, pass_configs=configs)


def _check(kernel, M, N, K, dtype="float16"):
    a, b = gemm.make_inputs(np.random.default_rng(M * 7 + N * 3 + K), M=M, N=N, K=K, dtype=dtype)
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)


@pytest.mark.parametrize("M, N, K, cfg, configs", [
    # ragged M and N, K = 100 (a tail in the last 32-deep tile), cp.async pipeline
    (160, 72, 100, dict(block_M=128, block_N=64, block_K=32, num_stages=3), {"tl.disable_tma_lower": True}),
    # the TMA pipeline, two warpgroups splitting M
    (130, 72, 104, dict(block_M=128, block_N=64, block_K=32, num_stages=2, threads=256), None),
    # one k tile: the loop's only iteration is its first
    (64, 64, 20, dict(block_M=64, block_N=64, block_K=32, num_stages=2), None),
])
def test_cleared_accumulator_starts_with_scale_d_zero(M, N, K, cfg, configs):
    kernel = _kernel(M, N, K, configs=configs, **cfg)
    ir = kernel.get_ir("final")
    assert ZEROING not in ir
    assert "scale_d=k != 0" in ir
    src = kernel.get_kernel_source()
    assert "wgmma.mma_async" in src
    _check(kernel, M, N, K)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_persistent_tiles_do_not_carry_the_previous_accumulator(dtype, two_sms):  # noqa: F811
    # 2 x 2 tiles (one ragged row) on 2 blocks: each block's second tile starts on registers
    # that hold its first tile's product
    M, N, K = 200, 72, 136
    kernel = _kernel(M, N, K, dtype=dtype, block_M=128, block_N=64, block_K=32, num_stages=3, threads=256)
    ir = kernel.get_ir("final")
    assert "for tile in serial(block_id," in ir and ZEROING not in ir
    _check(kernel, M, N, K, dtype)


def _final(M=128, N=64, K=96):
    kernel = tilecore.jit(gemm.program(M=M, N=N, K=K, block_M=64, block_N=64, block_K=32, num_stages=2),
                          out_idx=[-1], target=EMU)
    a, b = gemm.make_inputs(np.random.default_rng(5), M=M, N=N, K=K)
    return kernel.stages[-1][1], a, b


def _with_scale(module, fn):
    """The module with every wgmma's scale_d replaced by fn(call)."""
    def sub(n):
        if isinstance(n, IntrinsicCall) and n.intrinsic.kind == "wgmma":
            return dataclasses.replace(n, scale_d=fn(n))
        return None
    return module.with_func(module.func.with_body(rewrite(module.func.body, sub)))


def _run(module, a, b):
    c = np.zeros((a.shape[0], b.shape[1]), dtype=np.float16)
    EmuArtifact(module).run([a, b, c], {})
    return c.astype(np.float32)


def test_unmodified_final_ir_is_right():
    final, a, b = _final()
    np.testing.assert_allclose(_run(final, a, b), gemm.reference(a, b).astype(np.float32), **gemm.TOLERANCE)


def test_scale_d_zero_on_every_step_keeps_only_the_last_product():
    final, a, b = _final()
    got = _run(_with_scale(final, lambda n: const(False)), a, b)
    # every wgmma overwrites: the last k step (16 deep) of the last k tile is all that is left
    want = (a[:, 80:96].astype(np.float32) @ b[80:96].astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(got, want.astype(np.float32), **gemm.TOLERANCE)


def test_accumulating_on_the_first_step_reads_the_uncleared_registers():
    final, a, b = _final()
    with pytest.raises(TileRuntimeError, match="uninitialized register buffer C_local"):
        _run(_with_scale(final, lambda n: None), a, b)


def test_accumulating_without_the_check_reads_poison(monkeypatch):
    monkeypatch.setenv("TILECORE_CHECK_UNINIT", "0")
    final, a, b = _final()
    assert np.isnan(_run(_with_scale(final, lambda n: None), a, b)).all()


def test_scale_d_must_be_uniform_in_the_warpgroup():
    final, a, b = _final()
    tx = _kernels(final)[0].thread_var

    def split(n):
        return binop("lt", tx, 64) if n.scale_d is not None else None
    with pytest.raises(TileRuntimeError, match="different scale-d values"):
        _run(_with_scale(final, split), a, b)


def _kernels(module):
    from tilecore.ir.thread import ThreadKernel
    from tilecore.ir.visit import walk

    return [n for n in walk(module.func.body) if isinstance(n, ThreadKernel)]


# ----------------------------------------------------------------------------- the clear stays


def _custom(kind: str, M=64, N=64, K=96, bk=32):
    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, bk), "float16")
            B_s = T.alloc_shared((bk, N), "float16")
            C_local = T.alloc_fragment((M, N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[0, k * bk], A_s)
                T.copy(B[k * bk, 0], B_s)
                if kind == "touched":
                    for i, j in T.Parallel(M, N):
                        C_local[i, j] = C_local[i, j] * 0.5
                if kind == "branch":
                    if k < 2:
                        T.gemm(A_s, B_s, C_local)
                else:
                    T.gemm(A_s, B_s, C_local)
            T.copy(C_local, C[0, 0])
    return f


def _custom_ref(kind, a, b, bk=32):
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1] // bk):
        if kind == "touched":
            acc *= 0.5
        if kind != "branch" or k < 2:
            acc += a[:, k * bk:(k + 1) * bk].astype(np.float32) @ b[k * bk:(k + 1) * bk].astype(np.float32)
    return acc


@pytest.mark.parametrize("kind", ["touched", "branch"])
def test_clear_stays_when_the_loop_needs_it(kind):
    kernel = tilecore.jit(_custom(kind), out_idx=[-1], target=EMU)
    ir = kernel.get_ir("final")
    assert ZEROING in ir and "scale_d=" not in ir
    a, b = gemm.make_inputs(np.random.default_rng(3), M=64, N=64, K=96)
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), _custom_ref(kind, a, b), **gemm.TOLERANCE)


def test_clear_stays_for_a_dynamic_trip_count():
    K = T.dynamic("K")

    @T.prim_func
    def f(A: T.Tensor((64, K), "float16"), B: T.Tensor((K, 64), "float16"), C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_local = T.alloc_fragment((64, 64), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):  # may run 0 times
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_local)
            T.copy(C_local, C[0, 0])
    kernel = tilecore.jit(f, out_idx=[-1], target=EMU)
    assert ZEROING in kernel.get_ir("final")
    a, b = gemm.make_inputs(np.random.default_rng(4), M=64, N=64, K=40)
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)


def test_mma_sync_keeps_its_clear():
    kernel = _kernel(64, 64, 64, target="emu:sm_80", block_M=64, block_N=64, block_K=32, num_stages=2)
    assert ZEROING in kernel.get_ir("final")


# ----------------------------------------------------------------------------- clear_accum


@pytest.mark.parametrize("style", ["clear_accum", "clear"])
def test_first_step_scale_d_zero_ignores_the_previous_product(style):
    # T.gemm(clear_accum=True), or T.clear(C) then other work then T.gemm into C
    M, N, K = 64, 64, 32

    @T.prim_func
    def f(A: T.Tensor((2 * M, K), "float16"), B: T.Tensor((K, N), "float16"),
          C: T.Tensor((2 * M, N), "float16")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C_local = T.alloc_fragment((M, N), "float32")
            T.copy(B[0, 0], B_s)
            for r in T.serial(2):  # the second product starts on the first one's registers
                if style == "clear":
                    T.clear(C_local)
                T.copy(A[r * M, 0], A_s)
                T.gemm(A_s, B_s, C_local, clear_accum=style == "clear_accum")
                T.copy(C_local, C[r * M, 0])
    kernel = tilecore.jit(f, out_idx=[-1], target=EMU)
    ir = kernel.get_ir("final")
    assert ZEROING not in ir and "scale_d=False" in ir
    a, b = gemm.make_inputs(np.random.default_rng(6), M=2 * M, N=N, K=K)
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)


def test_option_keeps_every_clear():
    M, N, K = 130, 72, 104
    kernel = _kernel(M, N, K, configs={"tilecore.disable_wgmma_scale_d": True}, block_M=128, block_N=64,
                     block_K=32, num_stages=2, threads=256)
    ir = kernel.get_ir("final")
    assert ZEROING in ir and "scale_d=" not in ir
    _check(kernel, M, N, K)
