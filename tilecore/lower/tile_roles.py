"""Warp-specialized *tile* programs: kernels whose only thread-level structure is roles.

A kernel written with `T.ws` regions (or `if` branches on the thread index that are constant
over each warpgroup, `if tx < 128:`), mbarriers and `T.tma_copy`, with tile operations inside
the roles and no other use of the thread index, has a tile-level meaning: each role (the
warpgroups running one program) executes its tile operations collectively, over its own
threads, concurrently with the other roles, and the roles synchronize only through mbarriers.
`interp` runs such kernels at the tile level (whole tiles, NumPy speed): `as_tile_roles`
rewrites the launch for it (the `thread-level` pass, tilecore.lower.thread_exec) and
`tilecore_interp.roles` executes the result.

- Without mbarrier waits the roles need no concurrency: the body runs in program order, each
  `T.ws` region for its warpgroups and each side of a branch on the thread index for the
  threads that take it (`BarrierArrive.arrivals` = their thread count).
- With waits, the top-level statements before the first role-dependent one run once, by every
  thread; the rest becomes `Roles`: one arm per distinct projection (the rest with each
  warpgroup's regions kept, the others' removed, thread-index branches decided), run as
  concurrent tasks. A tile operation, copy or arrive outside every role region in that rest
  would run once per arm: it is refused (it belongs in a region, or before the roles).

`None` means the kernel has per-thread values (the thread index used as a value): it is a
thread program (tilecore.lower.thread_level) and runs on the emulator.
"""

from __future__ import annotations

import numpy as np

from ..errors import TileShapeError
from ..ir.expr import Var
from ..ir.stmt import TILE_OPS, For, IfThenElse, KernelLaunch, LetStmt, SeqStmt, Stmt
from ..ir.thread_level import (
    WARPGROUP,
    BarrierArrive,
    BarrierInit,
    BarrierWait,
    Roles,
    ThreadIndex,
    TmaCopy,
    WarpRole,
)
from ..ir.visit import rewrite, walk
from .indexing import NotNumeric, evaluate


class _PerThread(Exception):
    """The kernel uses the thread index as a value (not a tile-role program)."""


def _threads(launch: KernelLaunch) -> int:
    n = 1
    for t in launch.threads:
        n *= t
    return n


def _tx_lets(body) -> dict:
    """id(var) -> value for every let whose value depends on the thread index."""
    out: dict[int, object] = {}
    changed = True
    while changed:
        changed = False
        for n in walk(body):
            if isinstance(n, LetStmt) and id(n.var) not in out and _uses_tx(n.value, out):
                out[id(n.var)] = n.value
                changed = True
    return out


def _uses_tx(e, lets: dict) -> bool:
    return any(isinstance(n, ThreadIndex) or (isinstance(n, Var) and id(n) in lets) for n in walk(e))


def _decide(cond, lets: dict, g: int):
    """The value of `cond` over warpgroup g's threads: True / False, or _PerThread if mixed."""
    v = _thread_values(cond, lets, WARPGROUP * (g + 1))[WARPGROUP * g:]
    if v.all():
        return True
    if not v.any():
        return False
    raise _PerThread()


def _project(body: Stmt, g: int, lets: dict) -> Stmt:
    """`body` as warpgroup g runs it (its regions kept, thread-index branches decided)."""
    def fn(n):
        if isinstance(n, WarpRole):
            return n.body if g in n.groups else SeqStmt((), n.loc)
        if isinstance(n, IfThenElse) and _uses_tx(n.cond, lets):
            if _decide(n.cond, lets, g):
                return n.then_body
            return n.else_body if n.else_body is not None else SeqStmt((), n.loc)
        if isinstance(n, LetStmt) and id(n.var) in lets:
            return SeqStmt((), n.loc)
        return None

    out = rewrite(body, fn)
    if any(_uses_tx(n, lets) for n in walk(out) if isinstance(n, (ThreadIndex, Var))):
        raise _PerThread()
    return out


def _thread_values(cond, lets: dict, total: int) -> np.ndarray:
    """`cond` for every thread of the block (a bool per thread), or _PerThread."""
    tx = Var("tx")

    def sub(n):
        if isinstance(n, ThreadIndex):
            return tx if n.dim == 0 else None
        if isinstance(n, Var) and id(n) in lets:
            return rewrite(lets[id(n)], sub)
        return None

    try:
        v = evaluate(rewrite(cond, sub), {id(tx): np.arange(total)})
    except NotNumeric:
        raise _PerThread() from None
    return np.broadcast_to(np.asarray(v, dtype=bool), (total,))


