"""Element-level rewriting: tile statements and expressions to thread-level memory accesses.

A `BodyLowerer` works in one of two modes. *Per-thread* mode lowers one iteration of a
partitioned `T.Parallel` loop (loop variables replaced by the thread's coordinates): a fragment
element is read from the register that holds it, which is found by tabulating the index for
every thread (`Layout.find_reg`). *Uniform* mode lowers block-level code that every thread runs
redundantly: stores to global/shared memory are done by thread 0 only, fragment elements are
written by their owners and read back through a shared staging copy.
"""

from __future__ import annotations

import numpy as np

from ..errors import TileError, TileShapeError
from ..ir.buffer import Buffer
from ..ir.debug import DEBUG_STMTS
from ..ir.expr import Const, Expr, Load, Var, binop, cast, const
from ..ir.loops import While
from ..ir.stmt import AtomicAdd, For, IfThenElse, LetStmt, SeqStmt, Stmt, Store
from ..ir.thread import Atomic, LaneTable, MemLoad, MemStore
from ..ir.visit import rewrite
from .context import LowerCtx, all_of, flat_offset
from .indexing import NotNumeric, evaluate
from .inner_loops import row_register


def stage_fragment(ctx: LowerCtx, buf: Buffer, loc) -> tuple[Buffer, list[Stmt]]:
    """A shared copy of fragment `buf` (row-major) and the stores that fill it; each element
    is written once, by the first thread holding it."""
    lay = ctx.layout(buf)
    scratch = ctx.scratch_shared(("stage", id(buf)), f"{buf.name}_staged", buf.numel, buf.dtype)
    regs = ctx.regs(buf)
    _, valid_t = lay.table
    writer = lay.writers
    out: list[Stmt] = []
    for r in range(lay.nregs):
        col = writer[:, r]
        if not col.any():
            continue
        if col.all():
            pred = None
        elif np.array_equal(col, valid_t[:, r]):
            pred = lay.valid(ctx.tx, r)
        else:
            pred = binop("ne", LaneTable(tuple(int(x) for x in col), ctx.tx), 0)
        off = flat_offset(buf, lay.coords(ctx.tx, r), ctx.bounds, ctx.wide(buf))
        out.append(MemStore(scratch, off, MemLoad(regs, const(r)), pred, loc))
    return scratch, out


def writer_pred(ctx: LowerCtx, lay, r: int, valid_known: bool = False) -> Expr | None:
    """The condition that thread `tx` is register `r`'s designated writer (`Layout.writers`):
    None when every thread is, or (`valid_known`: the caller already guards with the
    register's validity) when every valid holder is."""
    col = lay.writers[:, r]
    valid = lay.table[1][:, r]
    if col.all() or (valid_known and np.array_equal(col, valid)):
        return None
    if np.array_equal(col, valid):
        return lay.valid(ctx.tx, r)
    if col[0] and not col[1:].any():
        return binop("eq", ctx.tx, 0)  # a fully replicated register: thread 0 writes
    return binop("ne", LaneTable(tuple(int(x) for x in col), ctx.tx), 0)


