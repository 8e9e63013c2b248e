"""Integer index arithmetic for lowering: range-aware simplification and numeric evaluation.

Layouts produce index expressions in the thread index (`tx`) and compile-time register numbers.
`simplify` uses known variable ranges (`tx` in [0, threads)) to fold `(c + 4*tx) // 512` and
`% 512` into plain affine forms, so equal indices print (and compare) equal and register
numbers become constants. `evaluate` computes an index expression for every thread at once
(NumPy), which is how lowering proves facts about layouts instead of reasoning symbolically.
"""

from __future__ import annotations

import math

import numpy as np

from .. import semantics as S
from ..ir.expr import COMPOSITE, BinOp, Cast, Const, Expr, Select, Unary, Var, cast, linear
from ..ir.thread import LaneTable
from ..ir.visit import rewrite

Bounds = dict  # Var (by identity, keyed with id) -> (lo, hi) inclusive, hi may be None (unbounded)


def _range(terms: dict, const: int, bounds: dict) -> tuple[int | None, int | None]:
    """Inclusive (lo, hi) of an affine form; None where unbounded."""
    lo: int | None = const
    hi: int | None = const
    for atom, c in terms.items():
        b = _atom_range(atom, bounds)
        if b is None:
            return None, None
        alo, ahi = b
        cands_lo = [c * alo] if c > 0 else ([c * ahi] if ahi is not None else [None])
        cands_hi = [c * ahi] if (c > 0 and ahi is not None) else ([c * alo] if c < 0 else [None])
        lo = None if lo is None or cands_lo[0] is None else lo + cands_lo[0]
        hi = None if hi is None or cands_hi[0] is None else hi + cands_hi[0]
    return lo, hi


def _atom_range(atom, bounds: dict):
    """(lo, hi) of a variable or of `x % c` / `x // c` with x >= 0, else None."""
    if isinstance(atom, Var):
        return bounds.get(id(atom))
    if isinstance(atom, BinOp) and atom.op in ("div", "mod") and isinstance(atom.b, Const) \
            and atom.b.value > 0:
        lin = linear(atom.a)
        if lin is None:
            return None
        lo, hi = _range(lin[0], lin[1], bounds)
        if lo is None or lo < 0:
            return None
        c = int(atom.b.value)
        if atom.op == "mod":
            return (0, c - 1) if hi is None or hi >= c else (lo, hi)
        return lo // c, None if hi is None else hi // c
    if isinstance(atom, BinOp) and atom.op in ("bitxor", "bitor", "bitand"):
        # non-negative operands below 2**k give a result below 2**k (a swizzle's chunk XOR)
        ranges = []
        for x in (atom.a, atom.b):
            lin = linear(x)
            r = None if lin is None else _range(lin[0], lin[1], bounds)
            if r is None or r[0] is None or r[0] < 0 or r[1] is None:
                return None
            ranges.append(r)
        if atom.op == "bitand":
            return 0, min(ranges[0][1], ranges[1][1])
        return 0, (1 << max(r[1] for r in ranges).bit_length()) - 1
    return None


def value_range(e, bounds: dict) -> tuple[int, int] | None:
    """Inclusive (lo, hi) of the integer expression `e` under `bounds`, None when unbounded."""
    lin = linear(e)
    if lin is None:
        return None
    lo, hi = _range(lin[0], lin[1], bounds)
    return None if lo is None or hi is None else (lo, hi)


def _build(terms: dict, const: int, dtype) -> Expr:
    """The affine form `const + sum(c * atom)`, largest coefficients first. Atoms of `dtype`
    are combined into BinOps directly (what `+` and `*` would build, without their promotion
    and folding checks: this runs for every affine node the simplifier visits)."""
    out: Expr = Const(const, dtype)
    for atom, c in sorted(terms.items(), key=lambda kv: -abs(kv[1])):
        if atom.dtype != dtype and atom.dtype.is_int and not isinstance(atom, Const):
            # `linear` looks through integer casts: the atom computes in `dtype`, as the cast
            # around it did (an int32 index times an int64 constant must not wrap at 32 bits)
            atom = cast(atom, dtype)
        if atom.dtype != dtype or isinstance(atom, Const) or c == 0:
            out = out + (atom if c == 1 else atom * c)
            continue
        term = atom if c == 1 else BinOp("mul", atom, Const(c, dtype), dtype)
        out = term if isinstance(out, Const) and out.value == 0 else BinOp("add", out, term, dtype)
    return out