def _inline(s: Stmt, mask: np.ndarray, lets: dict) -> Stmt:
    """`s` run in program order by the threads in `mask`: a `T.ws` region or a branch on the
    thread index becomes its body for the threads that take it (both sides of a branch, then
    before else, when both are taken), each arrive counted for its threads."""
    if isinstance(s, SeqStmt):
        return SeqStmt(tuple(_inline(x, mask, lets) for x in s.stmts), s.loc)
    if isinstance(s, WarpRole):
        groups = np.zeros_like(mask)
        for g in s.groups:
            groups[WARPGROUP * g:WARPGROUP * (g + 1)] = True
        m = mask & groups
        return _inline(s.body, m, lets) if m.any() else SeqStmt((), s.loc)
    if isinstance(s, IfThenElse) and _uses_tx(s.cond, lets):
        c = _thread_values(s.cond, lets, len(mask))
        sides = [(mask & c, s.then_body), (mask & ~c, s.else_body)]
        out = tuple(_inline(b, m, lets) for m, b in sides if b is not None and m.any())
        return SeqStmt(out, s.loc)
    if isinstance(s, IfThenElse):
        els = None if s.else_body is None else _inline(s.else_body, mask, lets)
        return IfThenElse(s.cond, _inline(s.then_body, mask, lets), els, s.loc)
    if isinstance(s, For) and s.kind != "parallel":
        return For(s.var, s.start, s.stop, s.step, s.kind, _inline(s.body, mask, lets), s.annotations, s.loc)
    if isinstance(s, LetStmt) and id(s.var) in lets:
        return SeqStmt((), s.loc)
    if isinstance(s, BarrierArrive) and s.arrivals == 0:
        return BarrierArrive(s.bar, s.index, s.loc, int(mask.sum()))
    return s


def _with_arrivals(body: Stmt, threads: int) -> Stmt:
    """Every arrive of `body` counted for `threads` threads (the innermost region's)."""
    def fn(n):
        if isinstance(n, WarpRole):
            return WarpRole(n.groups, _with_arrivals(n.body, WARPGROUP * len(n.groups)), n.loc)
        return None

    def arr(n):
        if isinstance(n, BarrierArrive) and n.arrivals == 0:
            return BarrierArrive(n.bar, n.index, n.loc, threads)
        return None

    return rewrite(rewrite(body, fn), arr)


def _collective_outside_roles(body: Stmt, lets: dict) -> Stmt | None:
    """The first tile operation / copy / arrive of `body` outside every role region (a `T.ws`
    region or a branch on the thread index)."""
    if isinstance(body, WarpRole) or (isinstance(body, IfThenElse) and _uses_tx(body.cond, lets)):
        return None
    collective = (*TILE_OPS, TmaCopy, BarrierArrive)
    if isinstance(body, collective) or (isinstance(body, For) and body.kind == "parallel"):
        return body
    for f in ("stmts", "body", "then_body", "else_body"):
        c = getattr(body, f, None)
        for x in (c if isinstance(c, tuple) else (c,)):
            if isinstance(x, Stmt):
                hit = _collective_outside_roles(x, lets)
                if hit is not None:
                    return hit
    return None


