"""TVM script's vector forms in kernels (issue 14 item 10): `T.Ramp(base, 1, lanes)` as a
subscript is the slice `base:base + lanes`; assigning a region to a slice is a copy and a scalar
to a slice a fill (TVM's vector store), on interp, cpu and the emulator; `T.sync_global()` is
TileLang's other name of `T.sync_grid()`. Misuse is a located error."""

from __future__ import annotations

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileShapeError

pytestmark = pytest.mark.usefixtures("isolated_cache")


def _kernel():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.serial(8):
                base = bx * 32 + i * 4
                B[T.Ramp(base, 1, 4)] = A[T.Ramp(63 - base - 3, 1, 4)]  # a 4-element copy
            C[bx * 32:bx * 32 + 32] = 1.5  # a fill
            C[bx * 32:bx * 32 + 4] = A[bx * 32:bx * 32 + 4]

    return k


@pytest.mark.parametrize("target", target_params("interp", "cpu", "emu:sm_80"))
def test_ramp_subscripts_and_slice_assignment(target):
    a = np.arange(64, dtype=np.float32)
    b, c = np.zeros(64, np.float32), np.zeros(64, np.float32)
    tilecore.compile(_kernel(), target=target)(a, b, c)
    want = np.concatenate([a[63 - q * 4 - 3:63 - q * 4 + 1] for q in range(16)])
    np.testing.assert_array_equal(b, want)
    want_c = np.full(64, 1.5, np.float32)
    want_c[0:4], want_c[32:36] = a[0:4], a[32:36]
    np.testing.assert_array_equal(c, want_c)


def test_sync_global_is_sync_grid():
    def prog(sync):
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(2, threads=32) as bx:
                sync()
                for i in T.Parallel(32):
                    A[bx * 32 + i] = 1.0
        return k

    assert prog(T.sync_global).script() == prog(T.sync_grid).script()


def test_vector_index_misuse_is_located():
    with pytest.raises(TileShapeError, match="T.Ramp with stride 2 is not provided") as e:
        @T.prim_func
        def strided(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                B[T.Ramp(0, 2, 4)] = A[T.Ramp(0, 1, 4)]
    assert "test_tilelang_vector_index.py" in str(e.value)
    with pytest.raises(TileShapeError, match="cannot assign tuple to a slice of B"):
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                B[0:4] = (1.0, 2.0)


def test_annotate_safe_value_zero_is_tilecores_edge_and_other_values_raise():
    @T.prim_func
    def ok(A: T.Tensor((60,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            T.annotate_safe_value({A: 0})
            s = T.alloc_shared((64,), "float32")
            T.copy(A[0:64], s)  # clipped at A's end: zero-filled
            T.copy(s, B)

    a, b = np.arange(1, 61, dtype=np.float32), np.full(64, 7.0, np.float32)
    tilecore.compile(ok, target="interp")(a, b)
    np.testing.assert_array_equal(b, np.concatenate([a, np.zeros(4, np.float32)]))
    with pytest.raises(TileShapeError, match=r"annotate_safe_value\(A: -1\) is not provided"):
        @T.prim_func
        def other(A: T.Tensor((60,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.annotate_safe_value({A: -1})
