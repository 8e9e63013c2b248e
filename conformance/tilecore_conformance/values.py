"""Value bookkeeping for generated programs: how large a value can get and whether every
conforming target must compute it bit for bit.

The generator tracks, for every expression and tile it writes, a :class:`Val`: the dtype the
value is held in, a bound on its magnitude, the dyadic grain of its possible values (every
value is a multiple of ``2**-frac``) and whether it is *exact*. A value is exact when the
oracle's semantics (one rounding per operation, to the operation's dtype) leave no room for
a target to differ: every intermediate is representable, so no rounding happens at all, in
any evaluation order. Outputs whose values are all exact are compared with ``==``; the rest
with tolerances scaled by the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilecore import dtypes as dt
from tilecore.dtypes import DType

# Significand bits (implicit bit included) and the exponent of the smallest subnormal.
_SIGNIFICAND = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8,
                "float8_e4m3fn": 4, "float8_e5m2": 3}
_MIN_EXP = {"float64": -1074, "float32": -149, "float16": -24, "bfloat16": -133,
            "float8_e4m3fn": -9, "float8_e5m2": -16}
# Grain of a value that is not a small dyadic: larger than any significand, so no
# arithmetic on it is treated as exact.
INEXACT_FRAC = 64


@dataclass(frozen=True)
class Val:
    """What the generator knows about a value: dtype, |value| <= bound, multiple of 2**-frac,
    and whether every conforming target computes it bit for bit."""

    dtype: DType
    bound: float
    frac: int
    exact: bool
    nonneg: bool = False  # known >= 0: the only values an unsigned dtype may hold

    def with_dtype(self, d: DType) -> Val:
        """The same value held in dtype `d` (a store or a cast), exact only if representable."""
        return Val(d, self.bound, self.frac, self.exact and representable(d, self.bound, self.frac),
                   self.nonneg)


def fits(v: Val) -> bool:
    """Whether the generator may keep `v`: under its dtype's limit, and never negative in an
    unsigned dtype (uint32 arithmetic wraps there, and a wrapped value is no longer small)."""
    return v.bound <= limit(v.dtype) and (v.dtype.kind != "uint" or v.nonneg)


def representable(d: DType, bound: float, frac: int) -> bool:
    """Whether every multiple of 2**-frac with magnitude <= bound is exactly a value of `d`."""
    if d.is_bool:
        return bound <= 1 and frac <= 0
    if d.is_int:
        return frac <= 0 and bound <= min(dt.max_value(d), -dt.min_value(d) if d.kind == "int" else bound)
    if bound > dt.max_value(d):
        return False
    if bound == 0:
        return True
    if -frac < _MIN_EXP[d.name]:
        return False
    return bound * 2.0**frac <= 2.0 ** _SIGNIFICAND[d.name]


def limit(d: DType) -> float:
    """The magnitude the generator keeps values of `d` under (headroom against overflow)."""
    if d.is_int:
        return float(min(dt.max_value(d), 1 << 20))
    return float(min(dt.max_value(d) / 8, 1.0e4))


def ulp_rel(d: DType) -> float:
    """The relative spacing of `d` near 1 (0 for integers)."""
    if not d.is_float:
        return 0.0
    return 2.0 ** (1 - _SIGNIFICAND[d.name])


def ceil_bound(bound: float) -> float:
    """A bound after rounding to an integer."""
    return float(math.floor(bound) + 1)


# ----------------------------------------------------------------------------- arithmetic


def join(a: Val, b: Val, d: DType) -> Val:
    """A value that is one of `a`, `b` (select, min, max), held in `d`."""
    v = Val(d, max(a.bound, b.bound), max(a.frac, b.frac), a.exact and b.exact, a.nonneg and b.nonneg)
    return v.with_dtype(d)


def arith(op: str, a: Val, b: Val, d: DType) -> Val:
    """`a op b` computed in dtype `d` (add, sub, mul, min, max)."""
    if op in ("add", "sub"):
        v = Val(d, a.bound + b.bound, max(a.frac, b.frac), a.exact and b.exact,
                op == "add" and a.nonneg and b.nonneg)
    elif op == "mul":
        v = Val(d, a.bound * b.bound, a.frac + b.frac, a.exact and b.exact, a.nonneg and b.nonneg)
    elif op in ("min", "max"):
        return join(a, b, d)
    else:
        raise ValueError(op)
    return v.with_dtype(d)


def sum_of(n: int, a: Val, accum: DType, d: DType) -> Val:
    """A sum of `n` values like `a`, accumulated in `accum` and stored in `d`: exact when every
    partial sum is representable in both (then the summation order cannot matter)."""
    v = Val(accum, n * a.bound, a.frac, a.exact, a.nonneg)
    v = v.with_dtype(accum)
    return Val(d, v.bound, v.frac, v.exact, v.nonneg).with_dtype(d)

