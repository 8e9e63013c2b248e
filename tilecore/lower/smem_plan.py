"""Shared-memory planning: buffers whose live ranges are disjoint share storage.

TileLang merges shared allocations with disjoint lifetimes (a backward pass's epilogue
staging buffers reuse the main loop's operand tiles); summing every allocation instead rejects
kernels that fit. The planner works on the statements at the top of a kernel body, the one
level where every thread is (or is about to be) at the same point of the program:

- a buffer's *live range* is the first..last top-level statement that mentions it: a loop, an
  `if` or a warp-specialized region is one statement, so buffers used inside one loop are never
  given the same bytes (a value may be carried from one iteration to the next);
- buffers are placed largest first at the lowest aligned byte offset that overlaps no placed
  buffer whose live range meets its own (first fit over an interval graph);
- at thread level, a buffer read *asynchronously* (a TMA store's source, a wgmma descriptor
  operand: the read completes at a later wait) and an mbarrier array keep bytes of their own;
- where buffer B reuses bytes of A, some thread may still be reading A while another writes B:
  `plan_kernel` inserts a block barrier before B's first statement unless one already lies
  between A's last statement and B's first. The emulator tracks the reused bytes as one storage,
  so a missing barrier is reported as a race (tests/test_smem_plan.py).

`tile_plan_bytes` answers the same question for a tile-level `KernelLaunch` (the portable limit
check of `tilecore.ir.static_checks`); `plan_kernel` attaches a `SharedPlan` to a `ThreadKernel`,
which the GPU renderers and the emulator lay shared memory out by.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir.buffer import Buffer
from ..ir.stmt import SeqStmt, Stmt
from ..ir.thread import MBARRIER_DTYPE, Barrier, IntrinsicCall, TmaLoad, TmaStore
from ..ir.visit import child_list

BASE_ALIGN = 16  # every shared buffer starts at a vector-width boundary (codegen/gpu.py)
TMA_ALIGN = 1024  # a TMA box's shared address (tilecore_cuda.render_async.TMA_SMEM_ALIGN)


@dataclass(frozen=True)
class SharedPlan:
    """Byte offsets of a kernel's shared buffers inside one allocation of `total` bytes.

    `offsets` pairs each buffer of `ThreadKernel.shared` with its offset; `aliased` lists the
    buffers that share bytes with another (their accesses are race-checked as one storage)."""

    IR_LEAF = True  # a table, not IR: traversals do not enter it

    offsets: tuple
    total: int
    aliased: tuple

    def offset_of(self, buf: Buffer) -> int:
        """The byte offset of `buf`."""
        for b, off in self.offsets:
            if b is buf:
                return off
        raise KeyError(buf.name)


def nbytes(buf: Buffer) -> int:
    """Bytes of a shared buffer (1-D at thread level, any static shape at tile level)."""
    return int(buf.numel) * buf.dtype.bits // 8


def top_level(body) -> list:
    """The statements at the top of a kernel body, nested sequences flattened."""
    if isinstance(body, SeqStmt):
        return [x for s in body.stmts for x in top_level(s)]
    return [body]


_FACTS = "_smem_facts"  # per-statement cache of `_facts` (on the frozen statement itself)


def _facts(stmt) -> tuple[tuple, tuple, tuple]:
    """(shared buffers mentioned, buffers read asynchronously, TMA-moved buffers) of a statement,
    kept on the statement: the planner runs several times per kernel (each `planned_bytes` of a
    pass that grows buffers, then `plan_kernel`), and a pass that rebuilds a loop keeps most of
    the statements inside it, so the facts of a statement are assembled from those of the
    statements nested in it (walking only its own expressions). Buffers, not their ids, are kept
    (a copy of the statement keeps meaning the same buffers)."""
    d = getattr(stmt, "__dict__", None)
    got = d.get(_FACTS) if d is not None else None
    if got is not None:
        return got
    mentions: dict[int, Buffer] = {}
    async_read: dict[int, Buffer] = {}
    tma: dict[int, Buffer] = {}
    stack = [stmt]
    while stack:
        n = stack.pop()
        if isinstance(n, Buffer):
            if n.scope == "shared":
                mentions[id(n)] = n
            continue  # a buffer is a leaf, as for `walk`
        if n is not stmt and isinstance(n, Stmt):
            m, a, t = _facts(n)
            mentions.update((id(b), b) for b in m)
            async_read.update((id(b), b) for b in a)
            tma.update((id(b), b) for b in t)
            continue
        if isinstance(n, TmaStore):
            async_read[id(n.src)] = n.src
            tma[id(n.src)] = n.src
        elif isinstance(n, TmaLoad):
            tma[id(n.dst)] = n.dst
        elif isinstance(n, IntrinsicCall):
            for spec, ref in zip(n.intrinsic.operands, n.operands):
                if spec.space == "desc":
                    async_read[id(ref.buffer)] = ref.buffer
        stack.extend(child_list(n))
    got = (tuple(mentions.values()), tuple(async_read.values()), tuple(tma.values()))
    if d is not None and getattr(type(stmt), "__dataclass_params__", None) is not None \
            and type(stmt).__dataclass_params__.frozen:
        d[_FACTS] = got
    return got


def _mentions(stmt) -> set[int]:
    return {id(b) for b in _facts(stmt)[0]}


def live_ranges(stmts: list, bufs) -> dict[int, tuple[int, int]]:
    """id(buffer) -> (first, last) index into `stmts` of the statements that mention it."""
    out: dict[int, tuple[int, int]] = {}
    for i, s in enumerate(stmts):
        for key in _mentions(s):
            lo, _ = out.get(key, (i, i))
            out[key] = (lo, i)
    # a buffer no statement mentions (an unused allocation) still gets bytes of its own
    return {id(b): out.get(id(b), (0, len(stmts))) for b in bufs}


def pack(bufs, ranges: dict, align_of) -> tuple[dict[int, int], int]:
    """First-fit placement: id(buffer) -> byte offset, and the total bytes."""
    placed: list[tuple[int, int, tuple[int, int]]] = []  # (offset, end, live range)
    offsets: dict[int, int] = {}
    order = sorted(bufs, key=lambda b: (-nbytes(b), ranges[id(b)][0]))
    for b in order:
        size, (lo, hi), align = nbytes(b), ranges[id(b)], align_of(b)
        busy = sorted((o, e) for o, e, (l2, h2) in placed if l2 <= hi and lo <= h2)
        off = 0
        for o, e in busy:
            if off + size <= o:
                break
            off = max(off, -(-e // align) * align)
        offsets[id(b)] = off
        placed.append((off, off + size, (lo, hi)))
    return offsets, max((e for _, e, _ in placed), default=0)


def tile_plan_bytes(launch) -> int:
    """Planned shared bytes of a tile-level `KernelLaunch` (one copy of each buffer)."""
    bufs = [b for b in launch.allocs
            if isinstance(b, Buffer) and b.scope == "shared" and b.numel is not None]
    if not bufs:
        return 0
    ranges = live_ranges(top_level(launch.body), bufs)
    return pack(bufs, ranges, lambda b: BASE_ALIGN)[1]


def _async_read(stmts) -> set[int]:
    """Buffers whose reads complete after the statement (TMA store sources, wgmma descriptors)."""
    return {id(b) for s in stmts for b in _facts(s)[1]}


def _tma(stmts) -> set[int]:
    return {id(b) for s in stmts for b in _facts(s)[2]}


def thread_plan(kernel, stmts: list, resized: dict | None = None
                ) -> tuple[SharedPlan, dict[int, tuple[int, int]]]:
    """The plan of a `ThreadKernel`'s shared buffers over its top-level statements `stmts`;
    with `resized`, as if each buffer `b` with `id(b)` in it were `resized[id(b)]` over the
    same live range (how a pass that grows buffers checks the limit before rewriting)."""
    old = list(kernel.shared)
    ranges = live_ranges(stmts, old)
    whole = (0, len(stmts))
    pinned = _async_read(stmts)
    bufs = [(resized or {}).get(id(b), b) for b in old]
    for o, b in zip(old, bufs):
        ranges[id(b)] = whole if id(o) in pinned or o.dtype == MBARRIER_DTYPE else ranges[id(o)]
    tma_filled = _tma(stmts)
    tma = {id(b) for o, b in zip(old, bufs) if id(o) in tma_filled}

    def align_of(b: Buffer) -> int:
        need = getattr(b.layout, "align_bytes", None)
        return max(BASE_ALIGN, need(b.dtype.itemsize) if need else 0,
                   TMA_ALIGN if id(b) in tma else 0)

    offsets, total = pack(bufs, ranges, align_of)
    spans = {id(b): (offsets[id(b)], offsets[id(b)] + nbytes(b)) for b in bufs}
    aliased = tuple(b for b in bufs if any(
        c is not b and spans[id(c)][0] < spans[id(b)][1] and spans[id(b)][0] < spans[id(c)][1]
        for c in bufs))
    plan = SharedPlan(tuple((b, offsets[id(b)]) for b in bufs), total, aliased)
    return plan, ranges


def _barrier_points(plan: SharedPlan, ranges: dict, stmts: list) -> set[int]:
    """Indices of top-level statements a block barrier must precede: the first statement of a
    buffer reusing bytes of one whose last statement comes earlier, with no block barrier
    between the two."""
    spans = {id(b): (o, o + nbytes(b)) for b, o in plan.offsets}
    barriers = [i for i, s in enumerate(stmts) if isinstance(s, Barrier) and s.scope == "block"]
    need: set[int] = set()
    for a in plan.aliased:
        for b in plan.aliased:
            sa, sb = spans[id(a)], spans[id(b)]
            if a is b or not (sa[0] < sb[1] and sb[0] < sa[1]):
                continue
            last, first = ranges[id(a)][1], ranges[id(b)][0]
            if last < first and not any(last < i < first for i in barriers):
                need.add(first)
    return need


def plan_kernel(kernel):
    """`kernel` with a `SharedPlan` attached when reuse saves bytes, and a block barrier before
    each reuse that needs one (module docstring); else `kernel` unchanged."""
    if not kernel.shared:
        return kernel
    body = kernel.body
    stmts = top_level(body)
    plan, ranges = thread_plan(kernel, stmts)
    if plan.total >= sum(-(-nbytes(b) // BASE_ALIGN) * BASE_ALIGN for b in kernel.shared):
        return kernel
    need = _barrier_points(plan, ranges, stmts)
    out = []
    for i, s in enumerate(stmts):
        if i in need:
            out.append(Barrier("shared memory reused by another buffer", s.loc))
        out.append(s)
    new = SeqStmt(tuple(out), body.loc) if len(out) > 1 else out[0]
    return replace(kernel, body=new, shared_plan=plan)


def planned_bytes_resized(kernel, resized: dict) -> int:
    """The shared bytes `kernel` would need once planned with the buffers of `resized` grown
    (`thread_plan`'s `resized`). Buffers with disjoint live ranges (an epilogue's staging tile
    after the main loop) share bytes, so a summed budget would refuse stages that fit."""
    if not kernel.shared:
        return 0
    return thread_plan(kernel, top_level(kernel.body), resized)[0].total


def planned_bytes(kernel) -> int:
    """The shared bytes a `ThreadKernel` needs once planned (before or after `plan_kernel`)."""
    if not kernel.shared:
        return 0
    plan = kernel.shared_plan or thread_plan(kernel, top_level(kernel.body))[0]
    return min(plan.total, sum(nbytes(b) for b in kernel.shared))
