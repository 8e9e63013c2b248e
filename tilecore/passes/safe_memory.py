"""`safe-memory`: TileLang's safe-memory legalization of element accesses to global tensors.

TileLang (`LegalizeSafeMemoryAccess`, on unless `tl.disable_safe_memory_legalize`) gives every
element load of a global buffer whose indices it cannot prove inside the buffer the value 0 (or
the `T.annotate_safe_value`) outside it, and drops such a store; each dimension is checked on
its own (`0 <= index < extent`), an all-constant index is left alone. Kernels rely on it: a
top-k index list padded with the sentinel `S` (`KV[idx, d]` loads 0 there), a last tile whose
stores run past the tensor. tilecore gives element accesses the same meaning on every target by
rewriting the tile IR before any lowering:

    X[i, j]          ->  T.if_then_else(i < n, X[i, j], 0)          (the load is not evaluated)
    Y[i, j] = v      ->  if i < n: Y[i, j] = v                     (the store is dropped)

A condition is added only for the bounds the pass cannot prove: indices affine in block indices
of a constant grid, loop variables of constant range and let-bound such values, against a
constant extent (`tilecore.ir.static_checks`'s interval rule, which already rejects accesses it
proves to leave a constant-shape buffer), and a bound an enclosing `if` states as written.
Tile operations (`T.copy`, `T.atomic_add` of a tile, ...) are predicated at tensor edges by
their own lowering and are not touched. With `tl.disable_safe_memory_legalize` the pass does
nothing: such an access is undefined, and `interp`, `cpu` and `emu` report it as a located
TileRuntimeError.
"""

from __future__ import annotations

import dataclasses

from ..dtypes import DType, max_value, min_value
from ..ir.buffer import Buffer, Region
from ..ir.expr import BinOp, Cast, Const, Expr, Load, Select, Var, binop, const, const_int
from ..ir.module import Module
from ..ir.static_checks import interval
from ..ir.stmt import AtomicAdd, For, IfThenElse, KernelLaunch, LetStmt, SeqStmt, Store
from ..ir.visit import rewrite, walk
from ..target import TargetDesc
from .base import tile_pass


@tile_pass("safe-memory", when=lambda desc: not desc.options.disable_safe_memory)
def safe_memory(module: Module, desc: TargetDesc) -> Module:
    """Invariant: every element load of a global buffer is inside the buffer or selects its safe
    value instead, and every element store / atomic to one is inside it or not executed."""
    func = module.func
    ranges, lets = _ranges(func.body)
    body = _stmt(func.body, _Ctx(ranges, lets, frozenset()))
    if body is func.body:
        return module
    return module.with_func(dataclasses.replace(func, body=body))


@dataclasses.dataclass(frozen=True)
class _Ctx:
    ranges: dict  # id(Var) -> (lo, hi) of block and loop indices of constant range
    lets: dict  # id(Var) -> the let-bound value
    facts: frozenset  # conditions enclosing `if`s state (their `and`-conjuncts), as written


def _ranges(body) -> tuple[dict, dict]:
    """Constant ranges of block indices and loop variables, and let-bound values: IR variables
    are distinct objects per binding, so one map serves the whole kernel."""
    ranges: dict = {}
    lets: dict = {}
    for n in walk(body):
        if isinstance(n, KernelLaunch):
            for v, g in zip(n.block_vars, n.grid):
                k = const_int(g)
                if k is not None and k >= 1:
                    ranges[id(v)] = (0, k - 1)
        elif isinstance(n, For):
            lo, hi = const_int(n.start), const_int(n.stop)
            if lo is not None and hi is not None and n.step == 1 and hi > lo:
                ranges[id(n.var)] = (lo, hi - 1)
        elif isinstance(n, LetStmt):
            lets[id(n.var)] = n.value
    return ranges, lets


def _conjuncts(e) -> list:
    if isinstance(e, BinOp) and e.op == "and":
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def _stmt(s, ctx: _Ctx):
    """`s` with its element accesses to global buffers guarded (structured statements are
    entered here so that the conditions of enclosing `if`s are known)."""
    if s is None:
        return None
    if isinstance(s, SeqStmt):
        stmts = tuple(_stmt(x, ctx) for x in s.stmts)
        return s if all(a is b for a, b in zip(stmts, s.stmts)) else dataclasses.replace(s, stmts=stmts)
    if isinstance(s, (KernelLaunch, For)):
        new = _leaf(s, ctx, skip=("body",))
        body = _stmt(s.body, ctx)
        return new if body is s.body else dataclasses.replace(new, body=body)
    if isinstance(s, IfThenElse):
        cond = _expr(s.cond, ctx)
        then = _stmt(s.then_body, _with_facts(ctx, s.cond))
        other = _stmt(s.else_body, ctx)
        if cond is s.cond and then is s.then_body and other is s.else_body:
            return s
        return dataclasses.replace(s, cond=cond, then_body=then, else_body=other)
    return _leaf(s, ctx)


