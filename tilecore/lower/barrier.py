"""Barrier insertion: a block-wide barrier between shared-memory accesses of different threads.

Walking the thread program in order, the pass tracks which thread wrote and read which element
of each shared buffer since the last barrier (tabulated over the thread index; an access whose
offset depends on more is assumed to touch everything). An access to an element another thread
wrote (RAW, WAW) or read (WAR) since then gets a `Barrier` right before it. Loops are walked twice, so
accesses at the end of one iteration guard the start of the next. Barriers go only where every
thread of the block arrives: inside loops and branches whose bounds and conditions are the same
for every thread; a hazard inside per-thread control flow is guarded before that statement.

Asynchronous copies follow the model of docs/architecture.md ("The asynchronous memory model"):
an `AsyncCopy` is checked as a write at its issue, then stays *in flight* in its queue's open
group; `AsyncCommit` closes the group and `AsyncWait(n)` lands every group but the n most recent
as ordinary writes of the issuing threads (so a barrier follows before other threads read them).
An access that provably touches in-flight data gets an `AsyncWait(pending=0)` first; in-flight
footprints that cannot be tabulated are trusted to the waits the pipeline pass placed (the
emulator checks them). Named and warpgroup barriers are taken to order nothing here.

mbarriers and TMA (docs/architecture.md, "Hopper: TMA, mbarrier, warp specialization"): an
`MbarrierInit` is a write of its mbarrier element (so a barrier follows before other threads
arrive or wait), arrivals and waits are reads (they never conflict with each other). A `TmaLoad`
reads its mbarrier and is checked at its issue as a write of its whole box by every thread (a
barrier goes before it when anybody read or wrote that memory since the last barrier: the stage
is being refilled), but it is not recorded as a write: it lands at the `MbarrierWait` that
observes its phase, visible to every waiting thread, so no barrier is needed after it. A
`TmaStore` reads its box at its issue.
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import TileInternalError, TileShapeError
from ..ir.expr import Expr, Var
from ..ir.loops import While
from ..ir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt
from ..ir.thread import (
    CONSUMER_BARRIER_ID,
    AsyncCommit,
    AsyncCopy,
    AsyncWait,
    Atomic,
    Barrier,
    IntrinsicCall,
    MbarrierArrive,
    MbarrierInit,
    MbarrierWait,
    MemLoad,
    MemStore,
    Shuffle,
    ThreadKernel,
    TmaLoad,
    TmaStore,
    VecMove,
    WarpSpecialized,
)
from ..ir.visit import walk
from .context import loc_str
from .footprints import tab, tab_desc, tab_memo

# The analysis state: (writes, reads, in flight). Writes and reads map buffer ids to footprints;
# in flight maps a queue to (committed groups, oldest first, each a footprint dict; open group).
_EMPTY: tuple = ({}, {}, {})
_MAX_GROUPS = 8  # older in-flight groups are merged (a may-analysis stays sound)


class _Footprint:
    """Which thread touched which element of one shared buffer since the last barrier:
    `owner[e]` is -1 (nobody), a thread id, or -2 (several); `unknown` when some access could
    not be tabulated (its offset depends on more than the thread index)."""

    def __init__(self, n: int, loc):
        self.owner = np.full(n, -1, dtype=np.int64)
        self.unknown = False
        self.loc = loc

    def copy(self) -> _Footprint:
        """An independent copy."""
        f = _Footprint(0, self.loc)
        f.owner = self.owner.copy()
        f.unknown = self.unknown
        return f

    def add(self, acc) -> None:
        """Record one access: (elements, threads), or None when unknown."""
        if acc is None:
            self.unknown = True
            return
        idx, tid = acc
        cur = self.owner[idx]
        self.owner[idx] = np.where((cur == -1) | (cur == tid), tid, -2)

    def merge(self, other: _Footprint) -> None:
        """Union with another path's footprint (after a branch or a loop)."""
        self.unknown |= other.unknown
        a, b = self.owner, other.owner
        self.owner = np.where(a == -1, b, np.where((b == -1) | (a == b), a, -2))

    def overlaps(self, acc) -> bool:
        """True when `acc` provably touches an element recorded here (by any thread)."""
        if self.unknown or acc is None:
            return False
        idx, _ = acc
        return bool(np.any(self.owner[idx] != -1))

    def conflicts(self, acc) -> bool:
        """True when `acc` touches an element some other thread touched."""
        if self.unknown or acc is None:
            return self.unknown or bool(np.any(self.owner != -1))
        idx, tid = acc
        o = self.owner[idx]
        return bool(np.any((o == -2) | ((o >= 0) & (o != tid))))


