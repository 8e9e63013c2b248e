"""Ping-pong consumers: two consumer warpgroups of a persistent GEMM on alternate tiles.

With the option `ws_pingpong` (pass config `tilecore.ws_pingpong`), a persistent
warp-specialized kernel (tilecore.lower.warp_specialize) whose consumer is one warpgroup (a
tile program of 128 threads: a 128x128 tile's accumulators fill one warpgroup's registers)
gets a second consumer warpgroup. Consumer warpgroup w runs the block's tiles j = w, w + 2, ...
(tile t = block_id + j * G of the G-block grid), so while one runs its tile's main loop the
other runs its epilogue and the tensor cores stay busy:

    threads 0..127:   tiles j = 0, 2, 4, ...    threads 128..255: tiles j = 1, 3, 5, ...
    threads 256..383: the producer (one ring of stages, filled tile after tile as before)

Both walk the one stage ring in tile order (`tile_base` = j x trips is unchanged). Before its
main loop, warpgroup w waits on mbarrier `order[w]` until the other warpgroup finished issuing
the previous tile's main loop (its arrival, all 128 threads, after that loop). This keeps the
main loops in tile order and is also what makes the ring's parity waits sound: warpgroup w
cannot look at a stage's phase for tile j while the other still waits on that stage for
tile j - 1 (two phases apart, the same parity). Each stage is released by the 128 threads
that read it (the ring's count is one warpgroup's). Warpgroup 1's copy of the consumer numbers
its threads from 0 (`tx - 128`), has fresh loop and let variables (the emulator's tasks share
one environment), its own copies of the shared buffers the consumer writes (the epilogue's
staging tile) and named barrier 2 instead of 1. The producer warpgroup moves to threads
256..383; setmaxnreg splits the register file over three warpgroups.

Runs after insert-barriers (the consumer's barriers are placed for one warpgroup, then
renumbered). Where the copies do not fit the shared memory, or the kernel is not of that
form, it is left as it is.
"""

from __future__ import annotations

import dataclasses

from ..ir.buffer import Buffer
from ..ir.expr import Var, binop, const
from ..ir.reg_budget import RegHints
from ..ir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt
from ..ir.thread import (
    CONSUMER_BARRIER_ID,
    MBARRIER_DTYPE,
    AsyncFence,
    Atomic,
    Barrier,
    IntrinsicCall,
    MbarrierArrive,
    MbarrierInit,
    MbarrierWait,
    MemStore,
    ThreadKernel,
    VecMove,
    WarpSpecialized,
)
from ..ir.visit import rewrite, substitute, walk
from .prefetch import flat_stmts
from .warp_specialize import PRODUCER_THREADS, register_split

WARPGROUP = 128
ALIGN = 1024  # shared buffers start on 1024-byte boundaries (swizzled tiles)
# the suspend-time hint of option `mbarrier_suspend_hint` (CUTLASS's value: 10 ms, a limit the
# waits never reach; the hardware wakes the thread when the phase completes)
SUSPEND_NS = 10_000_000


def _nbytes(buf: Buffer) -> int:
    n = buf.dtype.itemsize
    for e in buf.shape:
        n *= int(e)
    return n


def _written(node) -> list:
    """The shared buffers `node` writes with ordinary stores (the consumer's own data)."""
    out: dict[int, Buffer] = {}
    for n in walk(node):
        buf = None
        if isinstance(n, (MemStore, Atomic)):
            buf = n.buffer
        elif isinstance(n, VecMove):
            buf = n.dst
        if buf is not None and buf.scope == "shared":
            out[id(buf)] = buf
        if isinstance(n, IntrinsicCall):
            for spec, ref in zip(n.intrinsic.operands, n.operands):
                if ref.buffer.scope == "shared" and spec.role == "out":
                    out[id(ref.buffer)] = ref.buffer
    return list(out.values())


def _main_loop(body: Stmt) -> int | None:
    """Index, among the tile loop body's top-level statements, of the staged main loop (the
    first loop that waits on an mbarrier)."""
    for i, s in enumerate(flat_stmts(body)):
        if isinstance(s, For) and any(isinstance(n, MbarrierWait) for n in walk(s)):
            return i
    return None


def _tile_loop(kernel: ThreadKernel, ws: WarpSpecialized) -> For | None:
    """The consumer's persistent tile loop (`for tile in serial(block_id, tiles, G)`), if the
    consumer is exactly that."""
    stmts = flat_stmts(ws.consumer)
    if len(stmts) != 1 or not isinstance(stmts[0], For) or len(kernel.grid) != 1:
        return None
    loop = stmts[0]
    if loop.start is not kernel.block_vars[0] or not isinstance(loop.step, int):
        return None
    return loop if _main_loop(loop.body) is not None else None


def _renumber(s: Stmt) -> Stmt:
    """Named barrier 1 of the consumer as barrier 2 (the second warpgroup's own)."""
    def fn(n):
        if isinstance(n, Barrier) and n.scope == "named" and n.barrier_id == CONSUMER_BARRIER_ID:
            return dataclasses.replace(n, barrier_id=CONSUMER_BARRIER_ID + 1)
        return None

    return rewrite(s, fn)


def _swap_buffers(s: Stmt, mapping: dict) -> Stmt:
    def fn(n):
        if isinstance(n, Buffer) and id(n) in mapping:
            return mapping[id(n)]
        return None

    return rewrite(s, fn)


