"""Barrier insertion: a block-wide barrier between shared-memory accesses of different threads.

Walking the thread program in order, the pass tracks which shared buffers were written and read
since the last barrier. A read of a buffer written since then (RAW), or a write of a buffer read
or written since then (WAR, WAW), gets a `Barrier` right before it. Loops are walked twice, so
accesses at the end of one iteration guard the start of the next. Barriers go only where every
thread of the block arrives: inside loops and branches whose bounds and conditions are the same
for every thread; a hazard inside per-thread control flow is guarded before that statement.
"""

from __future__ import annotations

from ..ir.expr import Expr, Var
from ..ir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt
from ..ir.thread import Atomic, Barrier, IntrinsicCall, MemLoad, MemStore, Shuffle, ThreadKernel, VecMove
from ..ir.visit import walk
from .context import loc_str

_EMPTY: tuple[dict, dict] = ({}, {})


def _shared_reads(node) -> list:
    out = []
    for n in walk(node):
        if isinstance(n, MemLoad) and n.buffer.scope == "shared":
            out.append(n.buffer)
        elif isinstance(n, VecMove) and n.src.scope == "shared":
            out.append(n.src)
        elif isinstance(n, IntrinsicCall):
            for spec, ref in zip(n.intrinsic.operands, n.operands):
                if ref.buffer.scope == "shared" and spec.role == "in":
                    out.append(ref.buffer)
        elif isinstance(n, Atomic) and n.buffer.scope == "shared":
            out.append(n.buffer)
    return out


def _shared_writes(node) -> list:
    out = []
    for n in walk(node):
        if isinstance(n, (MemStore, Atomic)) and n.buffer.scope == "shared":
            out.append(n.buffer)
        elif isinstance(n, VecMove) and n.dst.scope == "shared":
            out.append(n.dst)
        elif isinstance(n, IntrinsicCall):
            for spec, ref in zip(n.intrinsic.operands, n.operands):
                if ref.buffer.scope == "shared" and spec.role == "out":
                    out.append(ref.buffer)
    return out


class _Inserter:
    def __init__(self, tx: Var):
        self.varying: set[int] = {id(tx)}

    def is_varying(self, e: Expr) -> bool:
        for n in walk(e):
            if isinstance(n, Var) and id(n) in self.varying:
                return True
            if isinstance(n, Shuffle):
                return True
            if isinstance(n, MemLoad) and n.buffer.scope == "local" and not n.buffer.is_var:
                return True
        return False

    def leaf(self, s: Stmt, st, reads=None, writes=None):
        reads = _shared_reads(s) if reads is None else reads
        writes = _shared_writes(s) if writes is None else writes
        w, r = st
        hazard = None
        for b in reads:
            if id(b) in w:
                hazard = f"{b.name} written at {loc_str(w[id(b)])} is read at {loc_str(s.loc)}"
                break
        if hazard is None:
            for b in writes:
                if id(b) in r:
                    hazard = f"{b.name} read at {loc_str(r[id(b)])} is overwritten at {loc_str(s.loc)}"
                    break
                if id(b) in w:
                    hazard = f"{b.name} written at {loc_str(w[id(b)])} is rewritten at {loc_str(s.loc)}"
                    break
        out: list[Stmt] = []
        if hazard is not None:
            out.append(Barrier(hazard, s.loc))
            w, r = {}, {}
        w, r = dict(w), dict(r)
        for b in reads:
            r.setdefault(id(b), s.loc)
        for b in writes:
            w.setdefault(id(b), s.loc)
        out.append(s)
        return out, (w, r)

    def visit(self, s: Stmt, st):
        """(statements replacing s, state after it)."""
        if isinstance(s, SeqStmt):
            out: list[Stmt] = []
            for x in s.stmts:
                xs, st = self.visit(x, st)
                out.extend(xs)
            return [SeqStmt(tuple(out), s.loc)], st
        if isinstance(s, Barrier):
            return [s], _EMPTY
        if isinstance(s, LetStmt):
            if self.is_varying(s.value):
                self.varying.add(id(s.var))
            return self.leaf(s, st)
        if isinstance(s, For):
            if self.is_varying(s.start) or self.is_varying(s.stop):
                self.varying.add(id(s.var))
                self._mark_lets(s.body)
                return self.leaf(s, st)
            head, st = self.leaf(s, st, _shared_reads(s.start) + _shared_reads(s.stop), [])
            _, end = self.visit(s.body, st)
            body, end = self.visit(s.body, _union(st, end))
            loop = For(s.var, s.start, s.stop, s.step, s.kind, _seq(body, s), s.annotations, s.loc)
            return head[:-1] + [loop], _union(st, end)
        if isinstance(s, IfThenElse):
            if self.is_varying(s.cond):
                self._mark_lets(s)
                return self.leaf(s, st)
            head, st = self.leaf(s, st, _shared_reads(s.cond), [])
            then, st1 = self.visit(s.then_body, st)
            if s.else_body is None:
                els, st2 = None, st
            else:
                eb, st2 = self.visit(s.else_body, st)
                els = _seq(eb, s.else_body)
            node = IfThenElse(s.cond, _seq(then, s.then_body), els, s.loc)
            return head[:-1] + [node], _union(st1, st2)
        return self.leaf(s, st)

    def _mark_lets(self, s: Stmt) -> None:
        for n in walk(s):
            if isinstance(n, LetStmt):
                self.varying.add(id(n.var))
            elif isinstance(n, For):
                self.varying.add(id(n.var))


def _seq(stmts: list, like: Stmt) -> Stmt:
    return stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts), like.loc)


def _union(a, b):
    w = dict(a[0])
    for k, v in b[0].items():
        w.setdefault(k, v)
    r = dict(a[1])
    for k, v in b[1].items():
        r.setdefault(k, v)
    return w, r


def insert_barriers(kernel: ThreadKernel) -> ThreadKernel:
    """`kernel` with barriers wherever shared memory crosses threads."""
    ins = _Inserter(kernel.thread_var)
    body, _ = ins.visit(kernel.body, _EMPTY)
    return ThreadKernel(kernel.grid, kernel.block_vars, kernel.thread_var, kernel.num_threads,
                        kernel.warp_size, kernel.shared, kernel.registers, _seq(body, kernel.body),
                        kernel.loc)