def _all_accesses(node, tx: Var, threads: int, tabs: dict | None = None) -> dict[str, list]:
    """The shared reads ('r'), writes ('w'), asynchronous copies' writes ('a') and TMA loads'
    writes ('t') in node, each [(buffer, (elements, threads) or None)], from one walk (the
    inserter asks for all four of every leaf statement; walking it four times was a tenth of a
    GEMM's lowering). `tabs` memoizes `footprints.tab` by (offset, width, buffer size): the
    offsets of one kernel repeat."""
    tab_of = tab if tabs is None else functools.partial(tab_memo, tabs)
    reads: list = []
    writes: list = []
    asyncs: list = []
    tmas: list = []
    for n in walk(node):
        if isinstance(n, MemLoad):
            if n.buffer.scope == "shared":
                reads.append((n.buffer, tab_of(n.offset, 1, tx, threads, n.buffer)))
        elif isinstance(n, VecMove):
            if n.src.scope == "shared":
                reads.append((n.src, tab_of(n.src_offset, n.lanes, tx, threads, n.src)))
            if n.dst.scope == "shared":
                writes.append((n.dst, tab_of(n.dst_offset, n.lanes, tx, threads, n.dst)))
        elif isinstance(n, IntrinsicCall):
            for spec, ref in zip(n.intrinsic.operands, n.operands):
                if ref.buffer.scope != "shared":
                    continue
                if spec.space == "desc":
                    reads.append((ref.buffer, tab_desc(spec, n.intrinsic.lanes, ref.offset, tx, threads,
                                                        ref.buffer)))
                elif spec.role == "in":
                    width = n.intrinsic.shape[-1] if n.intrinsic.kind == "ldmatrix" else 1
                    reads.append((ref.buffer, tab_of(ref.offset, width, tx, threads, ref.buffer)))
                if spec.role == "out":
                    writes.append((ref.buffer, None))
        elif isinstance(n, Atomic):
            if n.buffer.scope == "shared":
                reads.append((n.buffer, None))
                writes.append((n.buffer, tab_of(n.offset, 1, tx, threads, n.buffer)))
        elif isinstance(n, MemStore):
            if n.buffer.scope == "shared":
                writes.append((n.buffer, tab_of(n.offset, 1, tx, threads, n.buffer)))
        elif isinstance(n, (MbarrierArrive, MbarrierWait)):
            reads.append((n.bar, tab_of(n.offset, 1, tx, threads, n.bar)))
        elif isinstance(n, MbarrierInit):
            writes.append((n.bar, tab_of(n.offset, 1, tx, threads, n.bar)))
        elif isinstance(n, TmaLoad):
            reads.append((n.bar, tab_of(n.bar_offset, 1, tx, threads, n.bar)))
            tmas.append((n.dst, tab_of(n.dst_offset, n.layout.size, tx, threads, n.dst)))
        elif isinstance(n, TmaStore):
            reads.append((n.src, tab_of(n.src_offset, n.layout.size, tx, threads, n.src)))
        elif isinstance(n, AsyncCopy):
            asyncs.append((n.dst, tab_of(n.dst_offset, n.lanes, tx, threads, n.dst)))
    return {"r": reads, "w": writes, "a": asyncs, "t": tmas}


