"""A region (slice) of a shared or fragment tile as the source or destination of T.reduce_* and
T.cumsum (issue 14 item 10: shared-memory slices are valid TileLang), and whole-buffer
T.atomic_add(Out, tile), against NumPy on interp, cpu and the emulator."""

from __future__ import annotations

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileTypeError

pytestmark = pytest.mark.usefixtures("isolated_cache")


def _kernel():
    @T.prim_func
    def k(A: T.Tensor((8, 64), "float32"), B: T.Tensor((4,), "float32"), M: T.Tensor((2, 64), "float32"),
          C: T.Tensor((8, 64), "float32"), O: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((8, 64), "float32")
            f = T.alloc_fragment((8, 64), "float32")
            r = T.alloc_fragment((4,), "float32")
            m = T.alloc_shared((2, 64), "float32")
            T.copy(A, s)
            T.copy(A, f)
            T.reduce_sum(s[0:4, :], r, dim=1)      # a shared slice as the source
            T.fill(m, -1.0)
            T.reduce_max(f[4:8, :], m[1, :], dim=0, clear=False)  # a fragment slice into a shared row
            T.cumsum(s[2:6, :], dim=1)              # in place on a slice
            T.copy(r, B)
            T.copy(m, M)
            T.copy(s, C)
            ones = T.alloc_fragment((8,), "float32")
            T.fill(ones, 1.0)
            T.atomic_add(O, ones)                   # a whole buffer

    return k


@pytest.mark.parametrize("target", target_params("interp", "cpu", "emu:sm_90a"))
def test_region_operands_of_reductions(target):
    a = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    b, m = np.zeros(4, np.float32), np.zeros((2, 64), np.float32)
    c, o = np.zeros((8, 64), np.float32), np.ones(8, np.float32)
    tilecore.compile(_kernel(), target=target)(a, b, m, c, o)
    np.testing.assert_allclose(b, a[:4].sum(axis=1, dtype=np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m[0], -1.0)
    np.testing.assert_array_equal(m[1], np.maximum(-1.0, a[4:].max(axis=0)))
    want = a.copy()
    want[2:6] = np.cumsum(a[2:6], axis=1, dtype=np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(o, 2.0)


def test_a_global_region_source_is_located():
    with pytest.raises(TileTypeError, match="reduce_sum source A is in global memory") as e:
        @T.prim_func
        def k(A: T.Tensor((8, 64), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                r = T.alloc_fragment((4,), "float32")
                T.reduce_sum(A[0:4, :], r, dim=1)
                T.copy(r, B)
    assert "test_reduce_regions.py" in str(e.value)
