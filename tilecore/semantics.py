"""The one definition of scalar semantics: what every operation on every dtype computes.

The oracle (`interp`), the emulator, the IR's constant folder, the lowering's index evaluator
and the host-side launch-extent evaluator all compute through this module; compiled backends
(cpu's numba code, the C renderers) are tested against it. The rules:

- **Compute representation** (`compute_np`): narrow floats (float16, bfloat16, float8) compute
  in float32 and round back to their dtype after every operation; float32 and float64 compute
  natively; integers compute as int64 (Python ints for scalars); bools as bools.
- **Integers wrap like C** (two's complement, `-fwrapv`): every integer operation's result is
  wrapped to the operation's *C compute width* (`int_compute_dtype`): C's promoted `int` for
  ints under 32 bits (they wrap to their own width only when stored or cast), the dtype itself
  for int32, uint32 and int64. Division and remainder truncate toward zero (`c_div`, `c_mod`);
  a zero divisor raises ZeroDivisionError (callers turn it into a TileRuntimeError).
  Operands are values of the compute width: a negative uint32 constant in arithmetic is
  its uint32 value (`x // -1` is `x / 4294967295u`; `ir.expr.as_operand`), while comparisons
  compare values (`x <= -1` never holds on an unsigned `x`). Division overflow wraps too:
  `INT64_MIN / -1` is INT64_MIN, its remainder 0 (undefined in C, a trap on x86; the C
  renderers call a guarded helper where the divisor may be -1: `cexpr.checked_division`).
- **Masked lanes** (`active_divisor`, `active_shift_count`): a lane a condition masks off is
  not executed, so its divisor or shift count cannot fault; only an active lane's does.
- **Floor division** (`floor_div`, `floor_mod`; `T.floordiv` / `T.floormod`, TIR's meaning):
  the quotient rounds toward negative infinity and the remainder takes the divisor's sign
  (`a == floor_div(a, b) * b + floor_mod(a, b)`); a zero divisor raises like `c_div`.
- **Bit operations** (`INT_BITWISE`; `&`, `|`, `^`, `~`, `<<`, `>>` on ints): on the two's
  complement bits at the C compute width, wrapped like the other integer operations. `>>` is
  arithmetic (sign-filling) for signed dtypes and logical for unsigned ones; `a << s` is
  `a * 2**s` wrapped (negative `a` included). A shift count outside [0, compute width) is
  undefined in C; here it raises ShiftCountError (the oracle and the emulator report a
  TileRuntimeError, as for a zero divisor; compiled targets do what their hardware does).
- **Rounding** (`round_to`): to nearest, ties to even, in one step from whatever precision
  the value has (float64 -> bfloat16 rounds once, not through float32).
- **Casts** (`cast_value`): int -> float goes through float64 (exact up to 2**53) and rounds
  once; float -> int truncates toward zero, NaN and +-inf give 0, finite values beyond int64
  saturate to int64's range, then the result wraps to the destination's width (C leaves an
  out-of-range conversion undefined; this is what the oracle does, and conformance only casts
  in-range values); anything -> bool is `!= 0`.
- **Math functions** (`UNARY_FUNCS`): NumPy implementations evaluated in the compute type
  (float32 for narrow floats, then rounded); `erf` goes through float64 (`math.erf`).
- **Accumulators** (`accumulator_dtype`, `gemm_accumulator`): reductions and cumsum accumulate
  floats up to 32 bits in float32, float64 in float64, every integer (and bool) in int64;
  gemm accumulates float tiles in float32 (float64 for float64 C), integer C tiles in int64.
- **Poison** (`poison_value`): what uninitialized shared / fragment / local memory holds: NaN
  for floats, a garbage integer pattern for ints; the "alt" pattern is the adversarial one.
"""

from __future__ import annotations

import math

import numpy as np

from . import dtypes as dt
from .dtypes import DType

# --------------------------------------------------------------------------- representation


def compute_np(d: DType) -> np.dtype:
    """The NumPy dtype values of `d` are computed in."""
    if d.is_bool:
        return np.dtype(np.bool_)
    if d.is_int:
        return np.dtype(np.int64)
    return np.dtype(np.float64 if d.bits == 64 else np.float32)


