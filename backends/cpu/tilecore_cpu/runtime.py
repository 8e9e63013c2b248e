"""Scalar helpers the generated kernels call: narrow-float conversion, C integer division, NaN-aware
min/max, and the out-of-bounds reporter.

numba has no float16/bfloat16/float8 arithmetic, so narrow floats travel as their bit patterns
(uint16 / uint8 arrays) and are computed in float32. The encoders here round float32 to the narrow
format with round-to-nearest-even on the bit pattern, reproducing ml_dtypes' (and NumPy's float16)
conversions bit for bit, including subnormals, overflow (to inf, or to NaN for float8_e4m3fn,
which has no inf) and NaN (quiet, sign kept). Every function is `njit(cache=True)` so generated
kernels link them from the on-disk cache instead of recompiling them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# No cfunc wrapper (for first-class function values, which nothing here is used as): numba
# would otherwise lower, optimize and compile it to machine code with every helper. The CPython
# wrapper stays (its cost did not show): tests call helpers from Python, and a dispatcher
# without one crashes the interpreter when called from Python
_JIT = {"cache": True, "error_model": "numpy", "no_cfunc_wrapper": True}


@njit(inline="always", **_JIT)
def _f32_bits(x):
    return np.float32(x).view(np.uint32)


@njit(inline="always", **_JIT)
def _bits_f32(u):
    return np.uint32(u).view(np.float32)


@njit(inline="always", **_JIT)
def _encode(x, mbits, ebits, bias, ieee):
    """float32 -> narrow-float bits (round to nearest even). `ieee` False: float8_e4m3fn rules."""
    u = np.int64(_f32_bits(x))
    sign = (u >> 31) << (mbits + ebits)
    a = u & 0x7FFFFFFF
    shift = 23 - mbits
    top = (1 << ebits) - 1
    if a > 0x7F800000:  # NaN: ml_dtypes gives the canonical quiet NaN, sign kept
        if ieee:
            return sign | (top << mbits) | (1 << (mbits - 1))
        return sign | (top << mbits) | ((1 << mbits) - 1)
    if a == 0x7F800000:
        if ieee:
            return sign | (top << mbits)
        return sign | (top << mbits) | ((1 << mbits) - 1)
    e = (a >> 23) - 127
    emin = 1 - bias
    if e < emin:  # narrow subnormal (or zero): quantum 2^(emin - mbits); the scale is exact
        q = np.rint(np.float64(abs(x)) * (2.0 ** (mbits - emin)))
        code = np.int64(q)
    else:
        mant = a & 0x7FFFFF
        code = ((e + bias) << mbits) | (mant >> shift)
        rem = mant & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and (code & 1) == 1):
            code += 1
    if ieee:
        if code >= (top << mbits):
            code = top << mbits  # rounds past the largest finite value: inf
    elif code > (top << mbits) | ((1 << mbits) - 2):
        code = (top << mbits) | ((1 << mbits) - 1)  # e4m3fn has no inf: overflow is NaN
    return sign | code


@njit(inline="always", **_JIT)
def _decode(b, mbits, ebits, bias, ieee):
    """narrow-float bits -> float32 (exact)."""
    b = np.int64(b)
    neg = (b >> (mbits + ebits)) & 1
    e = (b >> mbits) & ((1 << ebits) - 1)
    m = b & ((1 << mbits) - 1)
    top = (1 << ebits) - 1
    if ieee and e == top:
        v = np.float32(np.inf) if m == 0 else np.float32(np.nan)
    elif (not ieee) and e == top and m == (1 << mbits) - 1:
        v = np.float32(np.nan)
    elif e == 0:
        v = np.float32(m * 2.0 ** (1 - bias - mbits))
    else:
        v = np.float32((1.0 + m / (2.0 ** mbits)) * 2.0 ** (e - bias))
    return -v if neg else v


# ---------------------------------------------------------------- per-format entry points


@njit(**_JIT)
def enc_float16(x):
    """float32 -> float16 bits; NaN keeps its top payload bits (never 0), as NumPy does.

    Written out for float16 rather than through the inlined generic `_encode`: a cold kernel
    compiles it, and numba's inlining made that 0.26 s against 0.14 s (same bits: checked
    against `_encode` and NumPy on every float16 value, its neighbours and rounding midpoints)."""
    u = np.float32(x).view(np.uint32)
    sign = (u >> 16) & 0x8000
    a = u & 0x7FFFFFFF
    if a > 0x7F800000:
        return np.uint16(sign | 0x7C00 | max((a & 0x7FFFFF) >> 13, np.uint32(1)))
    if a >= 0x477FF000:  # 65520 and above round to inf (inf itself included)
        return np.uint16(sign | 0x7C00)
    if a < 0x38800000:  # below 2^-14: subnormal (or zero), quantum 2^-24; rint ties to even
        return np.uint16(sign | np.uint32(np.rint(np.float64(abs(x)) * 16777216.0)))
    code = (a >> 13) - np.uint32(112 << 10)  # exponent rebiased 127 -> 15, top 10 mantissa bits
    rem = a & 0x1FFF
    if rem > 0x1000 or (rem == 0x1000 and (code & 1) == 1):
        code += 1  # round to nearest even (a carry into the exponent is right)
    return np.uint16(sign | code)


@njit(**_JIT)
def dec_float16(b):
    """float16 bits -> float32, built directly from the bit pattern for normal numbers; no
    inlined helpers (compiling them cost a cold kernel 0.23 s against 0.12 s)."""
    h = np.uint32(b)
    e = (h >> 10) & 0x1F
    if e != 0 and e != 0x1F:
        return np.uint32(((h & 0x8000) << 16) | ((e + 112) << 23) | ((h & 0x3FF) << 13)).view(np.float32)
    m = h & 0x3FF
    if e == 0x1F:
        v = np.float32(np.inf) if m == 0 else np.float32(np.nan)
    else:
        v = np.float32(m * 5.960464477539063e-08)  # m * 2^-24, exact
    return -v if h & 0x8000 else v


@njit(**_JIT)
def enc_bfloat16(x):
    """float32 -> bfloat16 bits: the classic add-0x7FFF-plus-lsb rounding (subnormals included)."""
    u = np.uint32(_f32_bits(x))
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return np.uint16(((u >> 16) & 0x8000) | 0x7FC0)
    return np.uint16((u + 0x7FFF + ((u >> 16) & 1)) >> 16)


@njit(**_JIT)
def dec_bfloat16(b):
    """bfloat16 bits -> float32."""
    return _bits_f32(np.uint32(b) << 16)


@njit(**_JIT)
def enc_float8_e4m3fn(x):
    """float32 -> float8_e4m3fn bits (no inf: overflow and inf become NaN)."""
    return np.uint8(_encode(x, 3, 4, 7, False))


@njit(**_JIT)
def dec_float8_e4m3fn(b):
    """float8_e4m3fn bits -> float32."""
    return _decode(b, 3, 4, 7, False)


@njit(**_JIT)
def enc_float8_e5m2(x):
    """float32 -> float8_e5m2 bits."""
    return np.uint8(_encode(x, 2, 5, 15, True))


@njit(**_JIT)
def dec_float8_e5m2(b):
    """float8_e5m2 bits -> float32."""
    return _decode(b, 2, 5, 15, True)


@njit(**_JIT)
def rnd_float16(x):
    """Round a float32 to the nearest float16 value, kept as float32."""
    return dec_float16(enc_float16(x))


@njit(**_JIT)
def rnd_bfloat16(x):
    """Round a float32 to the nearest bfloat16 value, kept as float32."""
    return dec_bfloat16(enc_bfloat16(x))


@njit(**_JIT)
def rnd_float8_e4m3fn(x):
    """Round a float32 to the nearest float8_e4m3fn value, kept as float32."""
    return dec_float8_e4m3fn(enc_float8_e4m3fn(x))


@njit(**_JIT)
def rnd_float8_e5m2(x):
    """Round a float32 to the nearest float8_e5m2 value, kept as float32."""
    return dec_float8_e5m2(enc_float8_e5m2(x))


@njit(**_JIT)
def odd_f32(x):
    """float64 -> float32 rounded to odd (semantics._round_to_odd_f32): inexact results keep
    their last significand bit set, so rounding them again to a narrow float rounds once."""
    f = np.float32(x)
    back = np.float64(f)
    if back == x or x != x or x == np.inf or x == -np.inf:
        return f
    bits = _f32_bits(f)
    if abs(back) > abs(x):  # rounded away from zero: step back toward it (f is not 0)
        bits = bits - np.uint32(1)
    return _bits_f32(bits | np.uint32(1))


# ---------------------------------------------------------------- partial tile copies
# The masked path of a same-dtype tile copy between a global tensor and a shared/fragment buffer
# (a tile that sticks out of the tensor: elements outside read as `zero`, writes to them are
# dropped). Generated as loops in every kernel it cost numba about a quarter of a kernel's
# compile time; here it is compiled once per dtype and rank (and cached on disk). The local
# region is known to lie inside its buffer (the caller checks it first).


@njit(**_JIT)
def load_masked1(dst, d0, src, s0, n0, zero):
    """dst[d0 + i] = src[s0 + i] for i < n0, `zero` where s0 + i is outside src."""
    for i in range(n0):
        k = s0 + i
        dst[d0 + i] = src[k] if 0 <= k < src.shape[0] else zero


@njit(**_JIT)
def load_masked2(dst, d0, d1, src, s0, s1, n0, n1, zero):
    """The 2-D load_masked1."""
    for i in range(n0):
        k = s0 + i
        row = 0 <= k < src.shape[0]
        for j in range(n1):
            m = s1 + j
            dst[d0 + i, d1 + j] = src[k, m] if row and 0 <= m < src.shape[1] else zero


@njit(**_JIT)
def store_masked1(dst, d0, src, s0, n0):
    """dst[d0 + i] = src[s0 + i] for i < n0 where d0 + i lies inside dst."""
    for i in range(n0):
        k = d0 + i
        if 0 <= k < dst.shape[0]:
            dst[k] = src[s0 + i]


@njit(**_JIT)
def store_masked2(dst, d0, d1, src, s0, s1, n0, n1):
    """The 2-D store_masked1."""
    for i in range(n0):
        k = d0 + i
        if 0 <= k < dst.shape[0]:
            for j in range(n1):
                m = d1 + j
                if 0 <= m < dst.shape[1]:
                    dst[k, m] = src[s0 + i, s1 + j]


# ---------------------------------------------------------------- in-bounds tile copies and fills
# The unmasked path of a same-dtype tile copy and of a fill (every element inside its buffer:
# proven, or tested once by the caller). As loops in every kernel they were most of a generated
# program's statements, and numba types and lowers each loop nest again per kernel (about 45 ms
# of a small kernel's compile each); a call to one of these costs it about 9 ms: typing resolves
# the call against the signature compiled once per process (loaded from the disk cache after
# that), and LLVM inlines the linked helper with the caller's constant sizes, so the machine
# code is the loop nest it was. Indices are unsigned (no negative-index wraparound).


@njit(**_JIT)
def copy1(dst, d0, src, s0, n0):
    """dst[d0 + i] = src[s0 + i] for i < n0 (both ranges inside their arrays)."""
    for i in range(n0):
        dst[np.uint64(d0 + i)] = src[np.uint64(s0 + i)]


@njit(**_JIT)
def copy2(dst, d0, d1, src, s0, s1, n0, n1):
    """The 2-D copy1."""
    for i in range(n0):
        for j in range(n1):
            dst[np.uint64(d0 + i), np.uint64(d1 + j)] = src[np.uint64(s0 + i), np.uint64(s1 + j)]


@njit(**_JIT)
def fill1(dst, d0, n0, v):
    """dst[d0 + i] = v for i < n0 (inside dst)."""
    for i in range(n0):
        dst[np.uint64(d0 + i)] = v


@njit(**_JIT)
def fill2(dst, d0, d1, n0, n1, v):
    """The 2-D fill1."""
    for i in range(n0):
        for j in range(n1):
            dst[np.uint64(d0 + i), np.uint64(d1 + j)] = v


@njit(**_JIT)
def acc2(c, p):
    """c += p elementwise (float accumulators: numba rounds the sum to c's dtype on store, as
    np.float32(...) does); a float gemm's accumulation into its C tile."""
    for i in range(c.shape[0]):
        for j in range(c.shape[1]):
            c[i, j] = c[i, j] + p[i, j]


