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
