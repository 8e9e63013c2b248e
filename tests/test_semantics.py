"""tilecore.semantics against independent references: Python's exact integers and fractions,
NumPy's float16 conversion (correctly rounded), C's rules written out by hand."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecore import dtypes as dt
from tilecore import semantics as S
from tilecore.ir.expr import UNARY_FUNCS, binop, cast, const

INTS = [d for d in dt.ALL if d.is_int]
NARROW = [d for d in dt.ALL if d.is_narrow_float]


# ------------------------------------------------------------------ C division and remainder

@given(a=st.integers(-(2**40), 2**40), b=st.integers(-(2**20), 2**20).filter(bool))
def test_c_division_truncates_and_remainder_has_the_dividends_sign(a, b):
    q, r = S.c_div(a, b), S.c_mod(a, b)
    assert q == int(Fraction(a, b))  # int() of a fraction truncates toward zero
    assert q * b + r == a and abs(r) < abs(b) and (r == 0 or (r > 0) == (a > 0))
    arr_q = S.c_div(np.array([a]), np.array([b]))
    arr_r = S.c_mod(np.array([a]), np.array([b]))
    assert arr_q.tolist() == [q] and arr_r.tolist() == [r]


def test_zero_divisor_raises():
    for f in (S.c_div, S.c_mod):
        with pytest.raises(ZeroDivisionError):
            f(3, 0)
        with pytest.raises(ZeroDivisionError):
            f(np.array([3, 4]), np.array([1, 0]))


# ------------------------------------------------------------------ integer wrapping

def _wrap_ref(v: int, bits: int, signed: bool) -> int:
    v %= 1 << bits
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


@pytest.mark.parametrize("d", INTS, ids=str)
@given(v=st.integers(-(2**70), 2**70))
def test_wrap_int_is_modular(d, v):
    want = _wrap_ref(v, d.bits, d.kind == "int")
    assert S.wrap_int(v, d) == want
    if -(2**63) <= v < 2**63:
        assert S.wrap_int(np.array([v], dtype=np.int64), d).tolist() == [want]


@pytest.mark.parametrize("d", INTS, ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "mod", "min", "max"])
@given(a=st.integers(-(2**62), 2**62), b=st.integers(-(2**62), 2**62))
@settings(max_examples=30)
def test_int_ops_wrap_to_the_c_compute_width(d, op, a, b):
    """C: ints under 32 bits compute as `int`; int32, uint32, int64 in their own width."""
    w = S.int_compute_dtype(d)
    assert w == (dt.int32 if d.bits < 32 else d)
    a, b = S.wrap_int(a, d), S.wrap_int(b, d)  # operands are values of d
    if op in ("div", "mod") and b == 0:
        return
    exact = {"add": a + b, "sub": a - b, "mul": a * b, "min": min(a, b), "max": max(a, b),
             "div": int(Fraction(a, b)) if b else 0, "mod": a - int(Fraction(a, b)) * b if b else 0}[op]
    want = exact if op in ("min", "max") else _wrap_ref(exact, w.bits, w.kind == "int")
    assert S.int_binop(op, a, b, d) == want
    got = S.int_binop(op, np.array([a], dtype=np.int64), np.array([b], dtype=np.int64), d)
    assert got.tolist() == [want]  # the array path (emu, vectorized interp) agrees with scalars


def test_uint32_subtraction_wraps_like_c_unsigned():
    assert S.int_binop("sub", 3, 5, dt.uint32) == 2**32 - 2
    assert S.int_binop("sub", 3, 5, dt.uint8) == -2  # promoted to int first, wraps on store
    assert S.wrap_int(S.int_binop("sub", 3, 5, dt.uint8), dt.uint8) == 254
    assert S.int_binop("mul", 2**31 - 1, 2, dt.int32) == -2
    assert S.int_unary("neg", -(2**31), dt.int32) == -(2**31)
    assert S.int_unary("abs", -128, dt.int8) == 128


def test_int_pow():
    assert S.int_binop("pow", 3, 4, dt.int32) == 81
    assert S.int_binop("pow", 2, 40, dt.int64) == 2**40
    assert S.int_binop("pow", 2, 31, dt.int32) == -(2**31)
    assert [S.int_binop("pow", a, -1, dt.int32) for a in (2, 1, -1, 0)] == [0, 1, -1, 0]
    got = S.int_binop("pow", np.array([3, 2, 2, -1]), np.array([4, 40, -1, -3]), dt.int64)
    assert got.tolist() == [81, 2**40, 0, -1]


# ------------------------------------------------------------------ rounding

def _nearest_even(x: Fraction, d) -> float:
    """The value of narrow dtype `d` nearest to x, ties to the even bit pattern (exact search)."""
    bits = np.arange(2 ** d.bits, dtype=np.uint16 if d.bits == 16 else np.uint8)
    with np.errstate(invalid="ignore"):
        vals = bits.view(d.np).astype(np.float64)
    ok = np.isfinite(vals)
    best, best_err, best_bits = None, None, None
    for v, b in zip(vals[ok], bits[ok]):
        err = abs(Fraction(float(v)) - x)
        if best is None or err < best_err or (err == best_err and int(b) % 2 == 0):
            best, best_err, best_bits = float(v), err, b
    return best


@pytest.mark.parametrize("d", [dt.bfloat16, dt.float8_e4m3fn, dt.float8_e5m2], ids=str)
def test_float64_rounds_once_to_narrow_floats(d):
    """float64 -> narrow in one rounding: ml_dtypes' own cast rounds through float32 (twice)."""
    step = float(ml_dtypes.finfo(d.np).eps)
    for base in (1.0, 1.5, -1.25, 3.0):
        x = base + math.copysign(step / 2, base) + math.copysign(2.0**-40, base)  # past the tie
        want = _nearest_even(Fraction(x), d)
        assert float(S.round_to(x, d)) == want
        assert float(S.round_to(np.array([x]), d)[0]) == want


