"""`T.ptx_cp_async` + `T.ptx_commit_group` / `T.ptx_wait_group` with `T.access_ptr` in
thread-level kernels: a double-buffered per-thread copy pipeline against NumPy on interp and
emu:sm_90 (and its CUDA source), the emulator's report of a read before the wait, and the
located errors for misuse."""

from __future__ import annotations

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileRuntimeError, TileShapeError, TileTypeError

TARGETS = ("interp", "emu:sm_90")


def pipeline(n_tiles, threads=32, vec=4, wait=True, pred=False):
    tile = threads * vec

    @T.prim_func
    def k(A: T.Tensor((n_tiles * tile,), "float32"), B: T.Tensor((n_tiles * tile,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((2, tile), "float32")
            # prologue: tile 0 into stage 0
            T.ptx_cp_async(T.access_ptr(S[0, tx * vec], "w", vec), T.access_ptr(A[tx * vec], "r", vec), vec)
            T.ptx_commit_group()
            for t in T.serial(n_tiles):
                if t + 1 < n_tiles:  # uniform: every thread issues the next tile
                    T.ptx_cp_async(T.access_ptr(S[(t + 1) % 2, tx * vec], "w"),
                                   T.access_ptr(A[(t + 1) * tile + tx * vec], "r"), vec,
                                   predicate=(tx % 2 == 0) if pred else None)
                T.ptx_commit_group()
                if wait:
                    T.ptx_wait_group(1)
                T.sync_threads()
                for j in T.serial(vec):  # read another thread's elements: needs the barrier
                    B[t * tile + tx * vec + j] = S[t % 2, (threads - 1 - tx) * vec + j] * 2.0
                T.sync_threads()
    return k


def _want(a, n_tiles, threads=32, vec=4, pred=False):
    tiles = a.reshape(n_tiles, threads, vec).copy()
    if pred:  # odd threads' copies of tiles 1.. wrote zeros
        tiles[1:, 1::2] = 0
    return (tiles[:, ::-1] * 2).reshape(-1)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("pred", [False, True])
def test_double_buffered_cp_async_pipeline(target, pred):
    kern = tilecore.compile(pipeline(3, pred=pred), out_idx=[1], target=target)
    a = np.arange(3 * 128, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(kern(a)), _want(a, 3, pred=pred))


def test_reading_before_the_wait_is_reported():
    kern = tilecore.compile(pipeline(2, wait=False), out_idx=[1], target="emu:sm_90")
    with pytest.raises(TileRuntimeError, match="asynchronous"):
        kern(np.zeros(256, np.float32))


def test_cuda_source_has_cp_async_groups():
    pytest.importorskip("tilecore_cuda")
    src = tilecore.compile(pipeline(3), out_idx=[1], target="cuda:sm_90a").get_kernel_source()
    assert "cp.async" in src and "cp.async.commit_group" in src and "cp.async.wait_group 1" in src


def test_cp_async_mistakes_are_located_errors():
    with pytest.raises(TileShapeError, match="moves 4 / 8 / 16 bytes"):
        @T.prim_func
        def k1(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                tx = T.get_thread_binding()
                S = T.alloc_shared((64,), "float32")
                T.ptx_cp_async(T.access_ptr(S[tx], "w"), T.access_ptr(A[tx], "r"), 3)
    with pytest.raises(TileTypeError, match="copies global memory into shared memory"):
        @T.prim_func
        def k2(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                tx = T.get_thread_binding()
                S = T.alloc_shared((64,), "float32")
                T.ptx_cp_async(T.access_ptr(A[tx], "w"), T.access_ptr(S[tx], "r"), 1)
    with pytest.raises(TileTypeError, match="must be a T.access_ptr"):
        @T.prim_func
        def k3(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                tx = T.get_thread_binding()
                S = T.alloc_shared((64,), "float32")
                T.ptx_cp_async(S[tx], A[tx], 1)
