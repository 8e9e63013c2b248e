"""Thread-level SIMT kernels (thread index, T.sync_threads) rendered as MSL and executed on
the CPU by metal-cpu; mbarriers are refused (Metal has none)."""

from __future__ import annotations

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileTargetError


def reverse_blocks(N, threads):
    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((threads,), "float32")
            S[tx] = A[bx * threads + tx] * 2.0
            T.sync_threads()
            B[bx * threads + tx] = S[threads - 1 - tx] + tx
    return k


def test_simt_kernel_runs_on_metal_cpu():
    a = np.arange(256, dtype=np.float32)
    b = np.zeros(256, np.float32)
    tilecore.compile(reverse_blocks(256, 64), target="metal-cpu")(a, b)
    ref = (a.reshape(-1, 64)[:, ::-1] * 2 + np.arange(64)).reshape(-1)
    np.testing.assert_array_equal(b, ref)


def test_metal_refuses_mbarriers():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            bar = T.alloc_barrier(arrive_count=64)
            T.barrier_arrive(bar)
            A[T.get_thread_binding()] = 1.0

    with pytest.raises(TileTargetError, match="T.alloc_barrier needs mbarriers, which metal"):
        tilecore.compile(k, target="metal-cpu")


def test_an_ordered_atomic_is_refused_with_its_line():
    """Metal has no device-scope fence here: `T.atomic_add(memory_order='acq_rel')` (a hand-off
    between blocks) is refused, not silently relaxed."""
    @T.prim_func
    def k(Cnt: T.Tensor((1,), "int32"), Out: T.Tensor((2,), "int32")):
        with T.Kernel(2, threads=32) as bx:
            tx = T.get_thread_binding()
            if tx == 0:
                Out[bx] = T.atomic_add(Cnt[0], 1, memory_order="acq_rel", return_prev=True)
    with pytest.raises(TileTargetError, match="memory_order") as e:
        tilecore.compile(k, target="metal-cpu")
    assert "test_metal_thread_level.py" in str(e.value)