@given(x=st.floats(-60000, 60000, allow_nan=False))
def test_float64_to_float16_matches_numpys_correct_rounding(x):
    assert float(S.round_to(np.float64(x), dt.float16)) == float(np.float16(x))


@pytest.mark.parametrize("d", NARROW, ids=str)
@given(x=st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float32_to_narrow_is_ml_dtypes_round_to_nearest_even(d, x):
    with np.errstate(over="ignore"):
        want = np.float32(x).astype(d.np).astype(np.float32)
    got = S.round_to(np.float32(x), d)
    assert got.dtype == np.float32 and (got == want or (np.isnan(got) and np.isnan(want)))


# ------------------------------------------------------------------ casts

def test_float_to_int_casts():
    f64 = dt.float64
    assert S.cast_value(3.9, f64, dt.int32) == 3 and S.cast_value(-3.9, f64, dt.int32) == -3
    assert [S.cast_value(v, f64, dt.int32) for v in (math.nan, math.inf, -math.inf)] == [0, 0, 0]
    assert S.cast_value(3.0e9, f64, dt.int32) == 3_000_000_000 - 2**32  # truncate, then wrap
    assert S.cast_value(1e30, f64, dt.int64) == 2**63 - 1024  # saturates to int64's range
    assert S.cast_value(300.0, dt.float32, dt.uint8) == 44
    arr = S.cast_value(np.array([3.9, np.nan, -7.5]), f64, dt.int8)
    assert arr.tolist() == [3, 0, -7]


def test_int_and_bool_casts():
    assert S.cast_value(2**24 + 1, dt.int32, dt.float32) == np.float32(2**24)
    assert S.cast_value(257, dt.int32, dt.bfloat16) == 256.0
    assert S.cast_value(-1, dt.int32, dt.uint32) == 2**32 - 1
    assert S.cast_value(5, dt.int32, dt.bool_) is True and S.cast_value(0.0, dt.float32, dt.bool_) is False
    assert S.cast_value(np.array([0, 2]), dt.int32, dt.bool_).tolist() == [False, True]


def test_the_ir_folds_constants_by_these_rules():
    i8, i32, u32 = dt.int8, dt.int32, dt.uint32
    assert binop("div", const(-7), const(2)).value == -3
    assert binop("mod", const(-7), const(2)).value == -1
    assert cast(300, i8).value == 44 and cast(const(-1), u32).value == 2**32 - 1
    assert binop("mul", const(2**30, i32), const(4, i32)).value == 0  # int32 wraps like C
    narrow = binop("mul", const(100, i8), const(2, i8))  # 200 as C's int: no int8 Const holds it
    assert narrow.op == "mul"
    assert binop("div", const(1), const(0)).op == "div"  # a runtime error, not folded


# ------------------------------------------------------------------ math, accumulators, poison

def test_every_float_function_of_the_ir_has_an_implementation():
    float_funcs = {name for name, needs_float in UNARY_FUNCS.items() if needs_float}
    assert float_funcs <= set(S.UNARY_FUNCS)
    for name in float_funcs:
        for d in (dt.float16, dt.bfloat16, dt.float32, dt.float64):
            r = S.float_unary(name, S.round_to(np.array([0.75]), d), d)
            assert r.dtype == S.compute_np(d)
            assert S.round_to(r, d) == r  # already rounded to d


def test_narrow_float_math_computes_in_float32_then_rounds():
    x = S.round_to(np.array([1.7]), dt.float16)
    want = np.exp(np.float32(x[0])).astype(np.float16).astype(np.float32)
    assert S.float_unary("exp", x, dt.float16)[0] == want
    assert S.float_unary("erf", np.float32(0.5), dt.float32) == np.float32(math.erf(0.5))


@pytest.mark.parametrize("d", dt.ALL, ids=str)
def test_accumulator_dtypes(d):
    acc = S.accumulator_dtype(d)
    if d.is_float:
        assert acc == (dt.float64 if d.bits == 64 else dt.float32)
    else:
        assert acc == dt.int64  # no partial sum of any integer type wraps
    assert S.gemm_accumulator(d) == acc


@pytest.mark.parametrize("d", dt.ALL, ids=str)
def test_poison_patterns_differ_between_modes_and_fit_the_dtype(d):
    plain, alt = S.poison_value(d, "nan"), S.poison_value(d, "alt")
    stored = np.array([plain, alt]).astype(d.np)
    if d.is_float:
        assert math.isnan(plain) and math.isfinite(float(stored[1]))
    else:
        assert stored.tolist() == [plain, alt]  # representable: no wrap on fill
        assert plain != alt