def _arm(kernel: ThreadKernel, loop: For, order: Buffer, w: int, fresh) -> Stmt:
    """Consumer warpgroup w's tile loop (module docstring)."""
    loc = loop.loc
    grid = loop.step
    stmts = list(flat_stmts(loop.body))
    at = _main_loop(loop.body)
    mine = binop("div", binop("sub", binop("sub", loop.var, loop.start), const(grid * w)), const(2 * grid))
    if w == 0:  # its first tile waits for nobody; tile i waits for the other's tile i - 1
        parity = binop("mod", binop("sub", mine, const(1)), const(2))
        first = binop("gt", mine, const(0))
        wait: Stmt = IfThenElse(first, MbarrierWait(order, const(0), parity, loc), None, loc)
    else:
        wait = MbarrierWait(order, const(1), binop("mod", mine, const(2)), loc)
    done = MbarrierArrive(order, const(1 - w), 0, loc)
    body = SeqStmt(tuple(stmts[:at]) + (wait, stmts[at], done) + tuple(stmts[at + 1:]), loc)
    start = loop.start if w == 0 else binop("add", loop.start, const(grid))
    out: Stmt = For(loop.var, start, loop.stop, 2 * grid, loop.kind, body, loop.annotations, loc)
    if w == 1:
        tx = kernel.thread_var
        bound = {}
        for n in walk(out):
            if isinstance(n, (LetStmt, For)) and n.var is not tx:
                bound[n.var] = Var(fresh(n.var.name), n.var.dtype)
        out = substitute(out, {**bound, tx: binop("sub", tx, const(WARPGROUP))})
        out = _renumber(out)
    return out


def pingpong(kernel: ThreadKernel, facts, hints: RegHints | None = None) -> ThreadKernel:
    """`kernel` with ping-pong consumers (module docstring), or unchanged; `hints`: the user's
    register hints (warp_specialize.register_split), re-applied to the two consumer groups."""
    top = list(flat_stmts(kernel.body))
    at = next((i for i, s in enumerate(top) if isinstance(s, WarpSpecialized)), None)
    if at is None:
        return kernel
    ws = top[at]
    if ws.split != WARPGROUP or ws.groups != 1 or kernel.num_threads != WARPGROUP + PRODUCER_THREADS:
        return kernel
    loop = _tile_loop(kernel, ws)
    if loop is None:
        return kernel
    copies = {id(b): Buffer(f"{b.name}_wg1", b.shape, b.dtype, b.scope, layout=b.layout)
              for b in _written(ws.consumer)}
    order = Buffer("pingpong_order", (2,), MBARRIER_DTYPE, "shared")
    shared = tuple(kernel.shared) + tuple(copies.values()) + (order,)
    limit = facts.shared_memory_bytes or 0
    if not limit or sum(_nbytes(b) + ALIGN for b in shared) > limit:
        return kernel
    names = {n.name for n in walk(kernel.body) if isinstance(n, Var)}

    def fresh(base: str) -> str:
        k, name = 1, f"{base}_wg1"
        while name in names:
            k, name = k + 1, f"{base}_wg1_{k}"
        names.add(name)
        return name

    tx = kernel.thread_var
    loc = ws.loc
    arm0 = _arm(kernel, loop, order, 0, fresh)
    arm1 = _swap_buffers(_arm(kernel, loop, order, 1, fresh), copies)
    consumer = IfThenElse(binop("lt", tx, const(WARPGROUP)), arm0, arm1, loc)
    producer = substitute(ws.producer, {tx: binop("sub", tx, const(WARPGROUP))})
    regs = (ws.producer_regs, ws.consumer_regs)
    if ws.consumer_regs:  # three warpgroups share the register file now
        regs = register_split(hints, 2 * WARPGROUP)
    node = dataclasses.replace(ws, split=2 * WARPGROUP, producer=producer, consumer=consumer,
                               producer_regs=regs[0], consumer_regs=regs[1], groups=2)
    init = IfThenElse(binop("eq", tx, const(0)), SeqStmt((
        MbarrierInit(order, const(0), WARPGROUP, loc), MbarrierInit(order, const(1), WARPGROUP, loc),
        AsyncFence("mbarrier_init", loc)), loc), None, loc)
    # the block barrier that orders the rings' initialization before the roles orders this too
    bar = max((i for i in range(at) if isinstance(top[i], Barrier) and top[i].scope == "block"), default=None)
    if bar is None:
        head = top[:at] + [init, Barrier("pingpong_order initialized", loc)]
    else:
        head = top[:bar] + [init] + top[bar:at]
    body = SeqStmt(tuple(head) + (node,) + tuple(top[at + 1:]), kernel.body.loc)
    return ThreadKernel(kernel.grid, kernel.block_vars, tx, 2 * WARPGROUP + PRODUCER_THREADS,
                        kernel.warp_size, shared, kernel.registers, body, kernel.loc)


def suspend_hints(kernel: ThreadKernel) -> ThreadKernel:
    """`kernel` with every mbarrier wait carrying the suspend-time hint SUSPEND_NS where it is
    warp-specialized (option `mbarrier_suspend_hint`: the waiting warpgroup of a ping-pong pair,
    the producer on its empty ring and the consumers on the full ring are parked rather than
    re-polling); other kernels unchanged."""
    if not any(isinstance(n, WarpSpecialized) for n in walk(kernel.body)):
        return kernel

    def fn(n):
        if isinstance(n, MbarrierWait) and not n.suspend_ns:
            return dataclasses.replace(n, suspend_ns=SUSPEND_NS)
        return None

    return dataclasses.replace(kernel, body=rewrite(kernel.body, fn))