def _divmod(e: BinOp, bounds: dict) -> Expr | None:
    """Fold `x // d` and `x % d` for an affine, provably non-negative x: terms whose coefficient
    d divides move out of the division; what remains is divided by the common factor of its
    coefficients and d, and vanishes (div) or stays bare (mod) when its range is below d."""
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
    if ilo is None or ilo < 0:
        return None
    g2 = dv
    for c in inner.values():
        g2 = math.gcd(g2, c)
    if 0 < rem < g2:
        # the multiple-of-g2 part never crosses a multiple of d by adding rem < g2
        base = BinOp(e.op, _build(inner, 0, e.dtype), d, e.dtype)
        folded = _divmod(base, bounds)
        part = folded if folded is not None else base
        head = _build({a: c // dv for a, c in outer.items()}, q, e.dtype)
        return head + part if e.op == "div" else part + rem
    g = dv
    for c in list(inner.values()) + [rem]:
        g = math.gcd(g, c)
    small = ihi is not None and ihi < dv
    if not outer and q == 0 and g == 1 and not small:
        return None
    inner_e = _build({a: c // g for a, c in inner.items()}, rem // g, e.dtype)
    dg = dv // g
    if e.op == "div":
        if small:
            rest: Expr = Const(0, e.dtype)
        else:
            rest = inner_e if dg == 1 else BinOp("div", inner_e, Const(dg, e.dtype), e.dtype)
        return _build({a: c // dv for a, c in outer.items()}, q, e.dtype) + rest
    if small:
        return _build(inner, rem, e.dtype)
    m = inner_e if dg == 1 else BinOp("mod", inner_e, Const(dg, e.dtype), e.dtype)
    return m if g == 1 else m * g


def _compare(e: BinOp, bounds: dict) -> bool | None:
    """The value of an integer comparison when the operands' ranges decide it."""
    lin = linear(e.a - e.b)
    if lin is None:
        return None
    lo, hi = _range(lin[0], lin[1], bounds)
    if e.op == "lt":
        return True if hi is not None and hi < 0 else (False if lo is not None and lo >= 0 else None)
    if e.op == "le":
        return True if hi is not None and hi <= 0 else (False if lo is not None and lo > 0 else None)
    if e.op == "gt":
        return True if lo is not None and lo > 0 else (False if hi is not None and hi <= 0 else None)
    return True if lo is not None and lo >= 0 else (False if hi is not None and hi < 0 else None)


def _bits(terms: dict, const: int, bounds: dict) -> list[int] | None:
    """The bit masks an affine form's parts can set (the constant's first), or None unless
    every part is a non-negative atom times a power of two and the masks are pairwise
    disjoint: then the sum is their OR (no carries), so an XOR distributes over it."""
    masks = [const] if const else []
    for atom, c in terms.items():
        r = _atom_range(atom, bounds)
        if r is None or r[0] is None or r[0] < 0 or r[1] is None or c <= 0 or c & (c - 1):
            return None
        masks.append(((1 << r[1].bit_length()) - 1) * c)
    seen = 0
    for m in masks:
        if seen & m:
            return None
        seen |= m
    return masks


def _xor_constant_out(n: BinOp, bounds: dict) -> Expr | None:
    """`(K + y) ^ m` with K's bits apart from y's: `(y ^ m) ^ K`, or `K + (y ^ m)` when m's bits
    are apart from K's too. A swizzle's chunk XOR at unrolled k steps (`K` the step's chunk)
    then shares one per-thread `y ^ m`, and a constant that no XOR touches becomes an
    immediate offset, instead of a distinct per-thread value per step."""
    for x, m in ((n.a, n.b), (n.b, n.a)):
        lin = linear(x)
        if lin is None or not lin[0] or lin[1] <= 0:
            continue
        masks = _bits(lin[0], lin[1], bounds)
        mr = _atom_range(m, bounds) if not isinstance(m, Const) else (int(m.value), int(m.value))
        if masks is None or mr is None or mr[0] is None or mr[0] < 0 or mr[1] is None:
            continue
        k = lin[1]
        inner = BinOp("bitxor", _build(lin[0], 0, n.dtype), m, n.dtype)
        if not k & ((1 << mr[1].bit_length()) - 1):
            return _build({inner: 1}, k, n.dtype)
        return BinOp("bitxor", inner, Const(k, n.dtype), n.dtype)
    return None


# simplify's answers per composite expression, one table per bounds (as sorted items): the
# lowering simplifies each register's index expressions, which share most of their subtrees
# (the thread's row and column parts, a layout's swizzle) with the other registers' and with the
# expressions simplified before. Sound across kernels: the key expression holds its Vars alive,
# so their ids in the bounds key cannot name other variables, and the answer depends only on
# the bounds of the Vars it contains. Emptied when `lower-threads` starts on a kernel (`forget`),
# which bounds its size by one kernel's expressions.
_KNOWN: dict[tuple, dict] = {}


def forget() -> None:
    """Drop the simplifier's memo (`lower-threads` calls this for every kernel it lowers)."""
    _KNOWN.clear()


def simplify(e, bounds: dict):
    """`e` with integer div/mod by constants folded where the ranges in `bounds` prove it."""
    bkey = tuple(sorted(bounds.items()))
    known = _KNOWN.get(bkey)
    if known is None:
        known = _KNOWN[bkey] = {}

    def fn(n):
        if isinstance(n, BinOp) and n.op == "mod" and isinstance(n.a, BinOp) and n.a.op == "mod" \
                and isinstance(n.b, Const) and isinstance(n.a.b, Const) and n.b.value > 0 \
                and n.a.b.value % n.b.value == 0:
            r = _atom_range(n.a, bounds)
            if r is not None and r[0] >= 0:
                n = BinOp("mod", n.a.a, n.b, n.dtype)
        if isinstance(n, BinOp) and n.op in ("div", "mod") and n.dtype.is_int:
            r = _divmod(n, bounds)
            if r is not None:
                return r
            return n
        if isinstance(n, BinOp) and n.op in ("lt", "le", "gt", "ge") and n.a.dtype.is_int:
            decided = _compare(n, bounds)
            if decided is not None:
                return Const(decided, n.dtype)
        if isinstance(n, BinOp) and n.op == "bitxor" and n.dtype.is_int:
            for x, y in ((n.a, n.b), (n.b, n.a)):
                if isinstance(x, Const) and isinstance(y, Const):
                    return Const(S.binop("bitxor", int(x.value), int(y.value), n.dtype), n.dtype)
                if isinstance(x, Const) and x.value == 0:
                    return y
            out = _xor_constant_out(n, bounds)
            if out is not None:
                return out
        if isinstance(n, BinOp) and n.op == "and":
            for x, y in ((n.a, n.b), (n.b, n.a)):
                if isinstance(x, Const) and x.value is True:
                    return y
                if isinstance(x, Const) and x.value is False:
                    return x
        if isinstance(n, BinOp) and n.op in ("add", "sub", "mul") and n.dtype.is_int:
            lin = linear(n)
            if lin is not None and all(isinstance(a, (Var, BinOp)) for a in lin[0]):
                return _build(lin[0], lin[1], n.dtype)
        return None

    return rewrite(e, fn, known=known)


class NotNumeric(Exception):
    """The expression depends on something other than the given variables."""


def evaluate(e, env: dict, memo: dict | None = None):
    """Evaluate an integer/bool index expression with `env` mapping id(Var) -> int or array.

    `memo` (kept by a caller that evaluates many expressions in the same `env`, as a layout's
    table does for every register) holds the values of composite subexpressions, keyed by the
    expression: index expressions share most of their subtrees. The values are shared: never
    modify an array this returns."""
    return _evaluate(e, env, {} if memo is None else memo)


def _evaluate(e, env: dict, memo: dict):
    if isinstance(e, (int, np.integer)):
        return int(e)
    cls = type(e)
    if cls is Const:
        return e.value
    if cls is Var:
        if id(e) not in env:
            raise NotNumeric(e.name)
        return env[id(e)]
    keyed = cls in COMPOSITE
    if keyed:
        got = memo.get(e)
        if got is not None:
            return got
    if isinstance(e, Cast) and (e.dtype.is_int or e.dtype.is_bool) and (
            e.value.dtype.is_int or e.value.dtype.is_bool):
        out = S.cast_value(_evaluate(e.value, env, memo), e.value.dtype, e.dtype)
    elif isinstance(e, LaneTable):
        idx = _evaluate(e.index, env, memo)
        out = np.asarray(e.values, dtype=np.int64)[idx]
    elif isinstance(e, BinOp) and (e.a.dtype.is_int or e.a.dtype.is_bool):
        a = np.asarray(_evaluate(e.a, env, memo), dtype=np.int64)
        b = np.asarray(_evaluate(e.b, env, memo), dtype=np.int64)
        if e.op in ("div", "mod"):
            b = np.where(b == 0, 1, b)  # a lane that divides by zero never runs that access
        out = S.binop(e.op, a, b, e.a.dtype)
    elif cls is Unary and (e.a.dtype.is_int or e.a.dtype.is_bool):
        out = S.unary(e.op, np.asarray(_evaluate(e.a, env, memo), dtype=np.int64 if e.a.dtype.is_int
                                       else bool), e.a.dtype)
    elif cls is Select and (e.dtype.is_int or e.dtype.is_bool):
        # both sides at every index (NumPy): index arithmetic has no loads to keep safe, and a
        # division by zero on the side not taken is guarded as above
        out = np.where(np.asarray(_evaluate(e.cond, env, memo), dtype=bool),
                       _evaluate(e.true_value, env, memo), _evaluate(e.false_value, env, memo))
    else:
        raise NotNumeric(type(e).__name__)
    if keyed:
        memo[e] = out
    return out


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