def int_compute_dtype(d: DType) -> DType:
    """The width integer arithmetic on `d` wraps at: C's promoted `int` under 32 bits, else `d`."""
    return dt.int32 if d.bits < 32 else d


def _scalar_out(x, like):
    """`x` as a NumPy scalar when `like` was a scalar (0-d), else as an array."""
    return x[()] if np.ndim(like) == 0 and isinstance(x, np.ndarray) else x


def _round_to_odd_f32(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding to odd: a float32 that, rounded again to any format of at
    most 22 significand bits, gives the correctly rounded (single-rounding) result."""
    f = x.astype(np.float32)
    back = f.astype(np.float64)
    inexact = (back != x) & np.isfinite(x)
    if not inexact.any():
        return f
    # truncate toward zero, then make the last significand bit 1 ("sticky")
    over = inexact & (np.abs(back) > np.abs(x))
    f = np.where(over, np.nextafter(f, np.float32(0)), f)
    bits = f.view(np.int32)
    return np.where(inexact, (bits | 1).view(np.float32), f)


def round_to(x, d: DType):
    """A float value (array or scalar) rounded to dtype `d`, in `d`'s compute representation."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is the rounding's result
        a = np.asarray(x)
        if d.is_narrow_float:
            if a.dtype == np.float64:
                a = _round_to_odd_f32(a)
            r = a.astype(np.float32, copy=False).astype(d.np).astype(np.float32)
        else:
            r = a.astype(compute_np(d), copy=False)
    return _scalar_out(r, x)


def wrap_int(x, d: DType):
    """An integer value wrapped to the width of `d` (C conversion), as int64 / Python int."""
    if np.ndim(x) == 0:
        bits = d.bits
        v = int(x) & ((1 << bits) - 1)
        if d.kind == "int" and v >= 1 << (bits - 1):
            v -= 1 << bits
        return v
    a = np.asarray(x)
    if d.bits == 64:
        return a.astype(np.int64, copy=False)
    return a.astype(np.int64, copy=False).astype(d.np).astype(np.int64)


# dtype name -> the range of its C compute width (int_compute_dtype), for the no-overflow test
_COMPUTE_RANGE = {d.name: (dt.min_value(int_compute_dtype(d)), dt.max_value(int_compute_dtype(d)))
                  for d in dt.ALL + dt.SUB_BYTE + dt.CONST_ONLY if d.is_int}


def wrap_result(x, d: DType):
    """An integer operation's result (int64 / Python int) wrapped to the C compute width of `d`."""
    if type(x) is int:  # the scalar fast path: the interpreter's index arithmetic
        lo, hi = _COMPUTE_RANGE[d.name]
        return x if lo <= x <= hi else wrap_int(x, int_compute_dtype(d))
    if np.ndim(x) == 0:
        return wrap_int(int(x), int_compute_dtype(d))
    return wrap_int(x, int_compute_dtype(d))


def to_storage(x, d: DType) -> np.ndarray:
    """Computed value(s) of dtype `d` (already rounded to `d`) in `d`'s NumPy storage dtype;
    integers wrap to the width."""
    if d.is_int:
        return np.asarray(x).astype(np.int64).astype(d.np)
    return np.asarray(x).astype(d.np)


def from_storage(v, d: DType):
    """Stored value(s) of dtype `d` in compute representation (Python scalars for ints/bools)."""
    if np.ndim(v) == 0:
        if d.is_int:
            return int(v)
        if d.is_bool:
            return bool(v)
        return compute_np(d).type(v)
    return np.asarray(v).astype(compute_np(d), copy=False)


def cast_value(x, src: DType, dst: DType):
    """C-style conversion of computed value(s) from `src` to `dst` (see the module rules)."""
    if dst.is_bool:
        return np.not_equal(x, 0) if np.ndim(x) else bool(x != 0)
    if dst.is_float:
        if not src.is_float:
            x = np.asarray(x, dtype=np.float64)  # ints (and bools) convert through float64
            return _scalar_out(round_to(x, dst), x)
        return round_to(x, dst)
    if src.is_float:
        with np.errstate(invalid="ignore", over="ignore"):
            t = np.trunc(np.asarray(x, dtype=np.float64))
            t = np.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0)
            t = np.clip(t, -(2.0**63), 2.0**63 - 1024).astype(np.int64)
        return wrap_int(t if np.ndim(t) else int(t), dst)
    return wrap_int(x, dst)


