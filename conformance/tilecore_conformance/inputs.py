"""Argument arrays for a case, all drawn from one seed (the seed a failure report names)."""

from __future__ import annotations

import numpy as np

from tilecore import dtypes as dt

from .case import Case, Param
from .values import INEXACT_FRAC


def make_array(p: Param, rng: np.random.Generator) -> np.ndarray:
    """Values in offset + [-bound, bound] (unsigned dtypes: offset + [0, bound]): multiples of
    2**-frac, or any value of the dtype (rounded from uniform floats) when frac is INEXACT_FRAC."""
    d = dt.as_dtype(p.dtype)
    if d.is_int:
        k = int(p.bound)
        vals = rng.integers(0 if d.kind == "uint" else -k, k + 1, size=p.shape, dtype=np.int64)
        return (vals + int(p.offset)).astype(d.np)
    if p.frac < INEXACT_FRAC:
        scale = 2 ** max(p.frac, 0)
        k = int(p.bound * scale)
        vals = rng.integers(-k, k + 1, size=p.shape).astype(np.float64) / scale
    else:
        vals = rng.uniform(-p.bound, p.bound, size=p.shape)
    return (vals + p.offset).astype(d.np)


def make_args(case: Case, seed: int) -> list[np.ndarray]:
    """Every parameter's array, in order (outputs pre-filled too: atomics add onto them)."""
    rng = np.random.default_rng(seed)
    return [make_array(p, rng) for p in case.params]
