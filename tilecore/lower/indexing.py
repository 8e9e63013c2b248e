"""Integer index arithmetic for lowering: range-aware simplification and numeric evaluation.

Layouts produce index expressions in the thread index (`tx`) and compile-time register numbers.
`simplify` uses known variable ranges (`tx` in [0, threads)) to fold `(c + 4*tx) // 512` and
`% 512` into plain affine forms, so equal indices print (and compare) equal and register
numbers become constants. `evaluate` computes an index expression for every thread at once
(NumPy), which is how lowering proves facts about layouts instead of reasoning symbolically.
"""

from __future__ import annotations

import numpy as np

from ..ir.expr import BinOp, Cast, Const, Expr, Var, linear
from ..ir.thread import LaneTable
from ..ir.visit import rewrite

Bounds = dict  # Var (by identity, keyed with id) -> (lo, hi) inclusive, hi may be None (unbounded)


def _range(terms: dict, const: int, bounds: dict) -> tuple[int | None, int | None]:
    """Inclusive (lo, hi) of an affine form; None where unbounded."""
    lo: int | None = const
    hi: int | None = const
    for atom, c in terms.items():
        b = bounds.get(id(atom)) if isinstance(atom, Var) else None
        if b is None:
            return None, None
        alo, ahi = b
        cands_lo = [c * alo] if c > 0 else ([c * ahi] if ahi is not None else [None])
        cands_hi = [c * ahi] if (c > 0 and ahi is not None) else ([c * alo] if c < 0 else [None])
        lo = None if lo is None or cands_lo[0] is None else lo + cands_lo[0]
        hi = None if hi is None or cands_hi[0] is None else hi + cands_hi[0]
    return lo, hi


def _build(terms: dict, const: int, dtype) -> Expr:
    out: Expr = Const(const, dtype)
    for atom, c in sorted(terms.items(), key=lambda kv: -abs(kv[1])):
        out = out + (atom if c == 1 else atom * c)
    return out


def _divmod(e: BinOp, bounds: dict) -> Expr | None:
    d = e.b
    if not isinstance(d, Const) or d.value <= 0:
        return None
    dv = int(d.value)
    lin = linear(e.a)
    if lin is None:
        return None
    terms, const = lin
    lo, _ = _range(terms, const, bounds)
    if lo is None or lo < 0:
        return None  # C truncation differs from floor for negatives; leave it alone
    outer = {a: c for a, c in terms.items() if c % dv == 0}
    inner = {a: c for a, c in terms.items() if c % dv != 0}
    q, rem = divmod(const, dv)
    ilo, ihi = _range(inner, rem, bounds)
    if ilo is None or ihi is None or ilo < 0 or ihi >= dv:
        return None
    if e.op == "div":
        return _build({a: c // dv for a, c in outer.items()}, q, e.dtype)
    return _build(inner, rem, e.dtype)


def simplify(e, bounds: dict):
    """`e` with integer div/mod by constants folded where the ranges in `bounds` prove it."""

    def fn(n):
        if isinstance(n, BinOp) and n.op in ("div", "mod") and n.dtype.is_int:
            r = _divmod(n, bounds)
            if r is not None:
                return r
        if isinstance(n, BinOp) and n.op in ("add", "sub", "mul") and n.dtype.is_int:
            lin = linear(n)
            if lin is not None and all(isinstance(a, Var) for a in lin[0]):
                return _build(lin[0], lin[1], n.dtype)
        return None

    return rewrite(e, fn)


class NotNumeric(Exception):
    """The expression depends on something other than the given variables."""


def evaluate(e, env: dict):
    """Evaluate an integer/bool index expression with `env` mapping id(Var) -> int or array."""
    if isinstance(e, (int, np.integer)):
        return int(e)
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        if id(e) not in env:
            raise NotNumeric(e.name)
        return env[id(e)]
    if isinstance(e, Cast) and (e.dtype.is_int or e.dtype.is_bool) and (
            e.value.dtype.is_int or e.value.dtype.is_bool):
        v = evaluate(e.value, env)
        return np.not_equal(v, 0) if e.dtype.is_bool else v
    if isinstance(e, LaneTable):
        idx = evaluate(e.index, env)
        return np.asarray(e.values, dtype=np.int64)[idx]
    if isinstance(e, BinOp) and (e.a.dtype.is_int or e.a.dtype.is_bool):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        op = e.op
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul":
            return a * b
        if op == "div":
            q = np.abs(a) // np.maximum(np.abs(b), 1)
            return np.where((a >= 0) == (b >= 0), q, -q)
        if op == "mod":
            return np.fmod(a, np.where(b == 0, 1, b))
        if op == "min":
            return np.minimum(a, b)
        if op == "max":
            return np.maximum(a, b)
        cmp = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
               "eq": np.equal, "ne": np.not_equal, "and": np.logical_and, "or": np.logical_or}
        if op in cmp:
            return cmp[op](a, b)
    raise NotNumeric(type(e).__name__)


def try_evaluate(e, env: dict):
    """`evaluate`, or None when `e` is not computable from `env`."""
    try:
        return evaluate(e, env)
    except NotNumeric:
        return None


def free_vars(e) -> list[Var]:
    """The distinct Vars in `e`."""
    from ..ir.visit import walk

    seen: dict[int, Var] = {}
    for n in walk(e):
        if isinstance(n, Var):
            seen.setdefault(id(n), n)
    return list(seen.values())
