"""Tile-level clean-up passes shared by every target."""

from __future__ import annotations

import numpy as np

from ..ir.expr import Cast, Const
from ..ir.module import Module
from ..ir.stmt import SeqStmt
from ..ir.verifier import verify
from ..ir.visit import rewrite
from ..target import TargetDesc
from .base import tile_pass


@tile_pass("verify")
def verify_pass(module: Module, desc: TargetDesc) -> Module:
    """Invariant: every variable is defined before use and every buffer is allocated."""
    verify(module.func)
    return module


def _fold_cast(c: Cast):
    v = c.value
    if not isinstance(v, Const):
        return None
    if c.dtype.is_float:
        rounded = np.array(v.value, dtype=np.float64).astype(c.dtype.np).astype(np.float64)
        return Const(float(rounded), c.dtype)
    if c.dtype.is_bool:
        return Const(bool(v.value), c.dtype)
    if v.dtype.is_float:
        return None  # float -> int conversion of out-of-range values is target-defined; keep it
    info = np.iinfo(c.dtype.np)
    span = int(info.max) - int(info.min) + 1
    x = (int(v.value) - int(info.min)) % span + int(info.min)
    return Const(x, c.dtype)


@tile_pass("simplify")
def simplify(module: Module, desc: TargetDesc) -> Module:
    """Invariant: casts of constants are folded (rounded to the target dtype) and statement
    sequences are flat (no SeqStmt directly inside a SeqStmt, no empty nested ones)."""

    def fn(n):
        if isinstance(n, Cast):
            return _fold_cast(n)
        if isinstance(n, SeqStmt):
            flat = []
            changed = False
            for s in n.stmts:
                if isinstance(s, SeqStmt):
                    flat.extend(s.stmts)
                    changed = True
                else:
                    flat.append(s)
            if changed:
                return SeqStmt(tuple(flat), n.loc)
        return None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn)))