class _Inserter:
    def __init__(self, tx: Var, threads: int, named: bool = False, barrier_id: int = CONSUMER_BARRIER_ID):
        self.tx = tx
        self.threads = threads
        self.varying: set[int] = {id(tx)}
        # inside a WarpSpecialized consumer (or a T.ws role, lower/role_lowering.py): barriers
        # are named barrier `barrier_id` over its threads
        self.named = named
        self.barrier_id = barrier_id
        # loops are visited twice (four times when a barrier may hoist), nested loops more: each
        # statement's accesses are tabulated once, kept with the statement (so its id stays its
        # own); the result depends only on the statement, tx and the thread count
        self._found: dict[int, tuple] = {}
        self._tabs: dict = {}

    def accesses(self, node) -> dict[str, list]:
        """`_all_accesses` of `node` for this inserter's threads, computed once per node."""
        got = self._found.get(id(node))
        if got is None or got[0] is not node:
            got = self._found[id(node)] = (node, _all_accesses(node, self.tx, self.threads, self._tabs))
        return got[1]

    def barrier(self, reason: str, loc) -> Barrier:
        """The barrier this inserter places: the block's, or the consumers' named one."""
        if self.named:
            return Barrier(reason, loc, "named", self.barrier_id, self.threads)
        return Barrier(reason, loc)

    def _own(self, s: Barrier) -> bool:
        """Whether `s` orders every thread this inserter tracks."""
        mine = s.scope == "named" and s.barrier_id == self.barrier_id and s.count == self.threads
        return s.scope == "block" or (self.named and mine)

    def is_varying(self, e: Expr) -> bool:
        """True when `e` may differ between the threads of the block."""
        for n in walk(e):
            if isinstance(n, Var) and id(n) in self.varying:
                return True
            if isinstance(n, Shuffle):
                return True
            if isinstance(n, MemLoad) and n.buffer.scope == "local" and not n.buffer.is_var:
                return True
        return False

    def leaf(self, s: Stmt, st, reads=None, writes=None, asyncs=None, tmas=None):
        """(statements, state) for a statement taken as a whole: a wait first when it touches
        in-flight data, a barrier first on a hazard."""
        if reads is None or writes is None or asyncs is None or tmas is None:
            found = self.accesses(s)
            reads = found["r"] if reads is None else reads
            writes = found["w"] if writes is None else writes
            asyncs = found["a"] if asyncs is None else asyncs
            tmas = found["t"] if tmas is None else tmas
        out: list[Stmt] = []
        w, r, fl = st
        for q, (groups, open_) in fl.items():
            pending = list(groups) + [open_]
            if any(g.get(id(b)) is not None and g[id(b)].overlaps(acc)
                   for g in pending for b, acc in reads + writes + asyncs):
                if open_:
                    out.append(AsyncCommit(q, s.loc))
                out.append(AsyncWait(q, 0, s.loc))
                w, r, fl = _land(st, q, 0, commit=True)
                st = (w, r, fl)
        hazard = None
        for b, acc in reads:
            f = w.get(id(b))
            if f is not None and f.conflicts(acc):
                hazard = f"{b.name} written at {loc_str(f.loc)} is read at {loc_str(s.loc)}"
                break
        if hazard is None:
            for b, acc in writes + asyncs + tmas:
                f = r.get(id(b))
                if f is not None and f.conflicts(acc):
                    hazard = f"{b.name} read at {loc_str(f.loc)} is overwritten at {loc_str(s.loc)}"
                    break
                f = w.get(id(b))
                if f is not None and f.conflicts(acc):
                    hazard = f"{b.name} written at {loc_str(f.loc)} is rewritten at {loc_str(s.loc)}"
                    break
        if hazard is not None:
            out.append(self.barrier(hazard, s.loc))
            w, r = {}, {}
        w, r = dict(w), dict(r)
        for table, accs in ((r, reads), (w, writes)):
            _record(table, accs, s.loc)
        if asyncs:
            queue = next(n.queue for n in walk(s) if isinstance(n, AsyncCopy))
            fl = dict(fl)
            groups, open_ = fl.get(queue, ((), {}))
            open_ = dict(open_)
            _record(open_, asyncs, s.loc)
            fl[queue] = (groups, open_)
        if isinstance(s, IfThenElse):
            w, r, fl = self._bulk_reads(s, (w, r, fl))
        out.append(s)
        return out, (w, r, fl)

    def _bulk_reads(self, s: Stmt, st):
        """The state after the bulk-queue statements inside per-thread code `s` (the one
        thread that issues TMA stores): each `TmaStore`'s shared read stays in flight in the
        "bulk" queue until that thread's `AsyncWait("bulk")` lands it as its access, so a
        barrier follows the wait before other threads overwrite the staging tile (the read
        at issue alone let an earlier barrier, before the wait, pass as the guard)."""
        for n in walk(s):
            if isinstance(n, TmaStore):
                w, r, fl = st
                groups, open_ = fl.get("bulk", ((), {}))
                open_ = dict(open_)
                _record(open_, [(n.src, tab(n.src_offset, n.layout.size, self.tx, self.threads, n.src))],
                        n.loc)
                st = (w, r, {**fl, "bulk": (groups, open_)})
            elif isinstance(n, AsyncCommit) and n.queue == "bulk":
                w, r, fl = st
                groups, open_ = fl.get("bulk", ((), {}))
                st = (w, r, {**fl, "bulk": (_cap(tuple(groups) + (open_,)), {})})
            elif isinstance(n, AsyncWait) and n.queue == "bulk":
                st = _land(st, "bulk", n.pending)
        return st

    def visit(self, s: Stmt, st):
        """(statements replacing s, state after it)."""
        if isinstance(s, SeqStmt):
            out: list[Stmt] = []
            for x in s.stmts:
                xs, st = self.visit(x, st)
                out.extend(xs)
            return [SeqStmt(tuple(out), s.loc)], st
        if isinstance(s, Barrier):
            if not self._own(s):  # orders only some threads: keep every footprint
                return [s], st
            return [s], ({}, {}, st[2])
        if isinstance(s, AsyncCommit):
            w, r, fl = st
            groups, open_ = fl.get(s.queue, ((), {}))
            fl = dict(fl)
            fl[s.queue] = (_cap(tuple(groups) + (open_,)), {})
            return [s], (w, r, fl)
        if isinstance(s, AsyncWait):
            return [s], _land(st, s.queue, s.pending)
        if isinstance(s, WarpSpecialized):
            # a barrier first where the node's accesses need one (the mbarrier inits), then the
            # consumer on its own with named barriers; the producer (one elected thread issuing
            # TMA and waiting on mbarriers) needs none
            head, after = self.leaf(s, st)
            entry = st if len(head) == 1 else ({}, {}, st[2])
            cons = _Inserter(self.tx, s.split, named=True)
            body, _ = cons.visit(s.consumer, entry)
            node = WarpSpecialized(s.split, s.producer, _seq(body, s.consumer), s.producer_regs,
                                   s.consumer_regs, s.loc)
            return head[:-1] + [node], after
        if isinstance(s, LetStmt):
            if self.is_varying(s.value):
                self.varying.add(id(s.var))
            return self.leaf(s, st)
        if isinstance(s, For):
            if self.is_varying(s.start) or self.is_varying(s.stop):
                self.varying.add(id(s.var))
                self._mark_lets(s.body)
                return self.leaf(s, st)
            head, st = self.leaf(s, st, self.accesses(s.start)["r"] +
                                 self.accesses(s.stop)["r"], [], [], [])
            _, end = self.visit(s.body, st)
            body, end = self.visit(s.body, _union(st, end))
            loop = For(s.var, s.start, s.stop, s.step, s.kind, _seq(body, s), s.annotations, s.loc)
            hoisted = self._hoisted_loop(s, st, body)
            if hoisted is not None:
                return head[:-1] + hoisted[0], hoisted[1]
            return head[:-1] + [loop], _union(st, end)
        if isinstance(s, While):
            return self._while(s, st)
        if isinstance(s, IfThenElse):
            if self.is_varying(s.cond):
                self._mark_lets(s)
                return self.leaf(s, st)
            head, st = self.leaf(s, st, self.accesses(s.cond)["r"], [], [], [])
            then, st1 = self.visit(s.then_body, st)
            if s.else_body is None:
                els, st2 = None, st
            else:
                eb, st2 = self.visit(s.else_body, st)
                els = _seq(eb, s.else_body)
            node = IfThenElse(s.cond, _seq(then, s.then_body), els, s.loc)
            return head[:-1] + [node], _union(st1, st2)
        return self.leaf(s, st)

    def _while(self, s: While, st):
        """A `while` loop: as a serial loop of unknown trip count (the body visited twice, the
        second time from the union of the entry and end states). A condition that varies between
        threads makes the loop per-thread code (one leaf); one that reads shared memory would be
        re-read after the body's writes, which the single head check does not cover."""
        if self.is_varying(s.cond):
            self._mark_lets(s.body)
            return self.leaf(s, st)
        reads = self.accesses(s.cond)["r"]
        if reads:
            raise TileShapeError("a `while` condition that reads shared memory is not supported on "
                                 "thread-lowered targets", s.loc,
                                 hint="keep the loop state in a `T.alloc_var` / local buffer")
        _, end = self.visit(s.body, st)
        body, end = self.visit(s.body, _union(st, end))
        return [While(s.cond, _seq(body, s), s.loc)], _union(st, end)

    def _hoisted_loop(self, s: For, st, body: list):
        """([barrier, loop], state) when one barrier before the loop saves barriers inside it
        (a hazard on data written before the loop, e.g. a Q tile read by every iteration, would
        otherwise be guarded by a barrier executed on every iteration); None otherwise."""
        own = [n for n in walk(_seq(body, s)) if isinstance(n, Barrier) and self._own(n)]
        if not (st[0] or st[1]) or not own:
            return None
        clean = ({}, {}, st[2])
        _, end = self.visit(s.body, clean)
        body2, end = self.visit(s.body, _union(clean, end))

        def count(b):
            return sum(isinstance(n, Barrier) and self._own(n) for n in walk(_seq(b, s)))

        if count(body2) >= count(body):
            return None
        loop = For(s.var, s.start, s.stop, s.step, s.kind, _seq(body2, s), s.annotations, s.loc)
        reason = f"before the loop at {loc_str(s.loc)}: hoisted out of its body"
        return [self.barrier(reason, s.loc), loop], _union(clean, end)

    def _mark_lets(self, s: Stmt) -> None:
        # a commit directly followed by `wait_group 0` (T.cp_async_barrier_noinc) leaves the
        # executing thread nothing in flight, so the block's uniform waits after it still hold
        drained = set()
        for n in walk(s):
            if isinstance(n, SeqStmt):
                for a, b in zip(n.stmts, n.stmts[1:]):
                    if isinstance(a, AsyncCommit) and isinstance(b, AsyncWait) and a.queue == \
                            b.queue == "cp.async" and b.pending == 0:
                        drained.update((id(a), id(b)))
        for n in walk(s):
            if isinstance(n, (AsyncCommit, AsyncWait)) and n.queue == "cp.async" and id(n) not in drained:
                raise TileInternalError(f"{type(n).__name__} inside per-thread control flow at "
                                        f"{loc_str(n.loc)}: group counts must stay uniform")
            if isinstance(n, LetStmt):
                self.varying.add(id(n.var))
            elif isinstance(n, For):
                self.varying.add(id(n.var))