@njit(**_JIT)
def dec2_float16(out, src):
    """out[i, j] = dec_float16(src[i, j]): a narrow gemm operand tile decoded to float32."""
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = dec_float16(src[i, j])


@njit(**_JIT)
def dec2_bfloat16(out, src):
    """The bfloat16 dec2_float16."""
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = dec_bfloat16(src[i, j])


@njit(**_JIT)
def dec2_float8_e4m3fn(out, src):
    """The float8_e4m3fn dec2_float16."""
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = dec_float8_e4m3fn(src[i, j])


@njit(**_JIT)
def dec2_float8_e5m2(out, src):
    """The float8_e5m2 dec2_float16."""
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = dec_float8_e5m2(src[i, j])


# ---------------------------------------------------------------- integer and float arithmetic


@njit(**_JIT)
def cdiv(a, b, err, code):
    """C integer division (truncates toward zero); division by zero reports fault `code`."""
    if b == 0:
        if err[0] == 0:
            err[0] = code
        return a - a
    if b == -1:  # INT64_MIN / -1 overflows (a hardware trap); the wrapped answer is -a
        return -a
    # not abs(a) // abs(b): abs(INT64_MIN) overflows. The floor quotient (numba's `//` is
    # Python's) is the truncated one plus one where the division is inexact and the signs differ
    q = a // b
    if a % b != 0 and (a < 0) != (b < 0):
        q += 1
    return q


