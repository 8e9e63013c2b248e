"""`T.tvm_warp_shuffle` (TVM's `__shfl_sync`) in thread-level kernels on interp and emu:sm_90:
a butterfly over lanes (Hadamard-style) against NumPy, groups narrower than a warp, and the
located errors for masks, widths and divergent shuffles."""

from __future__ import annotations

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileShapeError

TARGETS = ("interp", "emu:sm_90")


def butterfly(threads, rounds):
    @T.prim_func
    def k(A: T.Tensor((threads,), "float32"), B: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            v = T.alloc_local((1,), "float32")
            o = T.alloc_local((1,), "float32")
            v[0] = A[tx]
            for r in T.serial(rounds):
                o[0] = T.tvm_warp_shuffle(0xFFFFFFFF, v[0], tx ^ (1 << r), 32, 32)
                v[0] = T.if_then_else(((tx >> r) & 1) == 0, v[0] + o[0], o[0] - v[0])
            B[tx] = v[0]
    return k


def grouped(threads, width):
    @T.prim_func
    def k(A: T.Tensor((threads,), "int32"), B: T.Tensor((threads,), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            # lane width-1-l of each group (src lanes past the width wrap, as __shfl_sync's do)
            B[tx] = T.tvm_warp_shuffle(0xFFFFFFFF, A[tx] * 10, width - 1 - tx % width + width, width, 32)
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_butterfly_is_a_hadamard_transform_within_each_warp(target):
    threads, rounds = 64, 5
    kern = tilecore.compile(butterfly(threads, rounds), out_idx=[1], target=target)
    a = np.arange(threads, dtype=np.float32) % 7 - 3
    h = np.array([[1.0]])
    for _ in range(rounds):
        h = np.block([[h, h], [h, -h]])
    want = np.concatenate([h @ a[w * 32:(w + 1) * 32] for w in range(threads // 32)])
    np.testing.assert_array_equal(np.asarray(kern(a)), want.astype(np.float32))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("width", [4, 32])
def test_shuffle_within_groups_of_width(target, width):
    kern = tilecore.compile(grouped(64, width), out_idx=[1], target=target)
    a = np.arange(64, dtype=np.int32)
    lane = np.arange(64) % width
    np.testing.assert_array_equal(np.asarray(kern(a)), (a - lane + (width - 1 - lane)) * 10)


def test_cuda_source_uses_shfl_sync():
    pytest.importorskip("tilecore_cuda")
    src = tilecore.compile(grouped(64, 4), out_idx=[1], target="cuda:sm_90a").get_kernel_source()
    assert "__shfl_sync(" in src and ", 4)" in src


def test_shuffle_mistakes_are_located_errors():
    with pytest.raises(TileShapeError, match="full-warp mask"):
        @T.prim_func
        def k1(A: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                tx = T.get_thread_binding()
                A[tx] = T.tvm_warp_shuffle(0xFFFF, A[tx], 0, 32, 32)
    with pytest.raises(TileShapeError, match="power of two"):
        @T.prim_func
        def k2(A: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                tx = T.get_thread_binding()
                A[tx] = T.tvm_warp_shuffle(0xFFFFFFFF, A[tx], 0, 12, 32)

    @T.prim_func
    def k3(A: T.Tensor((32,), "int32"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            tx = T.get_thread_binding()
            if tx < 16:
                B[tx] = T.tvm_warp_shuffle(0xFFFFFFFF, A[tx], 0, 32, 32)
    with pytest.raises(TileShapeError, match="executed by every lane"):
        kern = tilecore.compile(k3, target="emu:sm_90")
        kern(np.zeros(32, np.int32), np.zeros(32, np.int32))
