"""Thread-level kernels (T.get_thread_binding, T.sync_threads, mbarriers, T.ws) on interp and
emu:sm_90: results against NumPy, and every misuse a located error (docs/architecture.md,
"Thread-level kernels")."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileRuntimeError, TileShapeError, TileTargetError

TARGETS = ("interp", "emu:sm_90")
SIMT_TARGETS = TARGETS + ("emu:hip:gfx942", "emu:metal")  # no mbarriers: thread index, barriers


def _line(fn, text: str) -> int:
    """The file line of the first source line of `fn` containing `text`."""
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(src) if text in s)


def simt_affine(N, threads):
    @T.prim_func
    def k(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            i = bx * threads + tx
            if i < N:
                B[i] = A[i] * 3 + tx
    return k


def reverse_in_shared(threads, sync=True):
    @T.prim_func
    def k(A: T.Tensor((threads,), "float32"), B: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.thread_binding(0, threads, thread="threadIdx.x")
            S = T.alloc_shared((threads,), "float32")
            S[tx] = A[tx]
            if sync:
                T.sync_threads()
            B[tx] = S[threads - 1 - tx]
    return k


def pipe(N=512, consumer_first=True, parity_shift=0, count=128):
    """Two roles through a 2-stage ring: warpgroup 1 fills S, warpgroup 0 reads it."""
    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((2, 128), "float32")
            full = T.alloc_barrier([count, count])
            empty = T.alloc_barrier([128, 128])
            for it in T.serial(N // 128):
                if consumer_first:
                    with T.ws(0):
                        T.barrier_wait(full[it % 2], (it // 2) % 2)
                        B[it * 128 + tx] = S[it % 2, 127 - tx] + 1.0
                        T.barrier_arrive(empty[it % 2])
                with T.ws(1):
                    T.barrier_wait(empty[it % 2], (it // 2 + 1 + parity_shift) % 2)
                    S[it % 2, tx - 128] = A[it * 128 + tx - 128]
                    T.barrier_arrive(full[it % 2])
                if not consumer_first:
                    with T.ws(0):
                        T.mbarrier_wait_parity(full[it % 2], (it // 2) % 2)
                        B[it * 128 + tx] = S[it % 2, 127 - tx] + 1.0
                        T.mbarrier_arrive(empty[it % 2])
    return k


@pytest.mark.parametrize("target", SIMT_TARGETS)
def test_thread_index_per_thread_stores(target):
    a = np.arange(300, dtype=np.int32)
    b = np.full(300, -1, np.int32)
    tilecore.compile(simt_affine(300, 128), target=target)(a, b)
    np.testing.assert_array_equal(b, a * 3 + np.arange(300) % 128)


@pytest.mark.parametrize("target", SIMT_TARGETS)
def test_sync_threads_orders_shared_memory(target):
    a = np.random.default_rng(0).standard_normal(128).astype(np.float32)
    b = np.zeros(128, np.float32)
    tilecore.compile(reverse_in_shared(128), target=target)(a, b)
    np.testing.assert_array_equal(b, a[::-1])


@pytest.mark.parametrize("target", TARGETS)
def test_missing_sync_is_a_race(target):
    # the automatic barriers are off (TileLang's tl.disable_thread_storage_sync): the read of
    # another thread's write without T.sync_threads is reported, not silently right
    k = tilecore.compile(reverse_in_shared(64, sync=False), target=target,
                         pass_configs={"tl.disable_thread_storage_sync": True})
    with pytest.raises(TileRuntimeError, match="race|barrier") as e:
        k(np.ones(64, np.float32), np.zeros(64, np.float32))
    assert e.value.loc is not None and e.value.loc.line == _line(reverse_in_shared, "B[tx] = S")


def var_branch():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            v = T.alloc_var(T.int32)
            v = tx % 2
            S[tx] = A[tx]
            B[tx] = 0.0
            if v == 1:
                B[tx] = S[tx - 1]
    return k


@pytest.mark.parametrize("target", SIMT_TARGETS)
def test_automatic_barrier_stays_out_of_per_thread_branches(target):
    # T.alloc_var is per-thread here: the barrier the read needs goes before the branch
    a = np.arange(128, dtype=np.float32)
    b = np.ones(128, np.float32)
    tilecore.compile(var_branch(), target=target)(a, b)
    np.testing.assert_array_equal(b, np.where(np.arange(128) % 2 == 1, a - 1, 0))


def named_barrier_scan():
    @T.prim_func
    def k(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32")):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "int32")
            v = T.alloc_var(T.int32)
            if tx < 128:
                S[tx] = A[tx]
                for s in T.serial(7):
                    T.sync_threads(1, 128)
                    v = S[tx]
                    if tx >= (1 << s):
                        v = v + S[tx - (1 << s)]
                    T.sync_threads(1, 128)
                    S[tx] = v
                B[tx] = S[tx]
            else:
                B[tx] = A[tx]
    return k


@pytest.mark.parametrize("target", SIMT_TARGETS)
def test_named_barrier_prefix_sum(target):
    a = np.arange(256, dtype=np.int32) % 7
    b = np.zeros(256, np.int32)
    tilecore.compile(named_barrier_scan(), target=target,
                     pass_configs={"tl.disable_thread_storage_sync": True})(a, b)
    np.testing.assert_array_equal(b[:128], np.cumsum(a[:128]))
    np.testing.assert_array_equal(b[128:], a[128:])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("consumer_first", [True, False])
def test_mbarrier_roles(target, consumer_first):
    a = np.arange(512, dtype=np.float32)
    b = np.zeros(512, np.float32)
    tilecore.compile(pipe(consumer_first=consumer_first), target=target)(a, b)
    np.testing.assert_array_equal(b, a.reshape(-1, 128)[:, ::-1].reshape(-1) + 1)


@pytest.mark.parametrize("target", TARGETS)
def test_wrong_parity_is_a_deadlock(target):
    k = tilecore.compile(pipe(parity_shift=1), target=target)
    with pytest.raises(TileRuntimeError, match="deadlock: every thread group waits") as e:
        k(np.zeros(512, np.float32), np.zeros(512, np.float32))
    assert e.value.loc.line in (_line(pipe, "T.barrier_wait(full"), _line(pipe, "T.barrier_wait(empty"))


@pytest.mark.parametrize("target", TARGETS)
def test_arrival_count_mismatch(target):
    # 128 producers arrive on barriers that expect 256: the consumers' waits never return,
    # so neither do the producers' (reported where the last role blocked)
    k = tilecore.compile(pipe(count=256), target=target)
    with pytest.raises(TileRuntimeError, match="deadlock: every thread group waits.*mbarrier"):
        k(np.zeros(512, np.float32), np.zeros(512, np.float32))


def arrive_only(count):
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            bar = T.alloc_barrier(arrive_count=count)
            tx = T.get_thread_binding()
            A[tx] = 1.0
            T.barrier_arrive(bar)
    return k


def test_partial_phase_at_block_end():
    tilecore.compile(arrive_only(128), target="interp")(np.zeros(128, np.float32))
    with pytest.raises(TileRuntimeError, match=r"bar\[0\].*128 threads arrived, 72 of its 200"):
        tilecore.compile(arrive_only(200), target="interp")(np.zeros(128, np.float32))


def tile_op_in_branch():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((64,), "float32")
            if T.get_thread_binding() < 32:
                T.fill(F, 1.0)
            T.copy(F, A)
    return k


def test_tile_op_under_thread_branch():
    # a branch on the thread index whose sides hold tile operations is a role split: interp
    # runs it at the tile level (tilecore.lower.tile_roles); the thread lowering refuses it
    a = np.zeros(64, np.float32)
    tilecore.compile(tile_op_in_branch(), target="interp")(a)
    np.testing.assert_array_equal(a, np.ones(64, np.float32))
    with pytest.raises(TileShapeError, match="T.fill inside a branch on a thread-varying") as e:
        tilecore.compile(tile_op_in_branch(), target="emu:sm_90")
    assert e.value.loc.line == _line(tile_op_in_branch, "T.fill")


def test_tile_only_targets_refuse():
    with pytest.raises(TileTargetError, match="T.get_thread_binding makes this a thread-level") as e:
        tilecore.compile(simt_affine(64, 64), target="cpu")
    assert e.value.loc.line == _line(simt_affine, "T.get_thread_binding")
    # mbarriers need try-wait on a phase (sm_90): refused where the lowering target lacks it
    with pytest.raises(TileTargetError, match="T.alloc_barrier needs mbarriers"):
        tilecore.compile(pipe(), target="emu:sm_80")


def test_parse_time_errors():
    def bad(kind):
        @T.prim_func
        def k(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                if kind == "binding":
                    tx = T.thread_binding(0, 256, thread="threadIdx.x")
                    A[tx] = 0.0
                elif kind == "ws":
                    with T.ws(1):
                        A[0] = 0.0
                elif kind == "named":
                    tx = T.get_thread_binding()
                    T.sync_threads(1, 100)
                    A[tx] = 0.0
                elif kind == "dim":
                    ty = T.get_thread_binding(1)
                    A[ty] = 0.0
        return k

    for kind, msg in (("binding", "must span the block's 128"), ("ws", "warpgroup ids"),
                      ("named", "named barrier"), ("dim", "dimension 1 does not exist")):
        with pytest.raises(TileShapeError, match=msg):
            bad(kind)


def test_sync_threads_in_tile_program_stays_a_hint():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((128,), "float32")
            T.copy(A, S)
            T.sync_threads()
            T.copy(S, B)

    kern = tilecore.compile(k, target="interp")
    assert "sync_threads" not in kern.get_ir("input")
    a = np.arange(128, dtype=np.float32)
    b = np.zeros(128, np.float32)
    kern(a, b)
    np.testing.assert_array_equal(a, b)


def test_printed_ir_names_the_constructs():
    text = tilecore.compile(pipe(), target="interp").get_ir("input")
    for name in ("T.get_thread_binding()", "with T.ws(0):", "T.barrier_wait(full[",
                 "T.barrier_arrive(empty["):
        assert name in text, name