def _with_facts(ctx: _Ctx, cond) -> _Ctx:
    """`ctx` where `cond` holds: its conjuncts are facts, and a conjunct comparing a variable
    with a constant (`if i < groups:`) narrows the variable's range."""
    parts = _conjuncts(cond)
    ranges = ctx.ranges
    for c in parts:
        r = _narrowed(c, ranges)
        if r is not None:
            ranges = {**ranges, id(r[0]): r[1]}
    return dataclasses.replace(ctx, ranges=ranges, facts=ctx.facts | set(parts))


_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _narrowed(c, ranges: dict):
    """(var, (lo, hi)) for a conjunct `var op constant` (either side) on a ranged variable."""
    if not (isinstance(c, BinOp) and c.op in _FLIP):
        return None
    op, v, k = c.op, c.a, const_int(c.b)
    if not isinstance(v, Var):
        op, v, k = _FLIP[c.op], c.b, const_int(c.a)
    if not isinstance(v, Var) or k is None or id(v) not in ranges:
        return None
    lo, hi = ranges[id(v)]
    if op == "lt":
        hi = min(hi, k - 1)
    elif op == "le":
        hi = min(hi, k)
    elif op == "gt":
        lo = max(lo, k + 1)
    else:
        lo = max(lo, k)
    return (v, (lo, hi)) if lo <= hi else None


def _leaf(s, ctx: _Ctx, skip: tuple = ()):
    """Rewrite every global element access in `s` (fields in `skip` are left as they are). The
    value of a guarded store is evaluated only where the store runs, so its loads know the
    store's bounds (`B[i] = A[i]` over one extent gets one test)."""
    store = isinstance(s, (Store, AtomicAdd)) and _is_global(s.buffer)
    changes = {}
    for f in dataclasses.fields(s):
        if f.name in skip or f.name == "loc" or (store and f.name == "value"):
            continue
        v = getattr(s, f.name)
        nv = _field(v, ctx)
        if nv is not v:
            changes[f.name] = nv
    out = dataclasses.replace(s, **changes) if changes else s
    if not store:
        return out
    cond = _condition(out.buffer, out.indices, ctx)
    inner = ctx if cond is None else _with_facts(ctx, cond)
    value = _expr(out.value, inner)
    if value is not out.value:
        out = dataclasses.replace(out, value=value)
    return out if cond is None else IfThenElse(cond, out, None, out.loc)


def _field(v, ctx: _Ctx):
    """One field of a statement, rewritten: an expression, another node (a statement nested
    in one `_stmt` does not enter, e.g. a `while` body: guarded without the enclosing `if`s'
    facts), or a (nested) tuple of them and scalars."""
    if isinstance(v, Expr):
        return _expr(v, ctx)
    if isinstance(v, tuple):
        items = tuple(_field(x, ctx) for x in v)
        return v if all(a is b for a, b in zip(items, v)) else items
    if hasattr(v, "__dataclass_fields__") and not isinstance(v, (Buffer, Region, DType, type)):
        return rewrite(v, lambda n: _guard(n, ctx), stop=(Region,))
    return v


def _expr(e: Expr, ctx: _Ctx) -> Expr:
    """`e` with its global loads guarded, top-down so that the taken side of a
    `T.if_then_else` knows its condition (T.im2col's padding test already bounds its load)."""
    if isinstance(e, Select):
        cond = _expr(e.cond, ctx)
        tv = _expr(e.true_value, _with_facts(ctx, e.cond))
        fv = _expr(e.false_value, ctx)
        if cond is e.cond and tv is e.true_value and fv is e.false_value:
            return e
        return dataclasses.replace(e, cond=cond, true_value=tv, false_value=fv)
    changes = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if isinstance(v, Expr):
            nv = _expr(v, ctx)
        elif isinstance(v, tuple) and any(isinstance(x, Expr) for x in v):
            nv = tuple(_expr(x, ctx) if isinstance(x, Expr) else x for x in v)
            nv = v if all(a is b for a, b in zip(nv, v)) else nv
        else:
            continue
        if nv is not v:
            changes[f.name] = nv
    out = dataclasses.replace(e, **changes) if changes else e
    guarded = _guard(out, ctx)
    return out if guarded is None else guarded