@njit(**_JIT)
def cmod(a, b, err, code):
    """C integer remainder (takes the dividend's sign); division by zero reports fault `code`."""
    if b == 0:
        if err[0] == 0:
            err[0] = code
        return a - a
    if b == -1:  # INT64_MIN % -1 is 0 (the product of cdiv's wrapped quotient would overflow)
        return a - a
    r = a % b  # the floor remainder (the divisor's sign): C's differs by b where signs differ
    if r != 0 and (a < 0) != (b < 0):
        r -= b
    return r


@njit(**_JIT)
def fmax(a, b):
    """np.maximum on one pair: NaN propagates, ties keep the first operand."""
    return a if (a >= b or a != a) else b


@njit(**_JIT)
def fmin(a, b):
    """np.minimum on one pair: NaN propagates, ties keep the first operand."""
    return a if (a <= b or a != a) else b


@njit(**_JIT)
def oob(err, code, i0, i1, i2, i3):
    """Record an out-of-bounds global access (statement `code`, its indices); returns 0 so a
    faulting load yields a value while the kernel runs to its end and the host raises."""
    if err[0] == 0:
        err[0] = code
        err[1] = i0
        err[2] = i1
        err[3] = i2
        err[4] = i3
    return 0


@njit(**_JIT)
def f2i(x):
    """Float -> int64 as the oracle converts: truncate; NaN and inf give 0; clip to int64."""
    v = np.float64(x)
    if v != v or v == np.inf or v == -np.inf:
        return np.int64(0)
    v = np.trunc(v)
    if v < -(2.0**63):
        v = -(2.0**63)
    elif v > 2.0**63 - 1024:
        v = 2.0**63 - 1024
    return np.int64(v)