# --------------------------------------------------------------------------- integer arithmetic


def _scalars(a, b) -> bool:
    """Whether both operands are scalars (Python ints first: the common, cheap case)."""
    return (type(a) is int and type(b) is int) or (np.ndim(a) == 0 and np.ndim(b) == 0)


def c_div(a, b):
    """Integer division truncating toward zero (C); raises ZeroDivisionError on a zero divisor."""
    if _scalars(a, b):
        a, b = int(a), int(b)
        if b == 0:
            raise ZeroDivisionError
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if b.ndim == 0 and b > 0 and a.size and a.min() >= 0:
        return a // b  # the common index arithmetic (`i // W`): floor is truncation here
    if np.any(b == 0):
        raise ZeroDivisionError
    # Not |a| // |b|: abs(INT64_MIN) overflows. C's remainder (np.fmod, exact) makes a - r an
    # exact multiple of b, whose floor quotient is the truncated one; b == -1 is -a, wrapping
    # for INT64_MIN (floor_divide would overflow there).
    neg1 = b == -1
    bs = np.where(neg1, 1, b)
    q = (a - np.fmod(a, bs)) // bs
    return np.where(neg1, np.negative(a), q)  # NumPy's array negation wraps silently


def c_mod(a, b):
    """Integer remainder with the sign of the dividend (C); raises ZeroDivisionError on zero."""
    if _scalars(a, b):
        a, b = int(a), int(b)
        if b == 0:
            raise ZeroDivisionError
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if b.ndim == 0 and b > 0 and a.size and a.min() >= 0:
        return a % b  # non-negative operands (`i % W`): Python's remainder is C's
    if np.any(b == 0):
        raise ZeroDivisionError
    return np.fmod(a, b)


def floor_div(a, b):
    """Integer division rounding toward negative infinity (TIR's floordiv, Python's `//`);
    raises ZeroDivisionError on a zero divisor."""
    if _scalars(a, b):
        a, b = int(a), int(b)
        if b == 0:
            raise ZeroDivisionError
        return a // b
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if np.any(b == 0):
        raise ZeroDivisionError
    neg1 = b == -1  # a // -1 is -a, wrapping for INT64_MIN (floor_divide would overflow)
    if not neg1.any():
        return np.floor_divide(a, b)
    return np.where(neg1, np.negative(a), np.floor_divide(a, np.where(neg1, 1, b)))


def floor_mod(a, b):
    """Integer remainder with the sign of the divisor (TIR's floormod, Python's `%`), so that
    `a == floor_div(a, b) * b + floor_mod(a, b)`; raises ZeroDivisionError on a zero divisor."""
    if _scalars(a, b):
        a, b = int(a), int(b)
        if b == 0:
            raise ZeroDivisionError
        return a % b
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if np.any(b == 0):
        raise ZeroDivisionError
    return np.mod(a, b)


class ShiftCountError(ArithmeticError):
    """A shift count outside [0, the operation's C compute width): undefined in C."""


def active_divisor(b, mask):
    """Divisor(s) `b` of a division evaluated for the lanes `mask` marks active (None: all):
    raises ZeroDivisionError when an active lane divides by zero; an inactive lane's zero becomes
    1, so the lanes a condition masks off (never executed) do not fault. Their quotients are
    discarded by the caller."""
    if mask is None or (type(b) is int and b != 0):
        return b
    zero = np.asarray(b) == 0
    if not zero.any():
        return b
    if np.any(zero & mask):
        raise ZeroDivisionError
    return 1 if zero.ndim == 0 else np.where(zero, 1, b)


def active_shift_count(s, mask, width: int):
    """Shift count(s) `s` at a compute width of `width` bits, evaluated for the lanes `mask`
    marks active (None: all): raises ShiftCountError when an active lane's count lies outside
    [0, width); an inactive lane's becomes 0 (like `active_divisor`)."""
    a = np.asarray(s)
    bad = (a < 0) | (a >= width)
    if not bad.any():
        return s
    hit = bad if mask is None else bad & mask
    if np.any(hit):
        count = int(np.broadcast_to(a, np.shape(hit))[hit].flat[0]) if a.ndim else int(a)
        raise ShiftCountError(f"shift count {count} is outside [0, {width})")
    return 0 if a.ndim == 0 else np.where(bad, 0, s)


