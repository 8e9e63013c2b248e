"""T.transpose(src, dst) (issue 14 item 10, TileLang's tile transpose): shared and fragment
tiles and a batched global region, exact (a permutation) against NumPy on interp, cpu and the
emulator; a destination of the wrong shape is a located TileShapeError."""

from __future__ import annotations

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileShapeError

pytestmark = pytest.mark.usefixtures("isolated_cache")

M, N = 32, 64


def _kernel():
    @T.prim_func
    def k(A: T.Tensor((2, M, N), "float16"), B: T.Tensor((2, N, M), "float16"),
          C: T.Tensor((N, M), "float32"), D: T.Tensor((2, N, M), "float16")):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((M, N), "float16")
            t = T.alloc_shared((N, M), "float16")
            f = T.alloc_fragment((M, N), "float32")
            g = T.alloc_fragment((N, M), "float32")
            T.copy(A[bx, :, :], s)
            T.transpose(s, t)  # shared -> shared
            T.copy(t, B[bx, :, :])
            T.copy(s, f)
            T.transpose(f, g)  # fragment -> fragment, with a cast on the way
            if bx == 0:
                T.copy(g, C)
            T.transpose(A[bx, :, :], D[bx, :, :])  # global regions (a 3-D tensor's slices)

    return k


@pytest.mark.parametrize("target", target_params("interp", "cpu", "emu:sm_80", "emu:sm_90a"))
def test_transpose_matches_numpy(target):
    a = np.random.default_rng(0).standard_normal((2, M, N)).astype(np.float16)
    b, d = np.zeros((2, N, M), np.float16), np.zeros((2, N, M), np.float16)
    c = np.zeros((N, M), np.float32)
    tilecore.compile(_kernel(), target=target)(a, b, c, d)
    np.testing.assert_array_equal(b, a.transpose(0, 2, 1))
    np.testing.assert_array_equal(d, a.transpose(0, 2, 1))
    np.testing.assert_array_equal(c, a[0].T.astype(np.float32))


def test_transpose_into_the_wrong_shape_is_located():
    with pytest.raises(TileShapeError, match=r"gives shape \(64, 32\).*\(32, 64\)") as e:
        @T.prim_func
        def k(A: T.Tensor((M, N), "float16")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((M, N), "float16")
                t = T.alloc_shared((M, N), "float16")
                T.copy(A, s)
                T.transpose(s, t)
    assert "test_transpose.py" in str(e.value)