def _seq(stmts: list, like: Stmt) -> Stmt:
    return stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts), like.loc)


def _record(table: dict, accs: list, loc) -> None:
    """Add accesses to a footprint table (copy-on-write per buffer)."""
    for b, acc in accs:
        f = table.get(id(b))
        f = _Footprint(b.shape[0], loc) if f is None else f.copy()
        f.add(acc)
        table[id(b)] = f


def _merge_tables(x: dict, y: dict) -> dict:
    m = dict(x)
    for k, f in y.items():
        if k in m:
            g = m[k].copy()
            g.merge(f)
            m[k] = g
        else:
            m[k] = f
    return m


def _cap(groups: tuple) -> tuple:
    """At most _MAX_GROUPS groups: the oldest are merged into one."""
    if len(groups) <= _MAX_GROUPS:
        return groups
    head = groups[0]
    for g in groups[1:len(groups) - _MAX_GROUPS + 1]:
        head = _merge_tables(head, g)
    return (head,) + groups[len(groups) - _MAX_GROUPS + 1:]


def _land(st, queue: str, pending: int, commit: bool = False):
    """The state after `AsyncWait(queue, pending)` (after a commit first, when `commit`): every
    committed group but the `pending` most recent becomes ordinary writes."""
    w, r, fl = st
    groups, open_ = fl.get(queue, ((), {}))
    if commit and open_:
        groups, open_ = tuple(groups) + (open_,), {}
    keep = len(groups) - pending
    landed, rest = groups[:max(keep, 0)], groups[max(keep, 0):]
    for g in landed:
        w = _merge_tables(w, g)
    fl = dict(fl)
    fl[queue] = (tuple(rest), open_)
    return w, r, fl