class BodyLowerer:
    """Rewrites element statements/expressions; collects staging stores to run first (`pre`)."""

    def __init__(self, ctx: LowerCtx, per_thread: bool, loc, active: np.ndarray | None = None,
                 subst: dict | None = None, staged: dict | None = None):
        self.ctx = ctx
        self.per_thread = per_thread
        self.loc = loc
        self.active = active
        self.subst: dict[int, Expr] = dict(subst or {})
        self.staged: dict[int, Buffer] = staged if staged is not None else {}
        self.pre: list[Stmt] = []
        # fragment -> (tile-level indices, register): the element this iteration owns
        self.owned: dict[int, tuple] = {}
        # fragment -> (loop dims, loop coordinates, iteration register): the rows this iteration
        # holds whole, written through inner loops (`tilecore.lower.inner_loops.bind_rows`)
        self.rows: dict[int, tuple] = {}
        self.partition_origin = ""  # what decided the loop's distribution (for conflict errors)
        # per-thread mode: the condition under which this iteration writes memory (one replica
        # of a replicated layout, `writer_pred`); None: every thread running it writes
        self.writer: Expr | None = None

    def _memory_guard(self) -> Expr | None:
        """Who performs a global/shared store or atomic: the iteration's writer in per-thread
        mode, thread 0 in uniform code (every thread runs it), anyone at thread level."""
        if self.per_thread:
            return self.writer
        return None if self.ctx.thread_level else binop("eq", self.ctx.tx, 0)

    def _owned_reg(self, buf: Buffer, indices) -> int | None:
        own = self.owned.get(id(buf))
        if own is not None and len(own[0]) == len(indices) and all(
                a is b or a == b for a, b in zip(own[0], indices)):
            return own[1]
        return None

    # ----------------------------------------------------------------- expressions
    def expr(self, e: Expr) -> Expr:
        """`e` with loop variables substituted and element loads turned into memory accesses."""
        def fn(n):
            if isinstance(n, Var):
                return self.subst.get(id(n))
            if isinstance(n, Load):
                return self.load(n.buffer, n.indices, self._raw_for(n))
            return None

        return self.ctx.simp(rewrite(e, fn))

    def _raw_for(self, n: Load):
        """The pre-substitution indices of an owned fragment's load (ownership is structural)."""
        own = self.owned.get(id(n.buffer))
        if own is None:
            return None
        sub = tuple(self.expr(i) for i in own[0])
        return own[0] if all(a == b for a, b in zip(sub, n.indices)) else None

    def numeric(self, indices) -> np.ndarray | None:
        """The indices for every thread as an int array (T, rank), or None if not computable."""
        env = {id(self.ctx.tx): np.arange(self.ctx.threads, dtype=np.int64)}
        cols = []
        try:
            for i in indices:
                cols.append(np.broadcast_to(np.asarray(evaluate(i, env), dtype=np.int64),
                                            (self.ctx.threads,)))
        except NotNumeric:
            return None
        return np.stack(cols, axis=-1)

    def find_reg(self, buf: Buffer, indices) -> int | None:
        """The register of `buf` that holds element `indices` in every active thread."""
        # the loops over one fragment ask the same questions (flash attention: 502 lookups, 106
        # distinct); the answer depends on the buffer, the indices and the active threads only
        a = self.active
        key = (id(buf), tuple(indices), None if a is None else a.tobytes())
        memo = self.ctx.find_reg_memo
        if key in memo:
            return memo[key][1]
        want = self.numeric(indices)
        r = None if want is None else self.ctx.layout(buf).find_reg(want, a)
        memo[key] = (buf, r)  # the buffer kept alive with its id
        return r

    def stage(self, buf: Buffer) -> Buffer:
        """The shared staging copy of fragment `buf` (its stores are queued in `pre` once)."""
        scratch = self.staged.get(id(buf))
        if scratch is None:
            scratch, stores = stage_fragment(self.ctx, buf, self.loc)
            self.staged[id(buf)] = scratch
            self.pre.extend(stores)
        return scratch

    def load(self, buf: Buffer, indices, raw=None) -> Expr:
        """A read of `buf[indices]`; `raw` are the pre-substitution indices (ownership checks)."""
        ctx = self.ctx
        if buf.scope == "global":
            return MemLoad(buf, flat_offset(buf, indices, ctx.bounds, ctx.wide(buf)), indices=tuple(indices))
        if buf.scope == "shared":
            return MemLoad(ctx.shared(buf), ctx.offset(buf, indices))
        if buf.scope == "local":
            return MemLoad(ctx.regs(buf), flat_offset(buf, indices, ctx.bounds, ctx.wide(buf)))
        if self.per_thread:
            row = row_register(self, buf, indices)
            if row is not None:
                return MemLoad(ctx.regs(buf), row)
            r = self._owned_reg(buf, raw) if raw is not None else None
            if r is None:
                r = self.find_reg(buf, indices)
            if r is not None:
                return MemLoad(ctx.regs(buf), const(r))
        return MemLoad(self.stage(buf), flat_offset(buf, indices, ctx.bounds, ctx.wide(buf)))

    # ----------------------------------------------------------------- statements
    def stmt(self, s: Stmt) -> Stmt:
        """One element-level tile statement, lowered."""
        if isinstance(s, SeqStmt):
            return SeqStmt(tuple(self.stmt(x) for x in s.stmts), s.loc)
        if isinstance(s, LetStmt):
            value = self.expr(s.value)
            if self.per_thread:
                v = self.ctx.fresh_var(s.var.name, s.var.dtype)
                self.subst[id(s.var)] = v
                return LetStmt(v, value, s.loc)
            return LetStmt(s.var, value, s.loc)
        if isinstance(s, Store):
            return self.store(s.buffer, s.indices, s.value, s.loc)
        if isinstance(s, AtomicAdd):
            return self.atomic(s)
        if isinstance(s, DEBUG_STMTS):  # T.device_assert inside T.Parallel (tilecore.lower.debug)
            from .debug import lower_debug

            return lower_debug(self, s)
        if isinstance(s, IfThenElse):
            cond = self.expr(s.cond)
            if isinstance(cond, Const):  # decided by the thread's coordinates
                chosen = s.then_body if cond.value else s.else_body
                return self.stmt(chosen) if chosen is not None else SeqStmt((), s.loc)
            els = None if s.else_body is None else self.stmt(s.else_body)
            return IfThenElse(cond, self.stmt(s.then_body), els, s.loc)
        if isinstance(s, While):  # per element: each thread loops on its own condition
            n = len(self.pre)
            cond = self.expr(s.cond)
            if len(self.pre) != n:
                raise TileShapeError("this `while` condition reads a value the threads must first "
                                     "exchange through shared memory", s.loc,
                                     hint="compute the value into a `T.alloc_var` in the loop "
                                     "body and test that")
            return While(cond, self.stmt(s.body), s.loc)
        if isinstance(s, For) and s.kind != "parallel":
            kind = "unroll" if s.kind == "unroll" else "serial"
            return For(s.var, self.expr(s.start), self.expr(s.stop), s.step, kind, self.stmt(s.body),
                       (), s.loc)
        if isinstance(s, For):
            raise TileShapeError("a T.Parallel loop inside another T.Parallel loop must be its direct "
                                 "and only body", s.loc, hint="write `for i, j in T.Parallel(M, N)`")
        raise TileShapeError(f"{type(s).__name__} cannot appear inside a T.Parallel loop", s.loc,
                             hint="move tile operations (copy, gemm, reduce, ...) out of the loop")

    def store(self, buf: Buffer, indices, value: Expr, loc) -> Stmt:
        """A write of `value` to `buf[indices]` (owners only for fragments; for memory, one
        replica per element in per-thread code and thread 0 in uniform code)."""
        ctx = self.ctx
        idx = tuple(self.expr(i) for i in indices)
        v = self.expr(value)
        if v.dtype != buf.dtype:
            v = cast(v, buf.dtype)
        guard = self._memory_guard()
        if buf.scope == "global":
            return MemStore(buf, flat_offset(buf, idx, ctx.bounds, ctx.wide(buf)), v, guard, loc, indices=idx)
        if buf.scope == "shared":
            return MemStore(ctx.shared(buf), ctx.offset(buf, idx), v, guard, loc)
        if buf.scope == "local":
            return MemStore(ctx.regs(buf), flat_offset(buf, idx, ctx.bounds, ctx.wide(buf)), v, None, loc)
        regs = ctx.regs(buf)
        lay = ctx.layout(buf)
        if self.per_thread:
            row = row_register(self, buf, idx)
            if row is not None:
                return MemStore(regs, row, v, None, loc)
            r = self._owned_reg(buf, indices)
            if r is None:
                r = self.find_reg(buf, idx)
            if r is None:
                by = f", which is distributed by {self.partition_origin}," if self.partition_origin else ""
                raise TileError(
                    f"layout conflict: fragment {buf.name} is written in this T.Parallel loop{by} at "
                    f"elements that other threads hold; {buf.name}'s layout was fixed by "
                    f"{ctx.layouts.origin(buf)}", loc,
                    hint=f"index {buf.name} with the loop variables in order, or copy it to a "
                         f"fragment of its own first")
            return MemStore(regs, const(r), v, None, loc)
        out = []
        for r in range(lay.nregs):
            conds = [binop("eq", c, i) for c, i in zip(lay.coords(ctx.tx, r), idx)]
            out.append(MemStore(regs, const(r), v, all_of(conds + [lay.valid(ctx.tx, r)]), loc))
        return SeqStmt(tuple(out), loc)

    def atomic(self, s: AtomicAdd) -> Stmt:
        """An element atomic_add (a plain update for per-thread storage)."""
        ctx = self.ctx
        buf = s.buffer
        if buf.scope in ("fragment", "local"):
            add = binop(s.op, Load(buf, s.indices), s.value)
            return self.store(buf, s.indices, add, s.loc)
        idx = tuple(self.expr(i) for i in s.indices)
        v = self.expr(s.value)
        if v.dtype != buf.dtype:
            v = cast(v, buf.dtype)
        target = buf if buf.scope == "global" else ctx.shared(buf)
        guard = self._memory_guard()
        if s.prev is not None:  # the frontend allows it in thread-level kernels only
            return Atomic(s.op, target, ctx.offset(buf, idx), v, guard, s.loc,
                          prev=ctx.regs(s.prev), prev_offset=const(0), order=s.order)
        return Atomic(s.op, target, ctx.offset(buf, idx), v, guard, s.loc, order=s.order)

