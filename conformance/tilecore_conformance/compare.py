"""Judging a target's outputs against the oracle's: `==` for exact outputs, otherwise
per-dtype tolerances that a backend may replace through the `tile_tolerance` hook."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tilecore import dtypes as dt
from tilecore import plugins
from tilecore.dtypes import DType

from .case import Case, Param

# (rtol, atol): |got - want| <= atol * scale + rtol * |want|, where scale is the magnitude
# bound of the values the output was computed from (so cancellation is allowed for).
DEFAULT_TOLERANCE = {
    "float64": (1e-9, 1e-9), "float32": (2e-4, 2e-5), "float16": (2e-2, 4e-3),
    "bfloat16": (6e-2, 3e-2), "float8_e4m3fn": (0.3, 0.15), "float8_e5m2": (0.6, 0.3),
}
_FLOATS = sorted(DEFAULT_TOLERANCE, key=lambda n: -DEFAULT_TOLERANCE[n][0])


# math functions the generator applies; on integer operands they compute in float32
_MATH_CALL = re.compile(r"T\.(exp2|exp|log2|log|sqrt|rsqrt|tanh|sigmoid|erf|sin|cos|pow)\(")
_INT_DTYPE = re.compile(r"['\"]u?int(8|16|32|64)['\"]")


def narrowest_float(case: Case) -> DType:
    """The least precise float dtype the program computes in: inexact errors are of its size.
    That is the narrowest float dtype it names, or float32 when a math function may see an
    integer operand (`T.erf(i)` computes in float32 even in a program naming only float64)."""
    for name in _FLOATS:
        if re.search(rf"['\".]{name}\b", case.source):
            if name == "float64" and _MATH_CALL.search(case.source) and _INT_DTYPE.search(case.source):
                return dt.float32
            return dt.as_dtype(name)
    return dt.float32


def tolerance(target, d: DType) -> tuple[float, float]:
    """(rtol, atol) for inexact outputs computed through dtype `d` on `target`."""
    got = plugins.manager().hook.tile_tolerance(target=target, dtype=d)
    if got is not None:
        return float(got[0]), float(got[1])
    return DEFAULT_TOLERANCE.get(d.name, (0.0, 0.0))


@dataclass(frozen=True)
class Mismatch:
    """Where and by how much an output differs."""

    param: str
    count: int
    total: int
    index: tuple
    want: float
    got: float
    rule: str

    def __str__(self) -> str:
        return (f"{self.param}: {self.count}/{self.total} elements differ ({self.rule}); first at "
                f"{self.index}: oracle {self.want!r}, target {self.got!r}")


def compare(case: Case, want: list, got: list, target) -> Mismatch | None:
    """The first output that differs beyond what the case allows, or None."""
    tol_dt = narrowest_float(case)
    for p, w, g in zip(case.params, want, got):
        if not p.is_output:
            continue
        m = compare_one(p, np.asarray(w), np.asarray(g), None if p.exact else tolerance(target, tol_dt))
        if m is not None:
            return m
    return None


def compare_one(p: Param, want: np.ndarray, got: np.ndarray, tol) -> Mismatch | None:
    """Compare one output: bitwise-equal values (NaN equal to NaN) or within `tol`."""
    whole = want.dtype.kind in "iub" and got.dtype.kind in "iub"  # ints beyond 2**53 stay exact
    w = want.astype(np.int64 if whole else np.float64)
    g = got.astype(np.int64 if whole else np.float64)
    if w.shape != g.shape:
        nan = float("nan")
        return Mismatch(p.name, w.size, w.size, (), nan, nan, f"shape {g.shape} != {w.shape}")
    same = (w == g) if whole else (w == g) | (np.isnan(w) & np.isnan(g))
    if tol is None:
        bad, rule = ~same, "exact comparison"
    else:
        rtol, atol = tol
        close = np.abs(g - w) <= atol * p.scale + rtol * np.abs(w)
        bad, rule = ~(same | close), f"rtol={rtol:g}, atol={atol:g} x scale {p.scale:g}"
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return Mismatch(p.name, int(bad.sum()), int(bad.size), idx, float(w[idx]), float(g[idx]), rule)
