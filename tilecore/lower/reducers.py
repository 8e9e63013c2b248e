"""`reducer-partials`: TileLang's reducers (`T.alloc_reducer`) on the thread-lowered targets.

A reducer update `r[i] += v` inside `for i, j in T.Parallel(M, N)` is a write-write race once
the iterations are spread over threads. This tile-level pass, run before layout inference,
gives every update site a *partial* fragment shaped like its `T.Parallel` nest (`(M, N)`): the
update becomes the race-free element update `P[i, j] = op(P[i, j], v)` (each iteration owns its
element; repeated runs of the nest, e.g. the iterations of a `T.Pipelined` loop around it,
accumulate there), the partial starts at `op`'s identity (just before the kernel's top-level
statement holding the nest: a `T.sync_grid` phase keeps no block state), and
`T.finalize_reducer(r)` becomes the reductions of each partial along the dimensions the
reducer's index does not name
(`T.reduce_<op>(P, r, dim=1, clear=False)`: `r = op(r, op_j P[:, j])`) and the partial's
refill with the identity (for the reducer's next round). The values are the logical reduction
of `tilecore.ir.reducers` (`init op c_1 op c_2 ...`, float sums in another order), and the
lowering of `T.Parallel`, `T.reduce_*` and `T.fill` does the rest, on every thread-lowered
target (cuda, hip, metal, and `emu` running them). This is TileLang's `replication="all"`
(per-thread replicas combined at the finalize); `replication=` changes nothing here.

An update whose reducer index is not the nest's loop variables themselves (`r[i % 4]`,
`r[i + 1]`), names a loop that does not start at 0 or whose extent differs from the reducer's
dimension, or names them out of order (`r[j, i]` over `(i, j)`) is a located TileTargetError
whose hint is the explicit form of this rewrite.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .. import dtypes as dt
from ..errors import TileTargetError
from ..ir.buffer import Buffer, Region
from ..ir.expr import Load, Var, as_expr, binop, cast, const_int
from ..ir.module import Module
from ..ir.reducers import BINOP, FinalizeReducer, ReducerUpdate
from ..ir.stmt import Fill, For, KernelLaunch, Reduce, SeqStmt, Stmt, Store
from ..ir.visit import rewrite, walk
from ..target import TargetDesc

_HINT = ("index the reducer with the T.Parallel loop variables themselves, in loop order (loops "
         "starting at 0 and as long as the reducer's dimensions), or accumulate explicitly: store "
         "each iteration's value into a fragment shaped like the loop, then T.reduce_sum / "
         "T.reduce_max it into the result")


@dataclass
class _Partial:
    """One partial fragment: a reducer's updates in one T.Parallel nest with one index form."""

    reducer: Buffer
    buffer: Buffer
    loops: tuple  # the nest's T.Parallel loops (For nodes), outermost first
    kept: tuple  # the nest position each reducer dimension names, in reducer order
    updates: list = field(default_factory=list)


def _identity(op: str, d):
    """The value `op` leaves unchanged (the partials' initial value)."""
    if op == "sum":
        return cast(as_expr(0), d)
    if d.is_float and dt.has_infinity(d):
        return cast(float("-inf") if op == "max" else float("inf"), d)
    return cast(as_expr(dt.min_value(d) if op == "max" else dt.max_value(d)), d)


def _children(s) -> list:
    """The statements directly inside `s` (any structured statement's Stmt fields)."""
    out = []
    for f in dataclasses.fields(s):
        v = getattr(s, f.name)
        if isinstance(v, Stmt):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, Stmt))
    return out


def _sites(s, nest: tuple, out: list) -> None:
    """Append (update, enclosing parallel loops outermost first) for every update under `s`."""
    if isinstance(s, ReducerUpdate):
        out.append((s, nest))
        return
    if isinstance(s, For) and s.kind == "parallel":
        nest = nest + (s,)
    for c in _children(s):
        _sites(c, nest, out)


def _kept(u: ReducerUpdate, nest: tuple) -> tuple:
    """The nest position of each reducer index, or a located TileTargetError (module doc)."""
    r = u.buffer
    pos = {id(f.var): k for k, f in enumerate(nest)}
    kept = []
    for d, (ix, n) in enumerate(zip(u.indices, r.shape)):
        k = pos.get(id(ix)) if isinstance(ix, Var) else None
        if k is None or k in kept or (kept and k < kept[-1]):
            what = "is not one of the T.Parallel loop variables" if k is None else (
                "repeats a loop variable" if k in kept else "names the loops out of order")
            raise TileTargetError(f"reducer {r.name}: index {d} of its update {what}; the "
                                  "thread-lowered targets combine per-iteration partials only "
                                  "along the loops the index does not name", u.loc, hint=_HINT)
        f = nest[k]
        if const_int(f.start) != 0 or const_int(f.stop) != n:
            raise TileTargetError(f"reducer {r.name}: dimension {d} ({n}) is indexed by a loop over "
                                  f"[{f.start}, {f.stop}), not over the whole dimension from 0",
                                  u.loc, hint=_HINT)
        kept.append(k)
    return tuple(kept)


