"""Hypothesis generation of T.Parallel element expressions as kernel source text.

Every expression is drawn together with its :class:`~.values.Val`, so the generator knows
its dtype (following the language's promotion rules), a bound on its magnitude and whether
it is exact. Operations that would overflow, or that would make an exact-mode program
inexact, fall back to their first operand; discontinuous operations (floor, comparisons,
float-to-int casts) only ever see exact operands, so a one-ulp difference upstream cannot
turn into a large difference downstream. The first alternative of every choice is the
simplest, so Hypothesis shrinks expressions towards a single load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hypothesis import strategies as st

from tilecore import dtypes as dt
from tilecore.dtypes import DType

from .values import INEXACT_FRAC, Val, arith, ceil_bound, fits, join, limit, representable

F32 = dt.float32


@dataclass(frozen=True)
class Term:
    """An expression: kernel source text and what is known of its value."""

    text: str
    val: Val


@dataclass(frozen=True)
class Ctx:
    """What an expression may use: element loads and index values, index conditions, the
    dtypes casts may target, and whether the program must stay exact."""

    leaves: tuple  # Terms; the first one is what expressions shrink to
    conds: tuple  # source text of conditions on indices
    cast_dtypes: tuple  # DTypes
    exact: bool


_INT_LITS = (1, 2, 3, -1, 5)
_EXACT_LITS = (0.5, 2.0, 1.5, -1.0, 0.25, 3.0)
_INEXACT_LITS = (0.1, 1.7, -2.3, 3.14159)


def _lit_frac(x: float) -> int:
    f = 0
    while x != math.floor(x) and f < 8:
        x *= 2
        f += 1
    return f if x == math.floor(x) else INEXACT_FRAC


def _fmt(x) -> str:
    return repr(x)


def _ok(t: Term, ctx: Ctx) -> bool:
    v = t.val
    if not fits(v):
        return False
    return v.exact or not ctx.exact


def _pick(cand: Term, fallback: Term, ctx: Ctx) -> Term:
    return cand if _ok(cand, ctx) else fallback


def _clamp(t: Term, r: float) -> Term:
    """t limited to [-r, r] (exact: min/max never round); a value known to be >= 0 only from
    above (a negative literal would wrap in an unsigned dtype)."""
    if t.val.bound <= r:
        return t
    lit = int(r) if t.val.dtype.is_int else float(r)
    v = Val(t.val.dtype, float(r), t.val.frac, t.val.exact and representable(t.val.dtype, r, 0),
            t.val.nonneg)
    if t.val.nonneg:
        return Term(f"T.min({t.text}, {_fmt(lit)})", v)
    return Term(f"T.min(T.max({t.text}, {_fmt(-lit)}), {_fmt(lit)})", v)


@st.composite
def terms(draw, ctx: Ctx, depth: int = 3) -> Term:
    """An element expression over `ctx.leaves`, at most `depth` operations deep."""
    kinds = ["leaf"] if depth <= 0 else ["leaf", "func", "binary", "lit", "func", "select", "cast", "unary",
                                         "func"]
    kind = draw(st.sampled_from(kinds))
    if kind == "leaf":
        return draw(st.sampled_from(ctx.leaves))
    a = draw(terms(ctx, depth - 1))
    if kind == "lit":
        return _with_literal(draw, a, ctx)
    if kind == "binary":
        b = draw(terms(ctx, depth - 1))
        return _binary(draw, a, b, ctx)
    if kind == "unary":
        op = draw(st.sampled_from(["neg", "abs"]))
        if op == "neg":
            v = a.val
            return _pick(Term(f"(-{a.text})", Val(v.dtype, v.bound, v.frac, v.exact)), a, ctx)
        v = a.val
        return Term(f"T.abs({a.text})", Val(v.dtype, v.bound, v.frac, v.exact, True))
    if kind == "func":
        return _func(draw, a, ctx)
    if kind == "select":
        b = draw(terms(ctx, depth - 1))
        c = draw(conditions(ctx, depth - 1))
        d = dt.promote(a.val.dtype, b.val.dtype)
        v = join(a.val, b.val, d)
        if draw(st.booleans()):
            text = f"({a.text} if {c} else {b.text})"
        else:
            text = f"T.if_then_else({c}, {a.text}, {b.text})"
        return _pick(Term(text, v), a, ctx)
    return _cast(draw, a, ctx)


def _with_literal(draw, a: Term, ctx: Ctx) -> Term:
    d = a.val.dtype
    op = draw(st.sampled_from(["mul", "add", "div", "rsub"]))
    if d.is_int:
        lit = draw(st.sampled_from(_INT_LITS))
        lv = Val(d, abs(lit), 0, True, lit >= 0)
    else:
        pool = _EXACT_LITS if ctx.exact else _EXACT_LITS + _INEXACT_LITS
        lit = draw(st.sampled_from(pool))
        f = _lit_frac(lit)
        lv = Val(d, abs(lit), f, f < INEXACT_FRAC and representable(d, abs(lit), f), lit >= 0)
    if op == "div":
        if d.is_int:
            if lit < 0 and d.kind == "uint":
                return a  # the literal would wrap to a huge divisor
            v = Val(d, a.val.bound, 0, a.val.exact, a.val.nonneg and lit > 0)
            return _pick(Term(f"({a.text} // {lit})", v), a, ctx)
        k = math.log2(abs(lit))
        if k == int(k):
            v = Val(d, a.val.bound / abs(lit), a.val.frac + int(k), a.val.exact,
                    a.val.nonneg and lit > 0).with_dtype(d)
        else:
            v = Val(d, a.val.bound / abs(lit), INEXACT_FRAC, False, a.val.nonneg and lit > 0)
        return _pick(Term(f"({a.text} / {_fmt(lit)})", v), a, ctx)
    if op == "rsub":
        return _pick(Term(f"({_fmt(lit)} - {a.text})", arith("sub", lv, a.val, d)), a, ctx)
    sym = "*" if op == "mul" else "+"
    return _pick(Term(f"({a.text} {sym} {_fmt(lit)})", arith(op, a.val, lv, d)), a, ctx)


def _binary(draw, a: Term, b: Term, ctx: Ctx) -> Term:
    d = dt.promote(a.val.dtype, b.val.dtype)
    op = draw(st.sampled_from(["add", "mul", "sub", "max", "min", "div", "mod"]))
    if op in ("add", "sub", "mul"):
        sym = {"add": "+", "sub": "-", "mul": "*"}[op]
        return _pick(Term(f"({a.text} {sym} {b.text})", arith(op, a.val, b.val, d)), a, ctx)
    if op in ("max", "min"):
        return _pick(Term(f"T.{op}({a.text}, {b.text})", join(a.val, b.val, d)), a, ctx)
    # division and remainder by a denominator kept >= 1 in magnitude
    if b.val.bound + 1 > limit(b.val.dtype):
        return a
    den = f"(T.abs({b.text}) + 1)"
    exact = a.val.exact and b.val.exact
    if d.is_int:  # C division and remainder keep the dividend's sign
        if op == "div":
            return _pick(Term(f"({a.text} // {den})", Val(d, a.val.bound, 0, exact, a.val.nonneg)), a, ctx)
        v = Val(d, min(a.val.bound, b.val.bound + 1), 0, exact, a.val.nonneg)
        return _pick(Term(f"({a.text} % {den})", v), a, ctx)
    if op == "mod":
        return a  # float remainder is not part of the generated language subset
    return _pick(Term(f"({a.text} / {den})", Val(d, a.val.bound, INEXACT_FRAC, False, a.val.nonneg)), a, ctx)


_FUNCS = ["exp2", "exp", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin", "cos", "pow",
          "exp", "floor", "round"]
_EXACT_FUNCS = ["exp2", "floor", "exp2", "ceil", "trunc", "exp2", "round"]  # exact on exact operands


def _func(draw, a: Term, ctx: Ctx) -> Term:
    name = draw(st.sampled_from(_EXACT_FUNCS if ctx.exact else _FUNCS))
    d = a.val.dtype if a.val.dtype.is_float else F32
    if name in ("floor", "ceil", "trunc", "round"):
        if not a.val.exact:
            return a  # discontinuous: only on exact operands
        v = Val(d, ceil_bound(a.val.bound), 0, True, a.val.nonneg).with_dtype(d)
        return _pick(Term(f"T.{name}({a.text})", v), a, ctx)
    if name == "exp2":
        r = min(8, int(math.log2(limit(d))))
        if a.val.exact and a.val.frac > 0:  # an exact integer exponent keeps the power exact
            a = Term(f"T.floor({a.text})", Val(d, ceil_bound(a.val.bound), 0, True).with_dtype(d))
        arg = _clamp(a, r)
        bound = 2.0 ** min(arg.val.bound, r)
        e = int(min(arg.val.bound, r))
        exact = arg.val.exact and arg.val.frac <= 0 and representable(d, 2.0**e, e)
        v = Val(d, bound, e if exact else INEXACT_FRAC, exact, True)
        return _pick(Term(f"T.exp2({arg.text})", v), a, ctx)
    inexact = Val(d, 1.0, INEXACT_FRAC, False, name in ("rsqrt", "sigmoid"))
    if name == "exp":
        arg = _clamp(a, min(4, int(math.log(limit(d)))))
        v = Val(d, math.exp(arg.val.bound), INEXACT_FRAC, False, True)
        return _pick(Term(f"T.exp({arg.text})", v), a, ctx)
    if name in ("log", "log2"):
        v = Val(d, math.log2(a.val.bound + 1) + 1, INEXACT_FRAC, False, True)
        return _pick(Term(f"T.{name}(T.abs({a.text}) + 1)", v), a, ctx)
    if name == "sqrt":
        v = Val(d, math.sqrt(a.val.bound) + 1, INEXACT_FRAC, False, True)
        return _pick(Term(f"T.sqrt(T.abs({a.text}))", v), a, ctx)
    if name == "rsqrt":
        return _pick(Term(f"T.rsqrt(T.abs({a.text}) + 1)", inexact), a, ctx)
    if name == "pow":
        ex = draw(st.sampled_from([2.0, 0.5]))
        v = Val(d, (a.val.bound + 1) ** ex, INEXACT_FRAC, False, True)
        return _pick(Term(f"T.pow(T.abs({a.text}) + 1, {_fmt(ex)})", v), a, ctx)
    if name in ("sin", "cos"):
        arg = _clamp(a, 8)
        return _pick(Term(f"T.{name}({arg.text})", inexact), a, ctx)
    return _pick(Term(f"T.{name}({a.text})", inexact), a, ctx)


def _cast(draw, a: Term, ctx: Ctx) -> Term:
    d: DType = draw(st.sampled_from(ctx.cast_dtypes))
    src = a.val.dtype
    if d == src:
        return a
    if d.kind == "uint" and not a.val.nonneg:  # a negative value would wrap to a huge one
        a = Term(f"T.abs({a.text})", Val(src, a.val.bound, a.val.frac, a.val.exact, True))
    if d.is_int and src.is_float:
        if not a.val.exact:
            return a  # truncation is discontinuous: only on exact operands
        arg = _clamp(a, min(limit(d), limit(src)))
        v = Val(d, math.floor(arg.val.bound), 0, arg.val.exact, arg.val.nonneg)
    else:
        arg = a
        v = a.val.with_dtype(d)
    form = draw(st.booleans())
    text = f"T.cast({arg.text}, {d.name!r})" if form else f"T.{d.name}({arg.text})"
    return _pick(Term(text, v), a, ctx)


@st.composite
def conditions(draw, ctx: Ctx, depth: int = 1) -> str:
    """A boolean condition: on indices, or a comparison of exact values."""
    kinds = ["index", "compare", "and", "or", "not"] if depth > 0 else ["index", "compare"]
    kind = draw(st.sampled_from(kinds))
    if kind == "index":
        return draw(st.sampled_from(ctx.conds))
    if kind == "compare":
        exact = [t for t in ctx.leaves if t.val.exact]
        if not exact:
            return draw(st.sampled_from(ctx.conds))
        a = draw(st.sampled_from(exact))
        op = draw(st.sampled_from(["<", ">=", "==", "!=", "<=", ">"]))
        if draw(st.booleans()):
            b = draw(st.sampled_from(exact))
            return f"{a.text} {op} {b.text}"
        lit = draw(st.sampled_from(_INT_LITS))
        return f"{a.text} {op} {lit}"
    if kind == "not":
        return f"not ({draw(conditions(ctx, depth - 1))})"
    x, y = draw(conditions(ctx, depth - 1)), draw(conditions(ctx, depth - 1))
    return f"({x}) {kind} ({y})"
