"""Warp-specialized tile programs on interp (tilecore.lower.tile_roles, tilecore_interp.roles):
T.ws / thread-index role branches with tile operations, mbarriers and T.tma_copy, run at the
tile level with the roles concurrent; misuse is a located error."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileRuntimeError, TileShapeError

M = N = K = 128
BM = BN = 64
BK = 32


def _line(fn, text: str) -> int:
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(src) if text in s)


def ws_gemm(consumer_first=False, shift=0, roles_by_branch=False, M=M, N=N, K=K):
    """C = A @ B with a TMA producer warpgroup and a gemm consumer warpgroup."""
    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // BN, M // BM, threads=256) as (bx, by):
            A_s = T.alloc_shared((2, BM, BK), "float16")
            B_s = T.alloc_shared((2, BK, BN), "float16")
            C_l = T.alloc_fragment((BM, BN), "float32")
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([128, 128])
            if roles_by_branch:
                tx = T.get_thread_binding()
                if tx < 128:
                    T.clear(C_l)
                    for ko in T.serial(K // BK):
                        T.barrier_wait(full[ko % 2], (ko // 2) % 2)
                        T.gemm(A_s[ko % 2, :, :], B_s[ko % 2, :, :], C_l)
                        T.barrier_arrive(empty[ko % 2])
                    T.copy(C_l, C[by * BM, bx * BN])
                else:
                    for ko in T.serial(K // BK):
                        T.barrier_wait(empty[ko % 2], (ko // 2 + 1) % 2)
                        T.tma_copy(A[by * BM, ko * BK], A_s[ko % 2, :, :], barrier=full[ko % 2])
                        T.tma_copy(B[ko * BK, bx * BN], B_s[ko % 2, :, :], barrier=full[ko % 2])
                        T.barrier_arrive(full[ko % 2])
            else:
                with T.ws(0):
                    T.clear(C_l)
                for ko in T.Pipelined(K // BK, num_stages=2):
                    if consumer_first:
                        with T.ws(0):
                            T.barrier_wait(full[ko % 2], (ko // 2) % 2)
                            T.gemm(A_s[ko % 2, :, :], B_s[ko % 2, :, :], C_l)
                            T.barrier_arrive(empty[ko % 2])
                    with T.ws(1):
                        T.barrier_wait(empty[ko % 2], (ko // 2 + 1 + shift) % 2)
                        T.tma_copy(A[by * BM, ko * BK], A_s[ko % 2, :, :], barrier=full[ko % 2])
                        T.tma_copy(B[ko * BK, bx * BN], B_s[ko % 2, :, :], barrier=full[ko % 2])
                        T.barrier_arrive(full[ko % 2])
                    if not consumer_first:
                        with T.ws(0):
                            T.barrier_wait(full[ko % 2], (ko // 2) % 2)
                            T.gemm(A_s[ko % 2, :, :], B_s[ko % 2, :, :], C_l)
                            T.barrier_arrive(empty[ko % 2])
                with T.ws(0):
                    T.copy(C_l, C[by * BM, bx * BN])
    return k


def _inputs(M=M, N=N, K=K):
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (M, K)).astype(np.float16)
    b = rng.integers(-3, 4, (K, N)).astype(np.float16)
    return a, b, np.zeros((M, N), np.float16), (a.astype(np.float32) @ b.astype(np.float32))


@pytest.mark.parametrize("consumer_first", [False, True])
def test_ws_regions_pipeline(consumer_first):
    a, b, c, ref = _inputs()
    kern = tilecore.compile(ws_gemm(consumer_first=consumer_first), target="interp")
    assert "# concurrent roles:" in kern.get_ir("thread-level")
    kern(a, b, c)
    np.testing.assert_array_equal(c.astype(np.float32), ref)  # small integers: exact


def test_roles_by_thread_index_branch():
    a, b, c, ref = _inputs()
    tilecore.compile(ws_gemm(roles_by_branch=True), target="interp")(a, b, c)
    np.testing.assert_array_equal(c.astype(np.float32), ref)


def test_wrong_parity_deadlocks():
    a, b, c, _ = _inputs()
    kern = tilecore.compile(ws_gemm(shift=1), target="interp")
    with pytest.raises(TileRuntimeError, match="deadlock: every role waits") as e:
        kern(a, b, c)
    src, first = inspect.getsourcelines(ws_gemm)
    waits = {first + i for i, line in enumerate(src) if "T.barrier_wait(" in line}
    assert e.value.loc.line in waits


def no_wait_roles():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256) as bx:
            S = T.alloc_shared((64, 64), "float32")
            with T.ws(1):
                T.copy(A, S)
            with T.ws(0):
                T.copy(S, B)
    return k


def test_regions_without_waits_run_in_program_order():
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    b = np.zeros_like(a)
    tilecore.compile(no_wait_roles(), target="interp")(a, b)
    np.testing.assert_array_equal(a, b)


def mismatched():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            S = T.alloc_shared((64,), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            extra = T.alloc_barrier(arrive_count=200)
            with T.ws(1):
                T.copy(A, S)
                T.barrier_arrive(ready)
                T.barrier_arrive(extra)
            with T.ws(0):
                T.barrier_wait(ready, 0)
                T.copy(S, B)
    return k


def test_incomplete_phase_at_block_end():
    with pytest.raises(TileRuntimeError, match=r"extra\[0\].*128 threads arrived, 72 of its 200"):
        tilecore.compile(mismatched(), target="interp")(np.ones(64, np.float32), np.zeros(64, np.float32))


def collective_after_roles():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            S = T.alloc_shared((64,), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                T.copy(A, S)
                T.barrier_arrive(ready)
            with T.ws(0):
                T.barrier_wait(ready, 0)
            T.copy(S, B)
    return k


def test_collective_after_the_roles_is_refused():
    with pytest.raises(TileShapeError, match="outside the kernel's roles") as e:
        tilecore.compile(collective_after_roles(), target="interp")
    assert e.value.loc.line == _line(collective_after_roles, "T.copy(S, B)")


@pytest.mark.parametrize("kw", [{"consumer_first": True}, {"roles_by_branch": True}])
def test_roles_on_the_thread_lowering(kw):
    # emu:sm_90 lowers each role's tile operations over its own 128 threads (role_lowering.py)
    a, b, c, ref = _inputs(64, 64, 64)
    tilecore.compile(ws_gemm(**kw, M=64, N=64, K=64), target="emu:sm_90")(a, b, c)
    np.testing.assert_array_equal(c.astype(np.float32), ref)


def test_fragment_shared_by_two_roles_is_refused():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            F = T.alloc_fragment((64,), "float32")
            with T.ws(0):
                T.fill(F, 1.0)
            with T.ws(1):
                T.copy(F, A)

    with pytest.raises(TileShapeError, match="fragment F is used by T.ws"):
        tilecore.compile(k, target="emu:sm_90")


def wrong_barrier():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            S = T.alloc_shared((64,), "float32")
            early = T.alloc_barrier(arrive_count=128)
            full = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                T.barrier_arrive(early)
                T.tma_copy(A, S, barrier=full)
                T.barrier_arrive(full)
            with T.ws(0):
                T.barrier_wait(early, 0)  # not the copy's mbarrier
                T.copy(S, B)
                T.barrier_wait(full, 0)
    return k


def test_read_before_the_copy_landed(monkeypatch):
    monkeypatch.setenv("TILECORE_CHECK_UNINIT", "1")
    kern = tilecore.compile(wrong_barrier(), target="interp")
    with pytest.raises(TileRuntimeError, match="uninitialized shared buffer S") as e:
        kern(np.ones(64, np.float32), np.zeros(64, np.float32))
    assert e.value.loc.line == _line(wrong_barrier, "T.copy(S, B)")