def _plan(launch: KernelLaunch) -> list[_Partial]:
    """The partials of `launch`'s reducer updates (one per reducer, nest and index form)."""
    sites: list = []
    _sites(launch.body, (), sites)
    names = {b.name for b in launch.allocs}
    partials: dict = {}
    for u, nest in sites:
        if not nest:
            raise TileTargetError(f"reducer {u.buffer.name} is updated outside T.Parallel", u.loc,
                                  hint="update a reducer from the iterations of a T.Parallel loop")
        kept = _kept(u, nest)
        key = (id(u.buffer), id(nest[0]), kept)
        p = partials.get(key)
        if p is None:
            shape = []
            for f in nest:  # T.Parallel extents are constants; the starts may not be
                if const_int(f.start) is None or const_int(f.stop) is None:
                    raise TileTargetError(f"reducer {u.buffer.name} is updated in a T.Parallel "
                                          "loop with a bound known only at run time", u.loc,
                                          hint=_HINT)
                shape.append(const_int(f.stop) - const_int(f.start))
            name = _fresh(f"{u.buffer.name}_partial", names)
            buf = Buffer(name, tuple(shape), u.buffer.dtype, "fragment")
            p = partials[key] = _Partial(u.buffer, buf, nest, kept)
        p.updates.append(u)
    return list(partials.values())


def _fresh(base: str, names: set) -> str:
    name, k = base, 1
    while name in names:
        name, k = f"{base}_{k}", k + 1
    names.add(name)
    return name


def _update(p: _Partial, u: ReducerUpdate) -> Stmt:
    """The partial's element update replacing `u`."""
    idx = tuple(binop("sub", f.var, f.start) if const_int(f.start) else f.var for f in p.loops)
    combined = binop(BINOP[u.op], Load(p.buffer, idx), u.value)
    return Store(p.buffer, idx, cast(combined, p.buffer.dtype), u.loc)


def _combine(p: _Partial, op: str, loc, names: set, extra: list) -> list[Stmt]:
    """The reductions of `p` into its reducer along the dimensions the index does not name,
    then the partial's refill with the identity; new scratch fragments go to `extra`."""
    r = p.reducer
    dims = list(range(len(p.loops)))  # nest positions of the current source's dimensions
    src = p.buffer
    out: list[Stmt] = []
    drop = [k for k in dims if k not in p.kept]
    for n, k in enumerate(reversed(drop)):
        last = n == len(drop) - 1
        axis = dims.index(k)
        dims.remove(k)
        if last:
            dst = r
        else:
            shape = tuple(s for j, s in enumerate(src.shape) if j != axis)
            dst = Buffer(_fresh(f"{r.name}_partial_red", names), shape, r.dtype, "fragment")
            extra.append(dst)
        out.append(Reduce(src, dst, op, axis, clear=not last, loc=loc))
        src = dst
    if not drop:  # every iteration owns a reducer element: combine element-wise
        out.append(_elementwise(p, op, loc))
    out.append(Fill(Region.full(p.buffer), _identity(op, r.dtype), loc))
    return out


def _elementwise(p: _Partial, op: str, loc) -> Stmt:
    """`r[...] = op(r[...], P[...])` over the reducer (the partial has the reducer's shape)."""
    r = p.reducer
    loops = [Var(f"{r.name}_c{d}", dt.int32) for d in range(len(r.shape))]
    body: Stmt = Store(r, tuple(loops), cast(binop(BINOP[op], Load(r, tuple(loops)),
                                                   Load(p.buffer, tuple(loops))), r.dtype), loc)
    for v, n in reversed(list(zip(loops, r.shape))):
        body = For(v, as_expr(0), as_expr(n), 1, "parallel", body, loc=loc)
    return body


def _lower_launch(launch: KernelLaunch) -> KernelLaunch:
    """`launch` with its reducer updates and finalizes rewritten (module docstring)."""
    partials = _plan(launch)
    if not partials:
        return launch
    names = {b.name for b in launch.allocs} | {p.buffer.name for p in partials}
    by_update = {id(u): p for p in partials for u in p.updates}
    extra: list = []

    def fn(n):
        if isinstance(n, ReducerUpdate):
            return _update(by_update[id(n)], n)
        if isinstance(n, FinalizeReducer):
            stmts = []
            for p in partials:
                if p.reducer is n.buffer:
                    stmts.extend(_combine(p, n.op, n.loc, names, extra))
            return SeqStmt(tuple(stmts), n.loc) if stmts else SeqStmt((), n.loc)
        return None

    # each partial starts at the identity just before the top-level statement holding its nest
    # (not at the kernel's start: a T.sync_grid phase keeps no block state from the one before)
    top = _top_level(launch.body)
    inits: dict[int, list] = {}
    for p in partials:
        k = next(i for i, s in enumerate(top) if any(n is p.loops[0] for n in walk(s)))
        inits.setdefault(k, []).append(Fill(Region.full(p.buffer),
                                            _identity(p.updates[0].op, p.reducer.dtype), launch.loc))
    stmts = []
    for i, s in enumerate(top):
        stmts.extend(inits.get(i, ()))
        stmts.append(rewrite(s, fn))
    allocs = tuple(launch.allocs) + tuple(p.buffer for p in partials) + tuple(extra)
    body = SeqStmt(tuple(stmts), getattr(launch.body, "loc", None))
    return dataclasses.replace(launch, allocs=allocs, body=body)


def _top_level(body) -> list:
    """The kernel body's top-level statements (nested sequences flattened)."""
    if isinstance(body, SeqStmt):
        return [x for s in body.stmts for x in _top_level(s)]
    return [body]


def reducer_partials(module: Module, desc: TargetDesc) -> Module:
    """Invariant: no ReducerUpdate or FinalizeReducer remains; each reducer's updates accumulate
    into partial fragments shaped like their T.Parallel nests, reduced into the reducer at its
    T.finalize_reducer (tilecore.lower.reducers). Unsupported index forms raise a located
    TileTargetError."""
    if not any(isinstance(n, ReducerUpdate) for n in walk(module.func.body)):
        return module

    def fn(n):
        return _lower_launch(n) if isinstance(n, KernelLaunch) else None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn,
                                                          stop=(KernelLaunch,))))
