"""`T.reinterpret` of a float's bits as an integer (issue 14, TileLang's radix top-k): every
pattern class (normals, subnormals, zeros, infinities, NaN) against NumPy's `.view`, on
interp, cpu and the emulator."""


import ml_dtypes
import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T

TARGETS = target_params("interp", "cpu", "emu:sm_80")
N = 2048


pytestmark = pytest.mark.usefixtures("isolated_cache")


def _kernel():
    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "uint32"), C: T.Tensor((N,), "float16"),
          D: T.Tensor((N,), "int16"), E: T.Tensor((N,), "bfloat16"), F: T.Tensor((N,), "uint16"),
          G: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                B[i] = T.reinterpret(A[i], T.uint32)
                D[i] = T.reinterpret(C[i], "int16")
                F[i] = T.reinterpret(E[i], "uint16")
                G[i] = T.reinterpret("int32", A[i])  # either argument order
    return k


def _kernel_f32():
    """The float32 -> uint32 line alone, for cpu: numba's compile time grows faster than the
    kernel (the four encodings of `_kernel` take about 8 CPU seconds, this one about 1)."""
    @T.prim_func
    def k32(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "uint32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                B[i] = T.reinterpret(A[i], T.uint32)
    return k32


def _expected(bits: np.ndarray, values: np.ndarray, nan_bits: int) -> np.ndarray:
    """`bits` with the two documented normalizations: -0.0 reads as +0.0, NaN as the quiet NaN."""
    f = values.astype(np.float32)
    want = bits.copy()
    want[np.isnan(f)] = nan_bits
    want[f == 0] = 0
    return want


@pytest.mark.parametrize("target", TARGETS)
def test_float_bits_match_numpy_view(target):
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    # edge patterns: zeros, infinities, NaN, the smallest/largest subnormal, the smallest normal,
    # the largest finite, and powers of two (where log2 may round to the neighbour)
    edge = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 1, 0x007FFFFF, 0x00800000,
            0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0x3F7FFFFF, 0x40000000, 0x3FFFFFFF, 0x80000001]
    bits[:len(edge)] = edge
    bits[len(edge):len(edge) + 254] = (np.arange(1, 255, dtype=np.uint32) << 23)  # every 2^e
    a = bits.view(np.float32)
    h = rng.integers(0, 2**16, N, dtype=np.uint32).astype(np.uint16)
    h[:6] = [0, 0x8000, 0x7C00, 0x0001, 0x03FF, 0x0400]
    c, e = h.view(np.float16), h.view(ml_dtypes.bfloat16)
    want32 = _expected(bits, a, 0x7FC00000)
    if target == "cpu":
        b = tilecore.compile(_kernel_f32(), out_idx=[1], target=target)(a)
        np.testing.assert_array_equal(b, want32)
        return
    b, d, f, g = (np.asarray(x) for x in
                  tilecore.compile(_kernel(), out_idx=[1, 3, 5, 6], target=target)(a, c, e))
    np.testing.assert_array_equal(b, want32)
    np.testing.assert_array_equal(g, want32.view(np.int32))
    np.testing.assert_array_equal(d.view(np.uint16), _expected(h, c, 0x7E00))
    np.testing.assert_array_equal(f, _expected(h, e, 0x7FC0))
