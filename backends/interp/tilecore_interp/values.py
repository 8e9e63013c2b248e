"""How the interpreter holds values: the compute representation of each dtype and rounding.

Narrow floats (float16, bfloat16, float8) are held as float32 numbers that are exactly
representable in the narrow type; every operation computes in float32 and rounds back, which
is what the oracle promises (one rounding per operation, to the operation's dtype).
Integers are held as int64 (Python ints for scalars) and wrap to their width on store or cast.
"""

from __future__ import annotations

import numpy as np

from tilecore.dtypes import DType


def compute_np(d: DType) -> np.dtype:
    """The NumPy dtype values of `d` are computed in."""
    if d.is_bool:
        return np.dtype(np.bool_)
    if d.is_int:
        return np.dtype(np.int64)
    if d.bits == 64:
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def round_to(x, d: DType):
    """Round a computed float value (array or scalar) to dtype `d`, keeping the compute type."""
    if d.is_narrow_float:
        return np.asarray(x, dtype=np.float32).astype(d.np).astype(np.float32)
    if d.name == "float32":
        return np.float32(x) if np.ndim(x) == 0 else np.asarray(x, dtype=np.float32)
    if d.name == "float64":
        return np.float64(x) if np.ndim(x) == 0 else np.asarray(x, dtype=np.float64)
    return x


def wrap_int(x, d: DType):
    """Wrap an integer value to the width of `d` (C conversion), keeping int64/Python int."""
    if np.ndim(x) == 0:
        v = int(x)
        bits = d.bits
        mask = (1 << bits) - 1
        v &= mask
        if d.kind == "int" and v >= 1 << (bits - 1):
            v -= 1 << bits
        return v
    return np.asarray(x).astype(d.np).astype(np.int64)


def cast_value(x, src: DType, dst: DType):
    """C-style conversion of a computed value from `src` to `dst`."""
    if dst.is_bool:
        return np.not_equal(x, 0) if np.ndim(x) else bool(x != 0)
    if dst.is_float:
        if src.is_float or src.is_bool:
            return round_to(np.asarray(x, dtype=np.float64) if src.bits == 64 else x, dst)
        return round_to(np.asarray(x, dtype=np.float64), dst)
    # to integer
    if src.is_float:
        with np.errstate(invalid="ignore", over="ignore"):
            t = np.trunc(np.asarray(x, dtype=np.float64))
            t = np.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0)
            lo, hi = -(2.0**63), 2.0**63 - 1024
            t = np.clip(t, lo, hi).astype(np.int64)
        return wrap_int(t if np.ndim(t) else int(t), dst)
    return wrap_int(x, dst)


def from_storage(v, d: DType):
    """A value read from a buffer of dtype `d`, in compute representation."""
    if np.ndim(v) == 0:
        if d.is_int:
            return int(v)
        if d.is_bool:
            return bool(v)
        if d.name == "float64":
            return np.float64(v)
        return np.float32(v)
    return np.asarray(v).astype(compute_np(d), copy=False)


def poison_value(d: DType, mode: str = "nan"):
    """What uninitialized shared/fragment memory holds: NaN for floats, a garbage pattern for ints."""
    nan_mode = mode == "nan"
    if d.is_float:
        return np.nan if nan_mode else 1.0e4 if d.bits > 8 else 448.0
    if d.is_bool:
        return nan_mode
    # Two different garbage patterns, so the adversarial run sees int reads of poison change.
    info = np.iinfo(d.np)
    if d.kind == "uint":
        return info.max if nan_mode else info.max // 3
    return info.min + 7 if nan_mode else info.max - 5
