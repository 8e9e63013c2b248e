"""Tile-level clean-up passes shared by every target."""

from __future__ import annotations

import math

from .. import dtypes as dt
from .. import semantics as S
from ..ir.expr import Cast, Const
from ..ir.module import Module
from ..ir.static_checks import check_program
from ..ir.stmt import SeqStmt
from ..ir.verifier import verify
from ..ir.visit import rewrite
from ..target import TargetDesc
from .base import tile_pass


@tile_pass("verify")
def verify_pass(module: Module, desc: TargetDesc) -> Module:
    """Invariant: every variable is defined before use and every buffer is allocated; the
    user-facing static checks (`tilecore.ir.static_checks`) pass."""
    check_program(module.func)  # first: a user's unbound T.dynamic is not an internal error
    verify(module.func)
    return module


def _fold_cast(c: Cast):
    """A cast of a constant as `tilecore.semantics.cast_value` computes it, or None for a float
    that is NaN, infinite or outside the integer destination's range (C leaves that conversion
    undefined, so the folded value could differ from what the target computes at run time)."""
    v = c.value
    if not isinstance(v, Const):
        return None
    if v.dtype.is_float and c.dtype.is_int:
        x = float(v.value)
        if not math.isfinite(x) or not dt.min_value(c.dtype) <= math.trunc(x) <= dt.max_value(c.dtype):
            return None
    r = S.cast_value(v.value, v.dtype, c.dtype)
    if c.dtype.is_float:
        return Const(float(r), c.dtype)
    return Const(bool(r) if c.dtype.is_bool else int(r), c.dtype)


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
