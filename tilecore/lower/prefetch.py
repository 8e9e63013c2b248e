"""Register prefetch for T.Pipelined loops: the next iteration's global loads overlap this one's math.

A pipelined loop (num_stages >= 2) whose body starts with vector copies from global into shared
memory is rewritten so that each copy goes through registers: the loads of iteration k + 1 are
issued right after iteration k has stored its tile to shared memory, before its computation,
and the loads of the first iteration move in front of the loop. Values are unchanged: the
global tensors read are not written inside the loop and the predicates are evaluated for the
same iteration as before. Loops that `async-pipeline` turned into multi-stage asynchronous-copy
pipelines (annotation `async_stages`) are left alone; this is the path for targets without
asynchronous copies and for loops whose copies do not qualify (see tilecore.lower.async_pipeline).
"""

from __future__ import annotations

from ..ir.buffer import Buffer
from ..ir.expr import Const, Var, binop, const
from ..ir.names import fresh_name
from ..ir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt
from ..ir.thread import Atomic, MemStore, ThreadKernel, VecMove
from ..ir.visit import rewrite, substitute, walk
from .indexing import free_vars, simplify


def flat_stmts(s: Stmt) -> list:
    """The statements of `s` with nested sequences flattened, in order."""
    if isinstance(s, SeqStmt):
        out = []
        for x in s.stmts:
            out.extend(flat_stmts(x))
        return out
    return [s]


def _move_of(s: Stmt, var: Var):
    """(guard or None, VecMove) when `s` is a global-to-shared vector copy (maybe under a guard
    that does not depend on the loop variable)."""
    guard = None
    if isinstance(s, IfThenElse) and s.else_body is None and not any(v is var for v in free_vars(s.cond)):
        guard, inner = s.cond, flat_stmts(s.then_body)
        if len(inner) != 1:
            return None
        s = inner[0]
    if isinstance(s, VecMove) and s.src.scope == "global" and s.dst.scope == "shared":
        return guard, s
    return None


def written_globals(body: Stmt) -> set:
    """ids of the global buffers `body` writes (stores, atomics, vector moves)."""
    out = set()
    for n in walk(body):
        if isinstance(n, (MemStore, Atomic)) and n.buffer.scope == "global":
            out.add(id(n.buffer))
        elif isinstance(n, VecMove) and n.dst.scope == "global":
            out.add(id(n.dst))
    return out


def _prefetch_loop(loop: For, new_regs: list, names: set, bounds: dict) -> Stmt | None:
    body = flat_stmts(loop.body)
    lead = []
    for s in body:
        m = _move_of(s, loop.var)
        if m is None:
            break
        lead.append(m)
    if not lead:
        return None
    written = written_globals(loop.body)
    inner_vars = {id(n.var) for n in walk(loop.body) if isinstance(n, (LetStmt, For))}
    for guard, mv in lead:
        if id(mv.src) in written:
            return None
        for e in (mv.src_offset, mv.dst_offset, mv.pred, guard):
            if e is not None and any(id(v) in inner_vars for v in free_vars(e)):
                return None
    loads, stores = [], []
    for guard, mv in lead:
        tmp = Buffer(fresh_name(f"{mv.src.name}_next", names), (mv.lanes,), mv.src.dtype, "local")
        new_regs.append(tmp)
        ld: Stmt = VecMove(tmp, const(0), mv.src, mv.src_offset, mv.lanes, mv.pred, mv.zero_fill, mv.loc,
                           mv.cache_hint)
        st: Stmt = VecMove(mv.dst, mv.dst_offset, tmp, const(0), mv.lanes,
                           None if mv.zero_fill else mv.pred, False, mv.loc)
        if guard is not None:
            ld, st = IfThenElse(guard, ld, None, mv.loc), IfThenElse(guard, st, None, mv.loc)
        loads.append(ld)
        stores.append(st)
    first = simplify(substitute(SeqStmt(tuple(loads), loop.loc), {loop.var: loop.start}), bounds)
    following = simplify(substitute(SeqStmt(tuple(loads), loop.loc), {loop.var: loop.var + loop.step}),
                         bounds)
    new_body = SeqStmt(tuple(stores) + (IfThenElse(next_iteration_exists(loop), following, None, loop.loc),)
                       + tuple(body[len(lead):]), loop.loc)
    new_loop = For(loop.var, loop.start, loop.stop, loop.step, loop.kind, new_body, loop.annotations,
                   loop.loc)
    return SeqStmt((if_any_iteration(loop, first, bounds), new_loop), loop.loc)


def next_iteration_exists(loop: For):
    """The condition, inside `loop`'s body, that another iteration follows this one."""
    nxt = loop.var + loop.step
    return binop("lt", nxt, loop.stop) if loop.step > 0 else binop("gt", nxt, loop.stop)


def if_any_iteration(loop: For, stmt: Stmt, bounds: dict) -> Stmt:
    """`stmt` (work of `loop`'s first iteration hoisted in front of it), guarded by the loop
    running at all unless that is provable."""
    has_iter = simplify(binop("lt", loop.start, loop.stop) if loop.step > 0 else
                        binop("gt", loop.start, loop.stop), bounds)
    if isinstance(has_iter, Const) and has_iter.value is True:
        return stmt
    return IfThenElse(has_iter, stmt, None, loop.loc)


def rewrite_loops(kernel: ThreadKernel, transform, wants=None) -> ThreadKernel:
    """`kernel` with `transform(loop, new_regs, names, bounds)` applied to each For loop (None
    keeps it): `new_regs` collects the register buffers the rewrites add (kept unique by
    `names`), `bounds` holds the block and thread index ranges for simplification. `wants(loop)`
    says whether `transform` may act on a loop at all: with no such loop the kernel is returned
    before the (whole-kernel) rewrite."""
    if wants is not None and not any(isinstance(n, For) and wants(n) for n in walk(kernel.body)):
        return kernel
    new_regs: list = []
    names = {b.name for b in kernel.registers} | {b.name for b in kernel.shared}
    bounds = {id(v): (0, None) for v in kernel.block_vars}
    bounds[id(kernel.thread_var)] = (0, kernel.num_threads - 1)

    def fn(n):
        return transform(n, new_regs, names, bounds) if isinstance(n, For) else None

    body = rewrite(kernel.body, fn)
    if not new_regs:
        return kernel
    return ThreadKernel(kernel.grid, kernel.block_vars, kernel.thread_var, kernel.num_threads,
                        kernel.warp_size, kernel.shared, kernel.registers + tuple(new_regs), body,
                        kernel.loc)


def prefetch(kernel: ThreadKernel) -> ThreadKernel:
    """`kernel` with register prefetch in its pipelined loops."""

    def wants(loop: For) -> bool:
        # loops async-pipeline already staged keep their asynchronous copies
        return (loop.annotation("num_stages", 0) or 0) >= 2 and not loop.annotation("async_stages")

    def transform(loop: For, new_regs: list, names: set, bounds: dict):
        return _prefetch_loop(loop, new_regs, names, bounds) if wants(loop) else None

    return rewrite_loops(kernel, transform, wants)
