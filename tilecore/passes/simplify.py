"""Tile-level clean-up passes shared by every target."""

from __future__ import annotations

import math

from .. import dtypes as dt
from .. import semantics as S
from ..ir.expr import BinOp, Cast, Const, Select, Var, binop, const_int, linear
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


def _ceildiv_of_size(e, sizes: set):
    """`(a + b - 1) / b` for T.ceildiv's exact form `a / b + (a % b > 0 ? 1 : 0)` when b is a
    positive constant and `a` provably >= 0 (an affine form of tensor sizes with non-negative
    coefficients and constant): the same value, in the form backends bound ranges with (the cpu
    backend proves `n - bx * 256` needs no wrapping from it)."""
    if not (isinstance(e, BinOp) and e.op == "add" and isinstance(e.a, BinOp) and e.a.op == "div"
            and isinstance(e.b, Select)):
        return None
    a, b = e.a.a, e.a.b
    sel = e.b
    bv = const_int(b)
    cond = sel.cond
    if bv is None or bv <= 0 or const_int(sel.true_value) != 1 or const_int(sel.false_value) != 0:
        return None
    if not (isinstance(cond, BinOp) and cond.op == "gt" and isinstance(cond.a, BinOp)
            and cond.a.op == "mod" and cond.a.a == a and const_int(cond.a.b) == bv
            and const_int(cond.b) == 0):
        return None
    lin = linear(a)
    if lin is None or lin[1] < 0 or any(c < 0 or not (isinstance(v, Var) and id(v) in sizes)
                                        for v, c in lin[0].items()):
        return None
    return binop("div", binop("add", a, bv - 1), b)


@tile_pass("simplify")
def simplify(module: Module, desc: TargetDesc) -> Module:
    """Invariant: casts of constants are folded (rounded to the target dtype), statement
    sequences are flat (no SeqStmt directly inside a SeqStmt, no empty nested ones), and
    T.ceildiv of a non-negative size by a positive constant reads `(a + b - 1) / b`."""
    scalars = {id(v) for v in module.func.attr("scalar_params", ())}
    sizes = {id(v) for v in module.func.dyn_vars if id(v) not in scalars}

    def fn(n):
        if isinstance(n, BinOp) and n.op == "add":
            return _ceildiv_of_size(n, sizes)
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
