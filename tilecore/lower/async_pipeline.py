"""Multi-stage asynchronous-copy software pipelines for T.Pipelined loops (pass `async-pipeline`).

For a loop the user marked `T.Pipelined(n, num_stages=s)` (s >= 2), on a target whose facts
list `async_copy_sizes`, every *stageable* shared buffer gets s stages and is filled by
asynchronous copies issued s - 1 iterations ahead:

    prologue:  for j in 0..s-2: issue tile start+j into stage j; commit
    loop k:    wait(s-2)                      # this thread's copies of tile k have landed
               issue tile k+s-1 into stage (k-start+s-1) % s; commit
               body, reading stage (k-start) % s
    after:     wait(0)

A tile past the end is issued with a false predicate (zero fill, no global read), so every
iteration commits exactly one group and the wait counts hold for any trip count, including one
smaller than s - 1. `insert-barriers` then puts one block barrier between the wait and the issue:
it makes the landed tile visible to all threads and orders the previous iteration's reads of the
stage being refilled before the refill (docs/architecture.md, "The asynchronous memory model").

A shared buffer is stageable when, in the loop body, it is written only by global->shared vector
copies at the body's top level, each of `async_copy_sizes` bytes with the same dtype and with
offsets, predicates and guards computable at the top of an iteration, writing the same elements
in every iteration (so a hand-written double buffer is left alone); when it is not read in the
body before its last copy; when it is used nowhere outside the loop; and when the global tensor it
copies from is not written in the loop. The stage stride is the buffer's size rounded up to 128
bytes (bank-neutral, 16-byte aligned, so vector and ldmatrix addresses keep their alignment and
bank pattern). Stages are reduced while the block's shared memory would exceed the target's.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..ir.buffer import Buffer
from ..ir.expr import Const, Expr, Var, binop, const
from ..ir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt
from ..ir.thread import (
    AsyncCommit,
    AsyncCopy,
    AsyncWait,
    Atomic,
    IntrinsicCall,
    MemLoad,
    MemStore,
    OperandRef,
    ThreadKernel,
    VecMove,
)
from ..ir.visit import rewrite, substitute, walk
from ..target import TargetFacts
from .early_prologue import hoist_prologues
from .indexing import free_vars, simplify, value_range
from .prefetch import flat_stmts, written_globals
from .smem_plan import TMA_ALIGN, planned_bytes_resized
from .tma_pipeline import TILE_COPIES, TmaRing, tma_buffers
from .warp_specialize import WsPlan, assemble, ws_possible
from .wgmma import relax_wgmma_wait

STAGE_ALIGN_BYTES = 128


def _copy_move(s: Stmt) -> VecMove | None:
    """The global->shared VecMove a top-level body statement consists of (maybe under one guard)."""
    if isinstance(s, IfThenElse) and s.else_body is None:
        inner = flat_stmts(s.then_body)
        if len(inner) != 1:
            return None
        s = inner[0]
    if isinstance(s, VecMove) and s.src.scope == "global" and s.dst.scope == "shared":
        return s
    return None


def _touches(node, buf: Buffer) -> tuple[bool, bool]:
    """(reads, writes) of shared buffer `buf` anywhere in `node`."""
    r = w = False
    for n in walk(node):
        if isinstance(n, MemLoad) and n.buffer is buf:
            r = True
        elif isinstance(n, (MemStore, Atomic)) and n.buffer is buf:
            w = True
        elif isinstance(n, (VecMove, AsyncCopy)):
            r |= n.src is buf
            w |= n.dst is buf
        elif isinstance(n, IntrinsicCall):
            for spec, ref in zip(n.intrinsic.operands, n.operands):
                if ref.buffer is buf:
                    r |= spec.role == "in"
                    w |= spec.role == "out"
    return r, w


class _Plan:
    """The staged buffers of one loop: old buffer -> (copy statements, new buffer, stride)."""

    def __init__(self):
        self.copies: dict[int, list] = {}
        self.old: dict[int, Buffer] = {}
        self.new: dict[int, Buffer] = {}
        self.stride: dict[int, int] = {}


def _stageable(loop: For, kernel_body: Stmt, sizes: tuple) -> dict[int, list]:
    """buffer id -> positions of its copy statements in the loop body, for stageable buffers."""
    items = flat_stmts(loop.body)
    inner = {id(n.var) for n in walk(loop.body) if isinstance(n, (LetStmt, For))}
    written = written_globals(loop.body)
    positions: dict[int, list] = {}
    bufs: dict[int, Buffer] = {}
    bad: set = set()
    for i, s in enumerate(items):
        mv = _copy_move(s)
        if mv is None:
            continue
        b = mv.dst
        bufs[id(b)] = b
        exprs = [mv.src_offset, mv.dst_offset, mv.pred] + ([s.cond] if isinstance(s, IfThenElse) else [])
        # Every iteration must write the same elements (a stage then holds exactly its tile):
        # the destination, the guard and, without zero fill, the predicate ignore the loop var.
        same_place = [mv.dst_offset] + ([s.cond] if isinstance(s, IfThenElse) else []) + \
            ([mv.pred] if mv.pred is not None and not mv.zero_fill else [])
        ok = (mv.lanes * mv.dst.dtype.itemsize in sizes and id(mv.src) not in written
              and not any(id(v) in inner for e in exprs if e is not None for v in free_vars(e))
              and not any(v is loop.var for e in same_place for v in free_vars(e)))
        if not ok:
            bad.add(id(b))
        positions.setdefault(id(b), []).append(i)
    out = {}
    inside = {id(n) for n in walk(loop.body)}
    outside = [n for n in walk(kernel_body) if id(n) not in inside and not isinstance(n, Buffer)]
    for key, pos in positions.items():
        if key in bad:
            continue
        b, last = bufs[key], max(pos)
        ok = True
        for i, s in enumerate(items):
            if i in pos:
                continue
            r, w = _touches(s, b)
            if w or (r and i < last):
                ok = False
                break
        if ok and not any(_direct_use(n, b) for n in outside):
            out[key] = pos
    return out


def _direct_use(n, buf: Buffer) -> bool:
    """Whether node `n` itself (not its children) accesses `buf`."""
    if isinstance(n, (MemLoad, MemStore, Atomic)):
        return n.buffer is buf
    if isinstance(n, (VecMove, AsyncCopy)):
        return n.src is buf or n.dst is buf
    if isinstance(n, OperandRef):
        return n.buffer is buf
    return False


def _retarget(node, plan: _Plan, stage: Expr):
    """`node` with every access of a staged buffer redirected to stage `stage`."""
    def off(buf_id: int, e: Expr) -> Expr:
        return e + stage * plan.stride[buf_id]

    def fn(n):
        if isinstance(n, MemLoad) and id(n.buffer) in plan.new:
            return replace(n, buffer=plan.new[id(n.buffer)], offset=off(id(n.buffer), n.offset))
        if isinstance(n, VecMove) and id(n.src) in plan.new:
            return replace(n, src=plan.new[id(n.src)], src_offset=off(id(n.src), n.src_offset))
        if isinstance(n, OperandRef) and id(n.buffer) in plan.new:
            return OperandRef(plan.new[id(n.buffer)], off(id(n.buffer), n.offset))
        return None

    return rewrite(node, fn)


def _issue(stmt: Stmt, plan: _Plan, var: Var, tile: Expr, stage: Expr, more: Expr | None,
           bounds: dict, where_more: dict | None = None) -> Stmt:
    """The copy statement `stmt`, for tile `tile` (substituted for `var`), as an asynchronous copy
    into stage `stage`; predicated off (zero fill) unless `more`.

    `where_more`: variable ranges that hold wherever `more` does (the loop variable bounded so
    that tile `tile` exists). The copy's own bounds check is simplified under them: where the
    tile is interior (K a multiple of the tile, M/N rows in range) it folds away, leaving the
    one tile-granular, warp-uniform `more` instead of a per-thread column compare per copy."""
    stmt = substitute(stmt, {var: tile})
    guard = stmt.cond if isinstance(stmt, IfThenElse) else None
    mv = _copy_move(stmt)
    key = id(mv.dst)
    own = mv.pred
    if own is not None:
        # a check that holds in every block (a KV head `by // groups` < kv_heads) folds under
        # `bounds` alone, one that holds where the tile exists under `where_more`
        own = simplify(own, where_more if where_more is not None and more is not None else bounds)
        if isinstance(own, Const) and own.value is True:
            own = None
    dst_offset = mv.dst_offset + stage * plan.stride[key]
    if isinstance(more, Const) and more.value is True:
        more = None  # a prologue tile that always exists
    pred = own if more is None else (more if own is None else binop("and", own, more))
    # only the tile check left: a tile past the end is skipped, not zero-filled (its stage is
    # never read), so the copy needs no fallback address select (`zero_fill` False)
    fill = mv.zero_fill and own is not None
    ac: Stmt = AsyncCopy(plan.new[key], dst_offset, mv.src, mv.src_offset, mv.lanes, pred, fill, "group",
                         mv.loc)
    if guard is not None:
        ac = IfThenElse(guard, ac, None, stmt.loc)
    return simplify(ac, bounds)


def _fits(kernel: ThreadKernel, plan: _Plan, stages: int, summed: int, facts: TargetFacts,
          replaced: dict, use_tma: bool) -> bool:
    """Whether `stages` stages of the loop's staged buffers fit the target's shared memory:
    by the summed budget (every buffer its own bytes, what this pass always accepted) or by
    the plan of tilecore.lower.smem_plan (buffers with disjoint live ranges share bytes: an
    epilogue's staging tile reuses the stages, so 3 stages of a 128x256x64 fp16 tile fit in
    sm_80's 163 KB beside its 32 KB output staging tile). A TMA stage may need 1 KB of alignment,
    which the plan at this point does not know of: that much slack per staged buffer."""
    limit = facts.shared_memory_bytes
    if limit <= 0 or summed <= limit:
        return True
    grown = dict(replaced)
    for key, b in plan.old.items():
        grown[id(b)] = Buffer(b.name, (stages * plan.stride[key],), b.dtype, "shared", layout=b.layout)
    slack = len(plan.old) * TMA_ALIGN if use_tma and facts.get("tma") else 0
    return planned_bytes_resized(kernel, grown) + slack <= limit


def _pipeline_loop(loop: For, kernel: ThreadKernel, facts: TargetFacts, budget: list, names: set,
                   bounds: dict, replaced: dict, added: list, use_tma: bool,
                   ws: WsPlan | None, early: dict | None = None) -> Stmt | None:
    sizes = tuple(facts.get("async_copy_sizes", ()) or ())
    want = int(loop.annotation("num_stages", 0) or 0)
    if not sizes or want < 2 or loop.step != 1 or loop.annotation("async_stages"):
        return None
    staged = _stageable(loop, kernel.body, sizes)
    if not staged:
        return None
    items = flat_stmts(loop.body)
    plan = _Plan()
    for key, pos in staged.items():
        b = _copy_move(items[pos[0]]).dst
        unit = max(1, STAGE_ALIGN_BYTES // b.dtype.itemsize)
        if b.layout is not None:  # stages at multiples of the layout's period keep its bank pattern
            unit = math.lcm(unit, b.layout.period)
        plan.old[key] = b
        plan.stride[key] = -(-b.shape[0] // unit) * unit
        plan.copies[key] = pos
    stages = want
    extra = lambda s: sum((s * plan.stride[k] - plan.old[k].shape[0]) * plan.old[k].dtype.itemsize  # noqa: E731
                          for k in plan.old)
    while stages >= 2 and not _fits(kernel, plan, stages, budget[0] + extra(stages), facts, replaced,
                                    use_tma):
        stages -= 1
    if stages < 2:
        return None
    budget[0] += extra(stages)
    for key, b in plan.old.items():
        plan.new[key] = Buffer(b.name, (stages * plan.stride[key],), b.dtype, "shared", layout=b.layout)
    d = stages - 1
    k, start, stop = loop.var, loop.start, loop.stop
    loc = loop.loc
    simp = lambda e: simplify(e, bounds)  # noqa: E731
    # TMA fills the buffers whose tile copy qualifies (tilecore.lower.tma_pipeline); the others
    # stay cp.async. TMA stages are only correct when the loop runs once per block (its phase
    # count starts at the loop's start), so a loop nested in another loop keeps cp.async.
    tma_ok = use_tma and facts.get("tma") and not _nested(loop, kernel.body)
    tma = tma_buffers(loop, staged, plan.old) if tma_ok else {}
    ring = TmaRing(_fresh("tma_full", names), stages, kernel.thread_var, tma, plan.new, plan.stride, loc) \
        if tma else None
    all_pos = {p for pos in plan.copies.values() for p in pos}
    copy_pos = sorted(p for key, pos in plan.copies.items() if key not in tma for p in pos)
    copies = [items[p] for p in copy_pos]
    rest = [s for i, s in enumerate(items) if i not in all_pos]
    if ws is not None:
        if copies or ring is None or id(loop) not in ws.top:
            ws.ok = False  # warp specialization needs every stage filled by TMA, at top level
            return None
        # wgmma consumers keep one group in flight and release the previous tile's stage
        # after the relaxed wait retired its group (tilecore.lower.wgmma.relax_wgmma_wait)
        return _ws_loop(loop, plan, ring, rest, stages, names, simp, replaced, added, ws)
    # wgmma consumers: keep one tensor-core group in flight, prefetching one tile less far
    # (tilecore.lower.wgmma.relax_wgmma_wait says when and why that is safe)
    relaxed = relax_wgmma_wait(rest) if stages >= 3 else None
    if relaxed is not None:
        d = stages - 2
        rest = relaxed
    prologue: list[Stmt] = []
    for j in range(d):
        tile = start + j
        more = simplify(binop("lt", tile, stop), bounds)
        if ring is not None:
            prologue.append(ring.issue(k, tile, const(j), more, simp))
        if copies:
            prologue.extend(_issue(c, plan, k, tile, const(j), more, bounds) for c in copies)
            prologue.append(AsyncCommit("cp.async", loc))
    read_stage = Var(_fresh("stage", names))
    write_stage = Var(_fresh("stage_next", names))
    head: list[Stmt] = [
        LetStmt(read_stage, simplify(binop("mod", k - start, const(stages)), bounds), loc),
        LetStmt(write_stage, simplify(binop("mod", k - start + d, const(stages)), bounds), loc),
    ]
    if copies:
        head.append(AsyncWait("cp.async", d - 1, loc))
    if ring is not None:
        head.append(ring.wait(k - start, read_stage, simp))
        head.append(ring.issue(k, k + d, write_stage, binop("lt", k + d, stop), simp))
    # the issue reads tile k + d, so its predicate is written in terms of the substituted var
    if copies:
        # where tile k + d exists, k <= stop - 1 - d (a constant trip count of more than d
        # tiles: the copies' bounds checks then fold to the tile check; otherwise they stay)
        where_more = None
        if isinstance(start, Const) and isinstance(stop, Const) and stop.value - 1 - d >= start.value:
            where_more = dict(bounds)
            where_more[id(k)] = (int(start.value), int(stop.value) - 1 - d)
        head.extend(_issue(c, plan, k, k + d, write_stage, binop("lt", k + d, stop), bounds, where_more)
                    for c in copies)
        head.append(AsyncCommit("cp.async", loc))
    body = [_retarget(s, plan, read_stage) for s in rest]
    annotations = tuple(a for a in loop.annotations if a[0] != TILE_COPIES) + (("async_stages", stages),)
    if ring is not None:
        annotations += (("tma_stages", tuple(plan.old[key].name for key in tma)),)
    new_loop = For(k, start, stop, loop.step, loop.kind, SeqStmt(tuple(head + body), loc), annotations, loc)
    out = prologue + [new_loop] + ([AsyncWait("cp.async", 0, loc)] if copies else []) + \
        ([AsyncWait("wgmma", 0, loc)] if relaxed is not None else [])
    replaced.update({id(b): plan.new[key] for key, b in plan.old.items()})
    if ring is not None:
        added.append((ring.buffers, ring.init()))
    seq = SeqStmt(tuple(out), loc)
    if early is not None and ring is not None and not copies:
        early[id(seq)] = {id(s) for s in prologue}  # option early_tma_prologue (early_prologue.py)
    return seq


def _ws_loop(loop: For, plan: _Plan, ring: TmaRing, rest: list, stages: int, names: set, simp,
             replaced: dict, added: list, ws: WsPlan) -> Stmt:
    """The consumer side of a warp-specialized loop (its producer goes to `ws`): wait for the
    tile, the body on its stage, release the stage (tilecore.lower.warp_specialize).

    With wgmma consumers whose wait `relax_wgmma_wait` may relax, iteration k keeps its group
    in flight (`wait_group 1`) and releases stage (k - 1) % s instead of its own: that wait
    retired group k - 1, the last reader of that stage, so the producer refills it while the
    tensor cores still run group k (they never drain between k tiles). After the loop a
    `wait_group 0` retires the last group and the last stage is released."""
    k, loc = loop.var, loop.loc
    ring.with_empty(_fresh("tma_empty", names), ws.split)
    read_stage = Var(_fresh("stage", names))
    # the ring's k-tile count: from the loop's start, plus the tiles a persistent block ran
    # before this one (tilecore.lower.warp_specialize); 0 for a block of one tile
    base = ws.base if ws.base is not None else const(0)
    index = simp(base + (k - loop.start))
    head = [LetStmt(read_stage, simp(binop("mod", index, const(stages))), loc),
            ring.wait(index, read_stage, simp)]
    relaxed = relax_wgmma_wait(rest)
    ws.relaxed.append(relaxed is not None)
    ws.trips.append(simp(loop.stop - loop.start))
    shift = None
    sk = ws.sk
    if sk is not None and not sk.used and relaxed is not None and isinstance(loop.start, Const) \
            and loop.start.value == 0 and isinstance(ws.trips[-1], Const):
        # stream-K (tilecore.lower.stream_k): the loop runs a unit's k_count steps from its
        # k_first; the persistent schedule binds both (a whole tile where it cuts none)
        sk.used = True
        loop = replace(loop, stop=sk.k_count)
        shift = sk.k_first
    after: list[Stmt] = []
    if relaxed is None:
        body = [_retarget(s, plan, read_stage) for s in rest] + [ring.release(read_stage)]
    else:
        prev = simp(binop("mod", index + (stages - 1), const(stages)))
        body = [_retarget(s, plan, read_stage) for s in relaxed] + [
            IfThenElse(simp(binop("gt", k, loop.start)), ring.release(prev), None, loc)]
        last = simp(binop("mod", base + (loop.stop - 1 - loop.start), const(stages)))
        ran = simp(binop("gt", loop.stop, loop.start))
        tail = ring.release(last)
        after = [AsyncWait("wgmma", 0, loc),
                 tail if isinstance(ran, Const) and ran.value else IfThenElse(ran, tail, None, loc)]
    annotations = tuple(a for a in loop.annotations if a[0] != TILE_COPIES) + (
        ("async_stages", stages), ("tma_stages", tuple(b.name for b in plan.old.values())),
        ("warp_specialized", True))
    ws.producers.append(ring.producer(loop, lambda name: _fresh(name, names), simp, ws.producer_thread, base,
                                      shift))
    replaced.update({id(b): plan.new[key] for key, b in plan.old.items()})
    added.append((ring.buffers, ring.init()))
    new_loop = For(k, loop.start, loop.stop, loop.step, loop.kind, SeqStmt(tuple(head + body), loc),
                   annotations, loc)
    return SeqStmt((new_loop, *after), loc) if after else new_loop


def _nested(loop: For, body: Stmt) -> bool:
    """Whether `loop` sits inside another loop of `body` (it may then run more than once)."""
    return any(isinstance(n, For) and n is not loop and any(m is loop for m in walk(n.body))
               for n in walk(body))


def _fresh(base: str, names: set) -> str:
    name, n = base, 0
    while name in names:
        n += 1
        name = f"{base}_{n}"
    names.add(name)
    return name


def async_pipeline(kernel: ThreadKernel, facts: TargetFacts, tma: bool = True,
                   warp_specialize: bool = True, persistent_any: bool = False,
                   early_prologue: bool = False, hints=None) -> ThreadKernel:
    """`kernel` with its T.Pipelined loops turned into multi-stage asynchronous-copy pipelines
    where the target has asynchronous copies and the loop's copies qualify (module docstring);
    TMA stages where the target has TMA and `tma`, warp-specialized where every staged loop
    qualifies and `warp_specialize` (tilecore.lower.tma_pipeline, .warp_specialize);
    `persistent_any`: persistent tiles also for a staged loop that is not a bare GEMM main loop
    (option `ws_persistent_any`, warp_specialize._persistent); `early_prologue`: the prologues
    of TMA loops without a producer move up past what cannot interact with them (option
    `early_tma_prologue`, tilecore.lower.early_prologue); `hints`: the user's register hints
    for the warp-specialized kernel (tilecore.ir.reg_budget.RegHints)."""
    if tma and warp_specialize and ws_possible(kernel, facts):
        out = _pipelines(kernel, facts, True, WsPlan(kernel, facts, persistent_any, hints))
        if out is not None:
            return out
    return _pipelines(kernel, facts, tma, None, early_prologue) or kernel


def _staged(n) -> bool:
    """Whether `n` is a loop this pass may pipeline (T.Pipelined with at least two stages)."""
    return isinstance(n, For) and (n.annotation("num_stages", 0) or 0) >= 2


def kernel_bounds(kernel: ThreadKernel) -> dict:
    """Variable ranges that hold everywhere in `kernel`: block indices within the grid, the
    thread index, and each let-bound integer whose value's range follows from those (a KV head
    `by // groups`): the copies' bounds checks on them fold away, and with them the zero fill's
    per-copy address select (FlashAttention on sm_80: 16 copies per tile, ~5 instructions each)."""
    bounds: dict = {}
    for v, n in zip(kernel.block_vars, kernel.grid):
        n = n.value if isinstance(n, Const) else n
        bounds[id(v)] = (0, n - 1) if isinstance(n, int) and n >= 1 else (0, None)
    bounds[id(kernel.thread_var)] = (0, kernel.num_threads - 1)
    lets: dict = {}  # id(var) -> its range over every binding, None once one is unbounded
    for n in walk(kernel.body):
        if isinstance(n, LetStmt) and n.var.dtype.is_int and id(n.var) not in bounds:
            r = value_range(n.value, bounds)
            old = lets.get(id(n.var), r)
            lets[id(n.var)] = None if r is None or old is None else (min(r[0], old[0]), max(r[1], old[1]))
    bounds.update((k, r) for k, r in lets.items() if r is not None)
    return bounds


def _pipelines(kernel: ThreadKernel, facts: TargetFacts, use_tma: bool,
               ws: WsPlan | None, early_prologue: bool = False) -> ThreadKernel | None:
    """The pass proper; None when nothing changed or (with `ws`) warp specialization failed."""
    if not any(_staged(n) for n in walk(kernel.body)):
        return None  # no T.Pipelined loop with stages: nothing to rewrite
    names = {b.name for b in kernel.registers} | {b.name for b in kernel.shared}
    names |= {n.var.name for n in walk(kernel.body) if isinstance(n, (LetStmt, For))}
    bounds = kernel_bounds(kernel)
    budget = [sum(b.shape[0] * b.dtype.itemsize for b in kernel.shared)]
    replaced: dict = {}
    added: list = []  # (mbarrier buffer, its initialization) per TMA ring
    early: dict | None = {} if early_prologue and ws is None else None

    def fn(n):
        if _staged(n):
            return _pipeline_loop(n, kernel, facts, budget, names, bounds, replaced, added, use_tma, ws,
                                  early)
        return None

    body = rewrite(kernel.body, fn)
    if early:
        body = hoist_prologues(body, early)
    if not replaced:
        return None
    shared = tuple(replaced.get(id(b), b) for b in kernel.shared)
    shared += tuple(b for bars, _ in added for b in bars)
    if ws is not None:
        return assemble(kernel, ws, body, [init for _, init in added], shared)
    if added:  # mbarriers are initialized once, at the kernel's start
        body = SeqStmt(tuple(init for _, init in added) + (body,), kernel.loc)
    return ThreadKernel(kernel.grid, kernel.block_vars, kernel.thread_var, kernel.num_threads,
                        kernel.warp_size, shared, kernel.registers, body, kernel.loc)
