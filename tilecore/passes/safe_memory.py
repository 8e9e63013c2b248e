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

A condition is added only for the bounds the pass cannot prove: `tilecore.ir.ranges` (the
oracle's interval arithmetic: block indices of a constant grid, loop variables of constant
range, let-bound values, `//` and `%` by positive constants) against a constant extent, with
a variable's range narrowed by an enclosing `if var < c:`, and a bound an enclosing `if`, a
`T.if_then_else` or the guarded store itself states as written. (`tilecore.ir.static_checks`
already rejects an affine access it proves to leave a constant-shape buffer.)
Tile operations (`T.copy`, `T.atomic_add` of a tile, ...) are predicated at tensor edges by
their own lowering and are not touched. With `tl.disable_safe_memory_legalize` the pass does
nothing: such an access is undefined, and `interp`, `cpu` and `emu` report it as a located
TileRuntimeError.
"""

from __future__ import annotations

import dataclasses

from ..dtypes import DType
from ..ir import ranges
from ..ir.buffer import Buffer, Region
from ..ir.expr import BinOp, Const, Expr, Load, Select, Var, binop, const, const_int
from ..ir.module import Module
from ..ir.stmt import AtomicAdd, For, IfThenElse, KernelLaunch, LetStmt, SeqStmt, Store
from ..ir.visit import rewrite, walk
from ..target import TargetDesc
from .base import tile_pass


@tile_pass("safe-memory", when=lambda desc: not desc.options.disable_safe_memory)
def safe_memory(module: Module, desc: TargetDesc) -> Module:
    """Invariant: every element load of a global buffer is inside the buffer or selects its safe
    value instead, and every element store / atomic to one is inside it or not executed."""
    func = module.func
    body = _stmt(func.body, _Ctx(_ranges(func.body), {}, frozenset()))
    if body is func.body:
        return module
    return module.with_func(dataclasses.replace(func, body=body))


@dataclasses.dataclass(frozen=True)
class _Ctx:
    ranges: dict  # id(Var) -> (lo, hi): block and loop indices, let values (tilecore.ir.ranges)
    memo: dict  # tilecore.ir.ranges' answers under `ranges`
    facts: frozenset  # conditions enclosing `if`s state (their `and`-conjuncts), as written


def _ranges(body) -> dict:
    """Ranges of block indices of a constant grid, loop variables of constant bounds and
    let-bound values (pre-order: a let's loops are bound before it). IR variables are distinct
    objects per binding, so one map serves the whole kernel."""
    rmap: dict = {}
    memo: dict = {}
    for n in walk(body):
        if isinstance(n, KernelLaunch):
            for v, g in zip(n.block_vars, n.grid):
                k = const_int(g)
                if k is not None and k >= 1:
                    ranges.bind(rmap, memo, v, (0, k - 1))
            # thread indices (`T.get_thread_binding`) of constant block shapes: a thread-level
            # kernel's `B[tx]` then needs no guard (a guard would put its warp shuffles, which
            # every lane must execute, inside a thread-varying branch)
            for d, t in enumerate(n.threads):
                k = const_int(t)
                if k is not None and k >= 1:
                    ranges.bind(rmap, memo, ranges.thread_key(d), (0, k - 1))
        elif isinstance(n, For):
            lo, hi = const_int(n.start), const_int(n.stop)
            if lo is not None and hi is not None and n.step == 1 and hi > lo:
                ranges.bind(rmap, memo, n.var, (lo, hi - 1))
        elif isinstance(n, LetStmt) and n.value.dtype.is_int:
            ranges.bind(rmap, memo, n.var, ranges.interval(n.value, rmap, memo))
    return rmap


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
    rmap, memo = ctx.ranges, ctx.memo
    for c in parts:
        r = _narrowed(c, rmap)
        if r is not None:
            rmap, memo = {**rmap, id(r[0]): r[1]}, {}
    return dataclasses.replace(ctx, ranges=rmap, memo=memo, facts=ctx.facts | set(parts))


_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _narrowed(c, rmap: dict):
    """(var, (lo, hi)) for a conjunct `var op constant` (either side) on a ranged variable."""
    if not (isinstance(c, BinOp) and c.op in _FLIP):
        return None
    op, v, k = c.op, c.a, const_int(c.b)
    if not isinstance(v, Var):
        op, v, k = _FLIP[c.op], c.b, const_int(c.a)
    if not isinstance(v, Var) or k is None or id(v) not in rmap:
        return None
    lo, hi = rmap[id(v)]
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
        r = ranges.interval(i, ctx.ranges, ctx.memo) if i.dtype.is_int else None
        if not (r is not None and r[0] >= 0):
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