def _shift(left: bool, width: int):
    """`a << s` or `a >> s` at a compute width of `width` bits; the caller wraps the result.
    Values are two's complement Python ints / int64 (unsigned ones non-negative), so Python's
    and NumPy's `>>` is arithmetic for signed and logical for unsigned values, as C's is."""
    def op(a, s):
        if _scalars(a, s):
            a, s = int(a), int(s)
            if not 0 <= s < width:
                raise ShiftCountError(f"shift count {s} is outside [0, {width})")
            return a << s if left else a >> s
        a, s = np.asarray(a, dtype=np.int64), np.asarray(s, dtype=np.int64)
        if np.any((s < 0) | (s >= width)):
            bad = int(np.asarray(s)[(s < 0) | (s >= width)].flat[0])
            raise ShiftCountError(f"shift count {bad} is outside [0, {width})")
        if left:
            # shift in uint64 so bits leaving int64 are dropped, not an overflow
            return (a.astype(np.uint64) << s.astype(np.uint64)).astype(np.int64)
        return a >> s
    return op


def _int_pow(a, b):
    """a ** b wrapped mod 2**64; a negative exponent truncates 1 / a**-b toward zero (0 unless
    |a| == 1, and 0 for a == 0, where C's double arithmetic would overflow)."""
    if _scalars(a, b):
        a, b = int(a), int(b)
        if b < 0:
            return a ** (-b % 2) if a in (1, -1) else 0
        return pow(a, b, 1 << 64)
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
    with np.errstate(all="ignore"):
        r = np.power(a, np.maximum(b, 0))  # NumPy's int64 power wraps mod 2**64
    neg = np.where(np.abs(a) == 1, np.where(b % 2 == 0, 1, a), 0)
    return np.where(b < 0, neg, r)


def _imin(a, b):
    return min(int(a), int(b)) if _scalars(a, b) else np.minimum(a, b)


def _imax(a, b):
    return max(int(a), int(b)) if _scalars(a, b) else np.maximum(a, b)


def _i(f):
    """An integer operation on Python ints (scalars) or int64 arrays."""
    def op(a, b):
        if type(a) is int and type(b) is int:
            return f(a, b)
        if np.ndim(a) == 0 and np.ndim(b) == 0:
            return f(int(a), int(b))
        return f(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
    return op


INT_BINARY = {
    "add": _i(lambda a, b: a + b), "sub": _i(lambda a, b: a - b), "mul": _i(lambda a, b: a * b),
    "div": c_div, "mod": c_mod, "min": _imin, "max": _imax, "pow": _int_pow,
    "floordiv": floor_div, "floormod": floor_mod,
}
# The bit operations (integers only): and, or, xor on two's complement values; the shifts are
# built per compute width by `int_operation`.
INT_BITWISE = {"bitand": _i(lambda a, b: a & b), "bitor": _i(lambda a, b: a | b),
               "bitxor": _i(lambda a, b: a ^ b)}
INT_BINARY.update(INT_BITWISE)
SHIFT_OPS = ("shl", "shr")
DIVISIONS = ("div", "mod", "floordiv", "floormod")  # the operations a zero divisor faults


_INT_OPERATIONS: dict[tuple[str, str], object] = {}  # (op, dtype name) -> int_operation's answer


def int_operation(op: str, d: DType):
    """The function (a, b) -> `a op b` on integers of dtype `d`, its result wrapped to d's C
    compute width (min and max cannot overflow); bound once by callers that evaluate often.
    Built once per (op, dtype): `int_binop` asks for it on every constant fold and every
    numeric index evaluation of the lowering."""
    key = (op, d.name)
    got = _INT_OPERATIONS.get(key)
    if got is None:
        got = _INT_OPERATIONS[key] = _int_operation(op, d)
    return got


def _int_operation(op: str, d: DType):
    if op in SHIFT_OPS:
        f = _shift(op == "shl", int_compute_dtype(d).bits)
    else:
        f = INT_BINARY[op]
    if op in ("min", "max"):
        return f

    def run(a, b):
        return wrap_result(f(a, b), d)

    return run


def int_binop(op: str, a, b, d: DType):
    """`a op b` on integers of dtype `d`, wrapped to d's C compute width (`int_compute_dtype`)."""
    return int_operation(op, d)(a, b)


def int_unary(op: str, a, d: DType):
    """`-a`, `abs(a)` or `~a` (bitnot) on integers of dtype `d`, wrapped like `int_binop`."""
    if np.ndim(a) == 0:
        a = int(a)
        r = -a if op == "neg" else ~a if op == "bitnot" else abs(a)
    else:
        a = np.asarray(a, dtype=np.int64)
        r = -a if op == "neg" else ~a if op == "bitnot" else np.abs(a)
    return wrap_result(r, d)


# --------------------------------------------------------------------------- float arithmetic

_erf_vec = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    """Element-wise erf, evaluated in float64."""
    if np.ndim(x) == 0:
        return np.float64(math.erf(float(x)))
    return _erf_vec(np.asarray(x, dtype=np.float64)).astype(np.float64)


FLOAT_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "min": np.minimum, "max": np.maximum, "pow": np.power, "mod": np.fmod,
}
COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
           "eq": np.equal, "ne": np.not_equal}

