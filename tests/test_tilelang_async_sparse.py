"""TileLang's explicit Hopper asynchrony (`T.wgmma_gemm`, `T.wait_wgmma`, `T.fence_proxy_async`,
`T.cp_async_barrier_noinc`), `T.gemm_sp`, `gemm(clear_accum=<kernel value>)`, `elif` chains
of warpgroup branches, and copies out of replicated fragments: against NumPy on interp, cpu
and emu (thread-level kernels on interp and emu:sm_90) and in CUDA source."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileConfigWarning, TileShapeError

TILE_TARGETS = ("interp", "cpu", "emu:sm_90")
THREAD_TARGETS = ("interp", "emu:sm_90")


def _wgmma_kernel(M=32, N=32, K=32, bk=16):
    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((M, bk), "float16")
            b = T.alloc_shared((N, bk), "float16")
            c = T.alloc_fragment((M, N), "float32")
            for ko in T.serial(K // bk):
                T.copy(A[0, ko * bk], a)
                T.copy(B[0, ko * bk], b)
                T.wgmma_gemm(a, b, c, transpose_B=True, clear_accum=(ko == 0))
                T.wait_wgmma(0)
            T.copy(c, C)
    return k


@pytest.mark.parametrize("target", TILE_TARGETS)
def test_wgmma_gemm_with_a_kernel_value_clear_accum(target):
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (32, 32)).astype(np.float16)
    b = rng.integers(-3, 4, (32, 32)).astype(np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TileConfigWarning)
        kern = tilecore.compile(_wgmma_kernel(), out_idx=[2], target=target)
    # exact: small integers; the accumulator is garbage-free only if clear_accum fired at ko == 0
    np.testing.assert_array_equal(np.asarray(kern(a, b)), a.astype(np.float32) @ b.T.astype(np.float32))


def test_wgmma_gemm_is_an_asynchronous_gemm_in_cuda_source():
    pytest.importorskip("tilecore_cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TileConfigWarning)
        kern = tilecore.compile(_wgmma_kernel(64, 64, 32), out_idx=[2], target="cuda:sm_90a")
    src = kern.get_kernel_source()
    assert "wgmma.mma_async" in src and "wgmma.wait_group" in src


def test_wait_wgmma_and_fence_proxy_async_warn_and_check():
    with pytest.warns(TileConfigWarning, match="wait_wgmma"):
        @T.prim_func
        def w(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.wait_wgmma(1)
    with pytest.warns(TileConfigWarning, match="fence_proxy_async"):
        @T.prim_func
        def f(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.fence_proxy_async()
    with pytest.raises(TileShapeError, match="wait_wgmma"):
        @T.prim_func
        def g(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.wait_wgmma(-1)


def _noinc_kernel(n=4):
    """Warpgroup 1 copies two tiles with cp.async and arrives through cp_async_barrier_noinc;
    warpgroup 0 (tile operations: a role) waits and copies them out doubled."""
    @T.prim_func
    def k(A: T.Tensor((n, 128 * 4), "float32"), B: T.Tensor((n, 128 * 4), "float32")):
        with T.Kernel(1, threads=256) as bx:
            S = T.alloc_shared((128 * 4,), "float32")
            F = T.alloc_fragment((128 * 4,), "float32")
            full = T.alloc_barrier(arrive_count=128)
            free = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            if tx < 128:
                for t in T.serial(n):
                    T.barrier_wait(full, t % 2)
                    T.copy(S, F)
                    T.barrier_arrive(free)
                    for i in T.Parallel(128 * 4):
                        F[i] = F[i] * 2.0
                    T.copy(F, B[t, 0])
            elif tx >= 128:
                for t in T.serial(n):
                    T.barrier_wait(free, (t % 2) ^ 1)
                    T.ptx_cp_async(T.access_ptr(S[(tx - 128) * 4], "w"),
                                   T.access_ptr(A[t, (tx - 128) * 4], "r"), 4)
                    T.cp_async_barrier_noinc(full)
    return k


@pytest.mark.parametrize("target", THREAD_TARGETS)
def test_cp_async_barrier_noinc_publishes_the_copies(target):
    a = np.arange(4 * 512, dtype=np.float32).reshape(4, 512)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TileConfigWarning)
        kern = tilecore.compile(_noinc_kernel(), out_idx=[1], target=target)
    np.testing.assert_array_equal(np.asarray(kern(a)), a * 2)


def test_cp_async_barrier_noinc_in_cuda_source():
    pytest.importorskip("tilecore_cuda")
    src = tilecore.compile(_noinc_kernel(), out_idx=[1], target="cuda:sm_90a").get_kernel_source()
    assert "cp.async.wait_group 0" in src and "mbarrier.arrive" in src


def _replicated_copy():
    @T.prim_func
    def k(A: T.Tensor((64, 32), "float32"), P: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((64, 32), "float32")
            m = T.alloc_fragment((64,), "float32")
            s = T.alloc_shared((64,), "float32")
            T.copy(A, a)
            T.reduce_max(a, m, dim=1)
            T.copy(m, s)  # m is held by several threads per row: one of them stores it
            T.copy(s, P)
    return k


@pytest.mark.parametrize("target", TILE_TARGETS)
def test_copy_of_a_replicated_fragment_to_shared_has_one_writer(target):
    a = np.random.default_rng(1).random((64, 32), dtype=np.float32)
    kern = tilecore.compile(_replicated_copy(), out_idx=[1], target=target)
    np.testing.assert_array_equal(np.asarray(kern(a)), a.max(axis=1))


def _sparse(rng, m, k, dtype):
    """A 2:4 (1:2 for float32) sparse matrix and its (A_sparse, E) in TileLang's natural
    row-major metadata (int16: 4 groups per element, chunk = idx0 | idx1 << 2)."""
    dense = np.zeros((m, k), np.float32)
    vals, meta = [], np.zeros((m, k // 16), np.int64)
    for i in range(m):
        row = []
        for g in range(k // 4):
            idx = np.sort(rng.choice(4, 2, replace=False))
            v = rng.integers(-3, 4, 2)
            dense[i, 4 * g + idx] = v
            row += list(v)
            meta[i, g // 4] |= (int(idx[0]) | int(idx[1]) << 2) << (4 * (g % 4))
        vals.append(row)
    meta = np.where(meta >= 1 << 15, meta - (1 << 16), meta).astype(np.int16)
    return dense, np.array(vals, dtype=dtype), meta


def _gemm_sp_kernel(M, N, K, bk):
    @T.prim_func
    def k(As: T.Tensor((M, K // 2), "float16"), E: T.Tensor((M, K // 16), "int16"),
          B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((M, bk // 2), "float16")
            e = T.alloc_shared((M, bk // 16), "int16")
            b = T.alloc_shared((bk, N), "float16")
            c = T.alloc_fragment((M, N), "float32")
            T.clear(c)
            for ko in T.Pipelined(K // bk, num_stages=1):
                T.copy(As[0, ko * bk // 2], a)
                T.copy(E[0, ko * bk // 16], e)
                T.copy(B[ko * bk, 0], b)
                T.gemm_sp(a, e, b, c)
            T.copy(c, C)
    return k


@pytest.mark.parametrize("target", TILE_TARGETS)
def test_gemm_sp_equals_the_dense_product(target):
    rng = np.random.default_rng(2)
    dense, vals, meta = _sparse(rng, 16, 64, np.float16)
    b = rng.integers(-3, 4, (64, 16)).astype(np.float16)
    kern = tilecore.compile(_gemm_sp_kernel(16, 16, 64, 32), out_idx=[3], target=target)
    np.testing.assert_array_equal(np.asarray(kern(vals, meta, b)), dense @ b.astype(np.float32))


def test_gemm_sp_sparse_layout_contract_and_mistakes():
    from tilecore.cuda.intrinsics.sparse_layout import GROUP_CONFIG, get_e_factor, get_e_replicate_factor

    assert get_e_factor(T.float16, T.int16) == 16 and get_e_factor(T.float32, T.int32) == 16
    assert get_e_factor(T.int8, T.int32) == 32 and GROUP_CONFIG[T.float32] == (1, 2)
    assert get_e_replicate_factor(T.float16) == 2 and get_e_replicate_factor(T.int8) == 1
    with pytest.raises(TileShapeError, match="transpose_A"):
        @T.prim_func
        def k(As: T.Tensor((16, 16), "float16"), E: T.Tensor((16, 2), "int16"),
              B: T.Tensor((32, 16), "float16")):
            with T.Kernel(1, threads=128) as bx:
                c = T.alloc_fragment((16, 16), "float32")
                T.gemm_sp(As, E, B, c, transpose_A=True)
    with pytest.raises(TileShapeError, match="does not describe"):
        @T.prim_func
        def k2(As: T.Tensor((16, 16), "float16"), E: T.Tensor((16, 4), "int16"),
               B: T.Tensor((32, 16), "float16")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_shared((16, 16), "float16")
                e = T.alloc_shared((16, 4), "int16")
                b = T.alloc_shared((32, 16), "float16")
                c = T.alloc_fragment((16, 16), "float32")
                T.gemm_sp(a, e, b, c)


def _chain(forward=True):
    """Warpgroup 2 writes S and arrives on `ab`; warpgroup 0 waits on it and arrives on `bc`;
    warpgroup 1 waits on `bc` only and reads S: ordered through warpgroup 0 (happens-before is
    transitive). Without the forward arrive warpgroup 1 waits on nothing that orders it."""
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=384) as bx:
            S = T.alloc_shared((128,), "float32")
            ab = T.alloc_barrier(arrive_count=128)
            bc = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            if tx >= 256:
                S[tx - 256] = A[tx - 256] + 1.0
                T.barrier_arrive(ab)
            elif tx < 128:
                if forward:
                    T.barrier_wait(ab, 0)
                T.barrier_arrive(bc)
            else:
                T.barrier_wait(bc, 0)
                B[tx - 128] = S[255 - tx]
    return k


def test_mbarrier_ordering_is_transitive_on_the_emulator():
    from tilecore.errors import TileRuntimeError

    a = np.arange(128, dtype=np.float32)
    kern = tilecore.compile(_chain(), out_idx=[1], target="emu:sm_90")
    np.testing.assert_array_equal(np.asarray(kern(a)), a[::-1] + 1)
    with pytest.raises(TileRuntimeError, match="data race|deadlock"):
        tilecore.compile(_chain(False), out_idx=[1], target="emu:sm_90")(a)


def _same_value_writes(same=True):
    """Every thread stores A[k] into S[k] (one value per element: TileLang's naive gemv), then
    reads S; with `same=False` the threads store different values: a real write-write race."""
    @T.prim_func
    def k(A: T.Tensor((32,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((32,), "float32")
            for j in T.serial(32):
                S[j] = A[j] if same else A[j] + tx
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for j in T.serial(32):
                acc[0] += S[j]
            B[tx] = acc[0]
    return k


def test_one_value_written_by_many_threads_is_not_a_race():
    from tilecore.errors import TileRuntimeError

    a = np.arange(32, dtype=np.float32)
    for target in THREAD_TARGETS:
        out = tilecore.compile(_same_value_writes(), out_idx=[1], target=target)(a)
        np.testing.assert_array_equal(np.asarray(out), np.full(64, a.sum(), np.float32))
    with pytest.raises(TileRuntimeError, match="both write element"):
        tilecore.compile(_same_value_writes(False), out_idx=[1], target="emu:sm_90")(a)


def _two_readers(n=3):
    """Warpgroups 0 and 1 each read stage S after `full` and release it on `free` (128 arrivals
    each, at different times); warpgroup 2 refills S after waiting for both releases."""
    @T.prim_func
    def k(A: T.Tensor((n, 128), "float32"), B: T.Tensor((2, n, 128), "float32")):
        with T.Kernel(1, threads=384) as bx:
            S = T.alloc_shared((128,), "float32")
            full = T.alloc_barrier(arrive_count=128)
            free = T.alloc_barrier(arrive_count=256)
            tx = T.get_thread_binding()
            if tx < 128:
                for t in T.serial(n):
                    T.barrier_wait(full, t % 2)
                    B[0, t, tx] = S[127 - tx]
                    T.barrier_arrive(free)
            elif tx < 256:  # another program: the emulator runs the two roles as two tasks
                for t in T.serial(n):
                    T.barrier_wait(full, t % 2)
                    B[1, t, tx - 128] = S[255 - tx] * 1.0
                    T.barrier_arrive(free)
            else:
                for t in T.serial(n):
                    T.barrier_wait(free, (t % 2) ^ 1)
                    S[tx - 256] = A[t, tx - 256]
                    T.barrier_arrive(full)
    return k


def test_readers_of_two_warpgroups_released_separately():
    a = np.arange(3 * 128, dtype=np.float32).reshape(3, 128)
    out = tilecore.compile(_two_readers(), out_idx=[1], target="emu:sm_90")(a)
    np.testing.assert_array_equal(np.asarray(out), np.stack([a[:, ::-1]] * 2))


def _allreduce():
    @T.prim_func
    def k(A: T.Tensor((8, 4), "float32"), B: T.Tensor((8, 4), "float32")):
        with T.Kernel(1, threads=(4, 8)) as bx:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            acc = T.alloc_local((1,), "float32")
            red = T.alloc_local((1,), "float32")
            acc[0] = A[tk, tn]
            with T.attr(T.comm_reducer(lambda x, y: T.max(x, y), [T.cast(-1e30, "float32")]),
                        "reduce_scope", 0):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, red[0], tk, dtype="handle"))
            B[tk, tn] = red[0]
    return k


@pytest.mark.parametrize("target", THREAD_TARGETS)
def test_tvm_thread_allreduce_over_thread_index_y(target):
    a = np.random.default_rng(3).random((8, 4), dtype=np.float32)
    out = tilecore.compile(_allreduce(), out_idx=[1], target=target)(a)
    np.testing.assert_array_equal(np.asarray(out), np.broadcast_to(a.max(axis=0), (8, 4)))


def test_tvm_thread_allreduce_cuda_source_and_mistakes():
    from tilecore.errors import TileSyntaxError

    pytest.importorskip("tilecore_cuda")
    src = tilecore.compile(_allreduce(), out_idx=[1], target="cuda:sm_90a").get_kernel_source()
    assert "__syncthreads()" in src and "allreduce_scratch" in src
    with pytest.raises(TileSyntaxError, match="reduce_scope"):
        @T.prim_func
        def k(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                tx = T.get_thread_binding()
                r = T.alloc_local((1,), "float32")
                T.tvm_thread_allreduce(T.uint32(1), A[tx], True, r[0], tx)
    with pytest.raises(TileSyntaxError, match="T.attr"):
        @T.prim_func
        def k2(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                with T.attr(0, "pragma_unroll", 1):
                    A[0] = 1.0


def _per_thread_fragment():
    """A fragment only per-thread code touches (a producer's prefetched indices): one copy per
    thread, as in TileLang."""
    @T.prim_func
    def k(Idx: T.Tensor((64, 4), "int32"), B: T.Tensor((64, 4), "int32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            pref = T.alloc_fragment((4,), "int32")
            for r in T.serial(4):
                pref[r] = Idx[tx, r]
            for r in T.serial(4):
                B[tx, 3 - r] = pref[r] * 2
    return k


@pytest.mark.parametrize("target", THREAD_TARGETS)
def test_fragment_used_per_thread_has_a_copy_per_thread(target):
    idx = np.arange(256, dtype=np.int32).reshape(64, 4)
    out = tilecore.compile(_per_thread_fragment(), out_idx=[1], target=target)(idx)
    np.testing.assert_array_equal(np.asarray(out), idx[:, ::-1] * 2)
