"""Scalar semantics of the emulator, the same as the oracle's: how values are held and rounded.

Narrow floats (float16, bfloat16, float8) compute in float32 and round back after every
operation; float32 and float64 compute natively; integers compute in int64 and wrap to their
width on store or cast (C conversion).
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import DType

_erf = np.frompyfunc(math.erf, 1, 1)


def compute_np(d: DType) -> np.dtype:
    """The NumPy dtype values of `d` are computed in."""
    if d.is_bool:
        return np.dtype(np.bool_)
    if d.is_int:
        return np.dtype(np.int64)
    return np.dtype(np.float64 if d.bits == 64 else np.float32)


def round_to(x, d: DType):
    """Round a computed float to `d`, keeping the compute representation."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is the rounding's result
        if d.is_narrow_float:
            return np.asarray(x, dtype=np.float32).astype(d.np).astype(np.float32)
        return np.asarray(x, dtype=compute_np(d))


def wrap_int(x, d: DType):
    """C conversion of an integer value to the width of `d` (held as int64)."""
    return np.asarray(x).astype(np.int64).astype(d.np).astype(np.int64)


def cast_value(x, src: DType, dst: DType):
    """C-style conversion of computed value(s) from `src` to `dst`."""
    if dst.is_bool:
        return np.not_equal(x, 0)
    if dst.is_float:
        return round_to(np.asarray(x, dtype=np.float64) if not src.is_float or src.bits == 64 else x, dst)
    if src.is_float:
        with np.errstate(invalid="ignore", over="ignore"):
            t = np.trunc(np.asarray(x, dtype=np.float64))
            t = np.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0)
            t = np.clip(t, -(2.0**63), 2.0**63 - 1024).astype(np.int64)
        return wrap_int(t, dst)
    return wrap_int(np.asarray(x, dtype=np.int64), dst)


def to_storage(x, d: DType) -> np.ndarray:
    """Computed value(s) in the storage dtype of `d`."""
    if d.is_int:
        return np.asarray(x).astype(np.int64).astype(d.np)
    return np.asarray(x).astype(d.np)


def from_storage(x, d: DType) -> np.ndarray:
    """Stored value(s) in the compute representation of `d`."""
    return np.asarray(x).astype(compute_np(d))


def poison(d: DType):
    """What uninitialized shared memory and registers hold."""
    if d.is_float:
        return np.nan
    if d.is_bool:
        return True
    return np.iinfo(d.np).min + 7 if d.kind == "int" else np.iinfo(d.np).max


def erf(x):
    """Element-wise erf in float64."""
    return np.asarray(_erf(np.asarray(x, dtype=np.float64)), dtype=np.float64)


UNARY = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "erf": erf, "floor": np.floor,
    "ceil": np.ceil, "sin": np.sin, "cos": np.cos, "round": np.rint, "trunc": np.trunc,
    "abs": np.abs,
}
FLOAT_BIN = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "min": np.minimum, "max": np.maximum, "pow": np.power, "mod": np.fmod,
}
CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
       "eq": np.equal, "ne": np.not_equal}


def int_binop(op: str, a, b):
    """Integer arithmetic with C division and remainder (truncating toward zero)."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op in ("div", "mod"):
        if np.any(b == 0):
            raise ZeroDivisionError
        if op == "mod":
            return np.fmod(a, b)
        q = np.abs(a) // np.abs(b)
        return np.where((a >= 0) == (b >= 0), q, -q)
    if op == "min":
        return np.minimum(a, b)
    if op == "max":
        return np.maximum(a, b)
    if op == "pow":
        return a ** b
    raise TypeError(op)
