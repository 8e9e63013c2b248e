"""T.floordiv / T.floormod and the bit operations on the emulated thread lowering (emu:sm_80):
the same values as NumPy; an active lane's out-of-range shift count is a TileRuntimeError."""

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileRuntimeError


def _kernel(dtype):
    @T.prim_func
    def bits(A: T.Tensor((96,), dtype), B: T.Tensor((96,), dtype), S_: T.Tensor((96,), dtype),
             C: T.Tensor((6, 96), dtype)):
        with T.Kernel(3, threads=32) as bx:
            for i in T.Parallel(32):
                k = bx * 32 + i
                if k < 90:  # masked lanes: their shift counts and divisors are never used
                    C[0, k] = T.floordiv(A[k], B[k])
                    C[1, k] = T.floormod(A[k], B[k])
                    C[2, k] = A[k] << S_[k]
                    C[3, k] = A[k] >> S_[k]
                    C[4, k] = (A[k] & B[k]) ^ (A[k] | 7)
                    C[5, k] = ~A[k]
    return bits


@pytest.mark.parametrize("dtype", ["int32", "int16", "uint32"])
def test_int_ops_on_emu_match_numpy(dtype):
    d = np.dtype(dtype)
    rng = np.random.default_rng(4)
    info = np.iinfo(d)
    a = rng.integers(max(info.min, -(2**20)), min(info.max, 2**20), 96).astype(d)
    b = rng.integers(max(info.min, -(2**20)), min(info.max, 2**20), 96).astype(d)
    b[b == 0] = 5
    s = rng.integers(0, d.itemsize * 8, 96).astype(d)
    b[90:], s[90:] = 0, 99  # what the masked lanes would divide and shift by
    out = tilecore.jit(_kernel(dtype), out_idx=[-1], target="emu:sm_80")(a, b, s)
    k = slice(0, 90)
    a, b, s = a[k], b[k], s[k]
    ref = np.stack([np.floor_divide(a, b), np.mod(a, b), a << s, a >> s, (a & b) ^ (a | 7), ~a])
    np.testing.assert_array_equal(out[:, k], ref.astype(d))


def test_out_of_range_shift_on_an_active_lane_is_reported():
    a = np.ones(96, np.int32)
    s = np.zeros(96, np.int32)
    s[7] = 40
    with pytest.raises(TileRuntimeError, match="shift count 40"):
        tilecore.jit(_kernel("int32"), out_idx=[-1], target="emu:sm_80")(a, a, s)


def test_scalar_parameters_on_emu():
    """`limit: T.int32` sizes the grid and masks the body; passed as a Python int."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
    from test_scalar_params import _masked_scale

    kernel = tilecore.jit(_masked_scale(), out_idx=[-1], target="emu:sm_80")
    a = np.arange(256, dtype=np.int32)
    for limit, shift in [(256, 5), (70, -2)]:
        want = np.zeros(256, np.int32)
        want[:limit] = a[:limit] + shift
        np.testing.assert_array_equal(kernel(a, limit, shift), want)