def as_tile_roles(launch: KernelLaunch) -> KernelLaunch | None:
    """`launch` rewritten for tile-level execution of its roles (module docstring), or None when
    it is a thread program."""
    lets = _tx_lets(launch.body)
    total = _threads(launch)
    if not any(isinstance(n, (WarpRole, ThreadIndex)) for n in walk(launch.body)):
        return None
    waits = any(isinstance(n, BarrierWait) for n in walk(launch.body))
    stmts = list(launch.body.stmts if isinstance(launch.body, SeqStmt) else (launch.body,))
    if not waits:
        try:
            body = _inline(launch.body, np.ones(total, dtype=bool), lets)
            if any(_uses_tx(n, lets) for n in walk(body) if isinstance(n, (ThreadIndex, Var))):
                raise _PerThread()
        except _PerThread:
            return None
        return _relaunch(launch, body)
    if total % WARPGROUP:
        return None

    def dependent(s):
        return any(isinstance(n, WarpRole) or (isinstance(n, IfThenElse) and _uses_tx(n.cond, lets))
                   for n in walk(s))

    k = next((i for i, s in enumerate(stmts) if dependent(s)), len(stmts))
    prefix = [s for s in stmts[:k] if not (isinstance(s, LetStmt) and id(s.var) in lets)]
    rest = SeqStmt(tuple(s for s in stmts[k:] if not isinstance(s, BarrierInit)), launch.body.loc)
    inits = [s for s in stmts[k:] if isinstance(s, BarrierInit)]
    try:
        if any(_uses_tx(n, lets) for x in prefix for n in walk(x) if isinstance(n, (ThreadIndex, Var))):
            raise _PerThread()
        arms: list[tuple[list, Stmt]] = []
        for g in range(total // WARPGROUP):
            proj = _project(rest, g, lets)
            for groups, b in arms:
                if b == proj:
                    groups.append(g)
                    break
            else:
                arms.append(([g], proj))
    except _PerThread:
        return None
    if len(arms) > 1:
        hit = _collective_outside_roles(rest, lets)
        if hit is not None:
            raise TileShapeError(
                f"{type(hit).__name__} outside the kernel's roles would run once per role: in a "
                "warp-specialized kernel with mbarrier waits, the statements after the first role "
                "region are run by each role on its own", hit.loc,
                hint="move it into a T.ws region (or an `if` on the thread index), or before the roles")
    pre = _with_arrivals(SeqStmt(tuple(prefix), launch.body.loc), total)
    roles = Roles(tuple((WARPGROUP * len(gs), tuple(gs), _with_arrivals(b, WARPGROUP * len(gs)))
                        for gs, b in arms), launch.loc)
    return _relaunch(launch, SeqStmt(tuple(inits) + (pre, roles), launch.body.loc))


def _relaunch(launch: KernelLaunch, body: Stmt) -> KernelLaunch:
    return KernelLaunch(launch.grid, launch.block_vars, launch.threads, launch.allocs, body,
                        launch.annotations, launch.loc)


def branches_as_regions(launch: KernelLaunch) -> KernelLaunch:
    """`launch` with every branch on the thread index that is constant over each warpgroup and
    holds tile operations (`if tx < 128: ... else: ...`) written as the `T.ws` regions it means
    (one per side, for the warpgroups taking it), so the thread lowering runs the sides' tile
    operations over their own threads. Branches inside regions or other such branches stay."""
    lets = _tx_lets(launch.body)
    total = _threads(launch)
    if total % WARPGROUP or not any(isinstance(n, ThreadIndex) for n in walk(launch.body)):
        return launch

    def collective(b) -> bool:
        return b is not None and any(isinstance(n, (*TILE_OPS, TmaCopy)) or
                                     (isinstance(n, For) and n.kind == "parallel") for n in walk(b))

    def visit(st: Stmt, allowed: tuple) -> Stmt:
        if isinstance(st, SeqStmt):
            return SeqStmt(tuple(visit(x, allowed) for x in st.stmts), st.loc)
        if isinstance(st, For) and st.kind != "parallel":
            return For(st.var, st.start, st.stop, st.step, st.kind, visit(st.body, allowed),
                       st.annotations, st.loc)
        if isinstance(st, IfThenElse) and _uses_tx(st.cond, lets) and (
                collective(st.then_body) or collective(st.else_body)):
            try:
                taken = {g: _decide(st.cond, lets, g) for g in allowed}
            except _PerThread:
                return st
            yes = tuple(g for g in allowed if taken[g])
            no = tuple(g for g in allowed if not taken[g])
            out = []
            if yes:
                out.append(WarpRole(yes, st.then_body, st.loc))
            els = st.else_body
            if no and isinstance(els, IfThenElse) and _uses_tx(els.cond, lets):
                out.append(visit(els, no))  # an elif chain: each arm for its warpgroups
            elif no and els is not None:
                out.append(WarpRole(no, els, st.loc))
            return SeqStmt(tuple(out), st.loc)
        return st

    return _relaunch(launch, visit(launch.body, tuple(range(total // WARPGROUP))))