# The math function table: name -> NumPy implementation, applied to the compute value (float32
# for narrow floats and float32, float64 for float64); the result is then rounded to the dtype.
UNARY_FUNCS = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "erf": _erf, "floor": np.floor,
    "ceil": np.ceil, "sin": np.sin, "cos": np.cos, "round": np.rint, "trunc": np.trunc,
    "abs": np.abs, "neg": np.negative,
}


def float_binop(op: str, a, b, d: DType):
    """`a op b` on floats of dtype `d`: computed in the compute type, rounded once to `d`."""
    with np.errstate(all="ignore"):
        r = FLOAT_BINARY[op](a, b)
    return round_to(r, d)


def float_unary(op: str, a, d: DType):
    """Math function `op` of a float of dtype `d`, rounded to `d`."""
    with np.errstate(all="ignore"):
        r = UNARY_FUNCS[op](a)
    return round_to(r, d)


def binop(op: str, a, b, d: DType):
    """Any binary operation whose operands are of dtype `d` (the IR promotes both to one type)."""
    if op in COMPARE:
        return COMPARE[op](a, b)
    if op == "and":
        return np.logical_and(a, b)
    if op == "or":
        return np.logical_or(a, b)
    if d.is_int or d.is_bool:
        return int_binop(op, a, b, dt.int32 if d.is_bool else d)
    return float_binop(op, a, b, d)


def unary(op: str, a, d: DType):
    """Any unary operation on a value of dtype `d` (`not` on bools)."""
    if op == "not":
        return np.logical_not(a)
    if d.is_int:
        return int_unary(op, a, d)
    return float_unary(op, a, d)


# --------------------------------------------------------------------------- accumulators


def accumulator_dtype(d: DType) -> DType:
    """What reductions and cumsum of `d` accumulate in: float32 for floats up to 32 bits,
    float64 for float64, int64 for every integer and bool (so no partial sum wraps)."""
    if d.is_float:
        return dt.float64 if d.bits == 64 else dt.float32
    return dt.int64


def gemm_accumulator(c: DType) -> DType:
    """What gemm into an accumulator tile of dtype `c` sums products in (rounded once into C)."""
    return accumulator_dtype(c)


# --------------------------------------------------------------------------- poison

POISON_MODES = ("nan", "alt")


def poison_value(d: DType, mode: str = "nan"):
    """What uninitialized shared / fragment / local memory of dtype `d` holds.

    "nan" (the default): NaN for floats, True for bools, int min + 7 (uint: max) for ints.
    Any other mode ("alt", the adversarial run): finite floats and other int patterns, so
    a program whose result depends on uninitialized memory changes between the two runs.
    """
    nan_mode = mode == "nan"
    if d.is_float:
        return np.nan if nan_mode else 1.0e4 if d.bits > 8 else 448.0
    if d.is_bool:
        return nan_mode
    if d.kind == "uint":
        return dt.max_value(d) if nan_mode else dt.max_value(d) // 3
    return dt.min_value(d) + 7 if nan_mode else dt.max_value(d) - 5