def _union(a, b):
    """The state after either of two paths."""
    fl = {}
    for q in set(a[2]) | set(b[2]):
        ga, oa = a[2].get(q, ((), {}))
        gb, ob = b[2].get(q, ((), {}))
        n = max(len(ga), len(gb))
        # align from the most recent group: counts are relative to the newest commit
        ga = tuple({} for _ in range(n - len(ga))) + tuple(ga)
        gb = tuple({} for _ in range(n - len(gb))) + tuple(gb)
        fl[q] = (tuple(_merge_tables(x, y) for x, y in zip(ga, gb)), _merge_tables(oa, ob))
    return _merge_tables(a[0], b[0]), _merge_tables(a[1], b[1]), fl


def insert_role_barriers(body: Stmt, tx: Var, threads: int, barrier_id: int) -> Stmt:
    """`body`, run by `threads` threads numbered by `tx`, with named barrier `barrier_id` over
    them wherever its shared memory crosses threads (a `T.ws` role, lower/role_lowering.py)."""
    out, _ = _Inserter(tx, threads, named=True, barrier_id=barrier_id).visit(body, _EMPTY)
    return _seq(out, body)


def insert_barriers(kernel: ThreadKernel) -> ThreadKernel:
    """`kernel` with barriers wherever shared memory crosses threads."""
    ins = _Inserter(kernel.thread_var, kernel.num_threads)
    body, _ = ins.visit(kernel.body, _EMPTY)
    return ThreadKernel(kernel.grid, kernel.block_vars, kernel.thread_var, kernel.num_threads,
                        kernel.warp_size, kernel.shared, kernel.registers, _seq(body, kernel.body),
                        kernel.loc)