# ---------------------------------------------------------------- exp and exp2 that vectorize
# libm's expf/exp2f are opaque calls, so a loop around them runs one element at a time. These are
# straight-line float32 arithmetic (range reduction, a polynomial, an exponent built from bits)
# that LLVM vectorizes: 5x faster than libm here, within 1 ulp of the correctly rounded result
# over the normal range (NumPy's own float32 exp is within 2-3 ulp), exact on the special values.

_F = np.float32


@njit(**_JIT)
def _scale2(p, k):
    """p * 2**k for an integral float32 k in [-150, 128] (two steps keep subnormals exact)."""
    ki = np.int32(k)
    k1 = ki >> 1
    s1 = np.int32((k1 + 127) << 23).view(np.float32)
    s2 = np.int32((ki - k1 + 127) << 23).view(np.float32)
    return p * s1 * s2


@njit(**_JIT)
def exp2_f32(x):
    """2**x for float32 x."""
    t = _F(-150.0) if x < _F(-150.0) else x
    t = _F(128.0) if t > _F(128.0) else t
    k = np.floor(t + _F(0.5))
    f = t - k
    p = _F(1.0) + f * (_F(0.6931471805599453) + f * (_F(0.2402265069591007) + f * (
        _F(0.05550410866482158) + f * (_F(0.009618129107628477) + f * (_F(0.0013333558146428443) + f * (
            _F(0.00015403530393381608) + f * _F(1.525273380405984e-05)))))))
    r = _scale2(p, k)
    return r if x == x else x


@njit(**_JIT)
def exp_f32(x):
    """e**x for float32 x (Cody-Waite reduction by ln 2 in two parts)."""
    t = _F(-104.0) if x < _F(-104.0) else x
    t = _F(89.0) if t > _F(89.0) else t
    k = np.floor(t * _F(1.4426950408889634) + _F(0.5))
    r = (t - k * _F(0.693359375)) - k * _F(-2.12194440e-4)
    p = _F(1.0) + r * (_F(1.0) + r * (_F(0.5) + r * (_F(1.0 / 6) + r * (_F(1.0 / 24) + r * (
        _F(1.0 / 120) + r * (_F(1.0 / 720) + r * _F(1.0 / 5040)))))))
    q = _scale2(p, k)
    return q if x == x else x