def _guard(n, ctx: _Ctx):
    """The guarded form of one node, or None: a global load selects its safe value outside
    the tensor, a global store / atomic runs only inside it."""
    if isinstance(n, Load) and _is_global(n.buffer):
        cond = _condition(n.buffer, n.indices, ctx)
        if cond is not None:
            return Select(cond, n, _safe_value(n), n.dtype)
    elif isinstance(n, (Store, AtomicAdd)) and _is_global(n.buffer):
        cond = _condition(n.buffer, n.indices, ctx)
        if cond is not None:
            return IfThenElse(cond, n, None, n.loc)
    return None


def _is_global(buf) -> bool:
    return isinstance(buf, Buffer) and buf.scope == "global"


def _safe_value(load: Load) -> Expr:
    """TileLang's default safe value, 0 of the load's dtype (`T.annotate_safe_value` accepts
    only 0: tilecore.language.compat_ops)."""
    return const(False if load.dtype.is_bool else 0, load.dtype)


def _condition(buf: Buffer, indices, ctx: _Ctx) -> Expr | None:
    """The conjunction of the per-dimension bounds of `buf[indices]` that are not provable, or
    None when every one is (or every index is a constant: left alone, as TileLang does)."""
    if all(isinstance(i, (Const, int)) for i in indices):
        return None
    conds = []
    for i, n in zip(indices, buf.shape):
        if not isinstance(i, Expr) or isinstance(i, Const):
            continue
        r = _bound(i, ctx, 0)
        if not ((r is not None and r[0] >= 0) or i.dtype.kind == "uint"):
            c = binop("ge", i, 0)
            if c not in ctx.facts:
                conds.append(c)
        if not (r is not None and isinstance(n, int) and r[1] < n):
            c = binop("lt", i, n)
            if c not in ctx.facts:
                conds.append(c)
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = binop("and", out, c)
    return out


def _bound(e, ctx: _Ctx, depth: int) -> tuple[int, int] | None:
    """[min, max] of an integer expression, or None when unknown: `static_checks.interval` for
    affine forms, else interval arithmetic through division and remainder by positive
    constants, min / max, casts and selects (the operations index arithmetic uses)."""
    if depth > 12:
        return None
    r = interval(e, ctx.ranges, ctx.lets)
    if r is not None:
        return r
    if isinstance(e, Var) and id(e) in ctx.lets:
        return _bound(ctx.lets[id(e)], ctx, depth + 1)
    if isinstance(e, Cast) and e.dtype.is_int and e.value.dtype.is_int:
        r = _bound(e.value, ctx, depth + 1)
        return r if r is not None and _fits(r, e.dtype) else None
    if isinstance(e, Select):
        a, b = _bound(e.true_value, ctx, depth + 1), _bound(e.false_value, ctx, depth + 1)
        return (min(a[0], b[0]), max(a[1], b[1])) if a is not None and b is not None else None
    if not (isinstance(e, BinOp) and e.dtype.is_int):
        return None
    a, b = _bound(e.a, ctx, depth + 1), _bound(e.b, ctx, depth + 1)
    if a is None or b is None:
        return None
    op = e.op
    if op == "add":
        r = (a[0] + b[0], a[1] + b[1])
    elif op == "sub":
        r = (a[0] - b[1], a[1] - b[0])
    elif op == "mul":
        p = [x * y for x in a for y in b]
        r = (min(p), max(p))
    elif op == "min":
        r = (min(a[0], b[0]), min(a[1], b[1]))
    elif op == "max":
        r = (max(a[0], b[0]), max(a[1], b[1]))
    elif op in ("div", "floordiv") and b[0] > 0 and a[0] >= 0:
        r = (a[0] // b[1], a[1] // b[0])  # truncation is flooring for these signs
    elif op in ("mod", "floormod") and b[0] > 0 and (a[0] >= 0 or op == "floormod"):
        r = (0, b[1] - 1) if a[0] < 0 or a[1] >= b[0] else a
    else:
        return None
    return r if _fits(r, e.dtype) else None


def _fits(r: tuple[int, int], dtype) -> bool:
    """Whether the range lies inside `dtype` (beyond it the operation wraps: bound unknown)."""
    return min_value(dtype) <= r[0] and r[1] <= max_value(dtype)
