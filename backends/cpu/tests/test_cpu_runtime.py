"""The runtime helpers generated kernels call: narrow-float conversion bit-exact with ml_dtypes,
and the vectorizable float32 exp/exp2 within 1 ulp of the correctly rounded result."""

import ml_dtypes
import numpy as np
import pytest
from numba import njit
from tilecore_cpu import runtime as R

FORMATS = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
           "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}


@njit
def _map_enc(fn, x):
    out = np.empty(x.size, np.uint16)
    for i in range(x.size):
        out[i] = fn(x[i])
    return out


@njit
def _map_dec(fn, b):
    out = np.empty(b.size, np.float32)
    for i in range(b.size):
        out[i] = fn(b[i])
    return out


def _bits(a):
    return a.view(np.uint8 if a.itemsize == 1 else np.uint16).astype(np.uint16)


@pytest.mark.parametrize("name", list(FORMATS))
def test_decode_every_bit_pattern(name):
    t = FORMATS[name]
    width = 8 * np.dtype(t).itemsize
    codes = np.arange(2**width, dtype=np.uint16)
    got = _map_dec(getattr(R, f"dec_{name}"), codes)
    want = codes.astype(np.uint8 if width == 8 else np.uint16).view(t).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
    assert np.array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("name", list(FORMATS))
def test_encode_rounds_like_ml_dtypes(name):
    """Random float32 bit patterns (every exponent: subnormals, overflow, inf, NaN payloads),
    values near every narrow rounding boundary, and the classic edge cases."""
    t = FORMATS[name]
    rng = np.random.default_rng(0)
    random_bits = rng.integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    width = 8 * np.dtype(t).itemsize
    grid = np.arange(2**width, dtype=np.uint16).astype(np.uint8 if width == 8 else np.uint16).view(t)
    g = grid.astype(np.float32)
    g = g[np.isfinite(g)]
    mids = np.concatenate([np.nextafter(g, np.inf), np.nextafter(g, -np.inf),
                           (g[:-1].astype(np.float64) / 2 + g[1:] / 2).astype(np.float32)])
    edge = np.array([0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 448, 464, 465, 480, 57344, 61440,
                     65504, 65519.99, 65520, 1e-45, 3e-39], np.float32)
    x = np.concatenate([random_bits, mids, edge]).astype(np.float32)
    with np.errstate(all="ignore"):
        want = _bits(x.astype(t))
    got = _map_enc(getattr(R, f"enc_{name}"), x)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fn,ref", [(R.exp_f32, np.exp), (R.exp2_f32, np.exp2)])
def test_vectorized_exp_is_within_one_ulp(fn, ref):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-160, 130, 300_000), rng.standard_normal(300_000) * 4,
                        [0, -0.0, np.inf, -np.inf, np.nan, 88.72, 88.73, -103.97, 128, -149, -150]])
    x = x.astype(np.float32)
    got = _map_dec(fn, x)
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    ulp = np.abs(got.view(np.int32)[fin].astype(np.int64) - want.view(np.int32)[fin])
    assert ulp.max() <= 1
