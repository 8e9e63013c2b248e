"""The prelude's float32 functions (tanh, erf, pow: no LLVM lowering without ocml) compiled for
the host with clang-22 and compared with NumPy, and the integer power with the oracle's."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest
from hip_test_util import needs_clang
from tilecore_hip import build
from tilecore_hip import prelude as P

from tilecore import dtypes as dt
from tilecore import semantics

HOST_SHIM = "#define __device__\n"
EXPORTS = """
extern "C" void run_unary(int which, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = which == 0 ? tilecore_tanhf(x[i]) : tilecore_erff(x[i]);
}
extern "C" void run_pow(const float* x, const float* e, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = tilecore_powf(x[i], e[i]);
}
extern "C" void run_ipow(const long long* a, const long long* b, long long* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = tilecore_ipow(a[i], b[i]);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("prelude")
    src, so = d / "math.cpp", d / "math.so"
    src.write_text(HOST_SHIM + "\n".join([*P.MATH.values(), P.IPOW]) + EXPORTS)
    # -ffp-contract=off: the device compiles these without contracting either (no fast math)
    subprocess.run([build.tool("clang++"), "-O2", "-shared", "-fPIC", "-ffp-contract=off",
                    str(src), "-o", str(so)], check=True, capture_output=True)
    return ctypes.CDLL(str(so))


def _call(fn, *arrays, out_dtype):
    n = len(arrays[0])
    out = np.zeros(n, dtype=out_dtype)
    fn(*[a.ctypes.data_as(ctypes.c_void_p) for a in (*arrays, out)], ctypes.c_int(n))
    return out


def _ulps(got, want):
    """Distance in float32 ulps of `want` (at least the smallest normal's)."""
    spacing = np.spacing(np.maximum(np.abs(want), np.float32(1.2e-38)).astype(np.float32))
    return np.abs(got.astype(np.float64) - want.astype(np.float64)) / spacing


@needs_clang
@pytest.mark.parametrize("which,ref", [(0, np.tanh), (1, None)])
def test_tanh_and_erf_within_a_few_ulps(lib, which, ref):
    import math

    x = np.concatenate([np.linspace(-6, 6, 20001), np.geomspace(1e-30, 10, 2000),
                        -np.geomspace(1e-30, 10, 2000)]).astype(np.float32)
    want = (np.tanh(x.astype(np.float64)) if ref is not None
            else np.array([math.erf(float(v)) for v in x])).astype(np.float32)
    run = lib.run_unary
    n = len(x)
    out = np.zeros(n, dtype=np.float32)
    run(ctypes.c_int(which), x.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_int(n))
    assert _ulps(out, want).max() <= 8
    special = np.array([np.inf, -np.inf, np.nan], dtype=np.float32)
    out = np.zeros(3, dtype=np.float32)
    run(ctypes.c_int(which), special.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_int(3))
    assert out[0] == 1 and out[1] == -1 and np.isnan(out[2])


@needs_clang
def test_powf_matches_numpy(lib):
    rng = np.random.default_rng(0)
    x = rng.uniform(0.01, 20, 5000).astype(np.float32)
    e = rng.uniform(-8, 8, 5000).astype(np.float32)
    got = _call(lib.run_pow, x, e, out_dtype=np.float32)
    want = np.power(x.astype(np.float64), e.astype(np.float64))
    # the documented bound: relative error grows with |y * log2 x| (exp2 amplifies its rounding)
    bound = (np.abs(e * np.log2(x.astype(np.float64))) + 2) * 2.0 ** -23
    assert (np.abs(got - want) / want <= bound).all()
    sx = np.array([-2, -2, -2, 0, -0.0, -0.0, 0, np.inf, -np.inf, -np.inf, 1, np.nan, 2], np.float32)
    se = np.array([3, 2, 0.5, -1, 3, 0.5, 0, -1, 3, 0.5, np.nan, 0, np.nan], np.float32)
    with np.errstate(all="ignore"):
        want = np.power(sx, se)
    np.testing.assert_array_equal(_call(lib.run_pow, sx, se, out_dtype=np.float32), want)


@needs_clang
def test_integer_pow_wraps_like_the_oracle(lib):
    a = np.array([3, -3, 2, 7, -1, -1, 1, 0, 5, 0, 123456789], dtype=np.int64)
    b = np.array([5, 3, 63, 40, 7, -3, -5, 0, -2, 3, 9], dtype=np.int64)
    got = _call(lib.run_ipow, a, b, out_dtype=np.int64)
    pow_ = semantics.INT_BINARY["pow"]
    want = np.array([int(pow_(int(x), int(y))) % 2**64 for x, y in zip(a, b)], dtype=np.uint64).view(np.int64)
    np.testing.assert_array_equal(got, want)


FP8_EXPORTS = """
extern "C" void dec_{s}(const unsigned char* v, float* y, int n) {{
  for (int i = 0; i < n; ++i) y[i] = {dec}(v[i]);
}}
extern "C" void enc32_{s}(const float* x, unsigned char* y, int n) {{
  for (int i = 0; i < n; ++i) y[i] = {e32}(x[i]);
}}
extern "C" void enc64_{s}(const double* x, unsigned char* y, int n) {{
  for (int i = 0; i < n; ++i) y[i] = {e64}(x[i]);
}}
"""


@pytest.fixture(scope="module")
def fp8lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("fp8")
    parts, exports = [HOST_SHIM], []
    for dtype, (short, *_rest) in P.FP8.items():
        (dec, t1), (e32, t2), (e64, t3) = (P.fp8_decoder(dtype), P.fp8_encoder(dtype, "float32"),
                                           P.fp8_encoder(dtype, "float64"))
        parts += [t1, t2, t3]
        exports.append(FP8_EXPORTS.format(s=short, dec=dec, e32=e32, e64=e64))
    src, so = d / "fp8.cpp", d / "fp8.so"
    src.write_text("\n".join(parts + exports))
    subprocess.run([build.tool("clang++"), "-O2", "-shared", "-fPIC", str(src), "-o", str(so)],
                   check=True, capture_output=True)
    return ctypes.CDLL(str(so))


def _fp8_inputs(np_fp8, dtype):
    """Every fp8 value, the midpoints between neighbours (ties), just above and below them,
    values past the largest finite one, subnormals, zeros, infinities and NaN, in `dtype`."""
    vals = np.arange(256, dtype=np.uint8).view(np_fp8).astype(np.float64)
    fin = np.unique(vals[np.isfinite(vals)])
    mids = (fin[1:] + fin[:-1]) / 2
    eps = np.abs(mids) * (2.0 ** -20 if dtype == np.float32 else 2.0 ** -45)
    big = fin.max()
    extra = [0.0, -0.0, np.inf, -np.inf, np.nan, big * 1.03, big * 1.1, -big * 1.2, big * 4, 1e-30, -1e-30]
    x = np.concatenate([fin, mids, mids + eps, mids - eps, extra])
    return x.astype(dtype)


@needs_clang
@pytest.mark.parametrize("dtype", sorted(P.FP8))
def test_fp8_conversions_match_the_oracle(fp8lib, dtype):
    import ml_dtypes

    np_fp8 = getattr(ml_dtypes, dtype)
    short = P.FP8[dtype][0]
    pats = np.arange(256, dtype=np.uint8)
    got = _call(getattr(fp8lib, f"dec_{short}"), pats, out_dtype=np.float32)
    np.testing.assert_array_equal(got, pats.view(np_fp8).astype(np.float32))
    for src, fn in ((np.float32, f"enc32_{short}"), (np.float64, f"enc64_{short}")):
        x = _fp8_inputs(np_fp8, src)
        got = _call(getattr(fp8lib, fn), x, out_dtype=np.uint8).view(np_fp8).astype(np.float64)
        # the oracle rounds once (float64 through round-to-odd float32; ml_dtypes alone would
        # round twice)
        want = np.asarray(semantics.round_to(x, getattr(dt, dtype)), dtype=np.float64)
        np.testing.assert_array_equal(got, want, err_msg=f"{fn}")
        assert (np.signbit(got) == np.signbit(want)).all()
