"""Warp specialization of TMA pipelines (used by the `async-pipeline` pass).

On targets whose facts say `warp_specialize` (cuda sm_90 / sm_90a), when every pipelined loop
the pass stages is filled entirely by TMA (tilecore.lower.tma_pipeline) and sits at the top of
the kernel body, and the staged kernel needs more than half the multiprocessor's shared memory
(one resident block: the extra warpgroup then costs no occupancy; the fact value "always" drops
this condition), the block grows by one producer warpgroup (threads `T .. T+127` for a kernel
of `T` threads, so the consumers keep their thread indices and every layout stays valid):

    init rings (thread 0); uniform lets of the kernel's top (block-index arithmetic)
    WarpSpecialized(split=T):
      producer: thread T, per loop: for each tile i: wait empty[i % s] (parity (i // s + 1) % 2,
                which a fresh mbarrier passes), arm full[i % s] with the stage's bytes, TMA copies
      consumer: the kernel body; per loop iteration: wait full[i % s] (parity (i // s) % 2),
                the body reading stage i % s, then every consumer thread arrives on empty[i % s]

Any number of pipelined loops per block works: each has its own rings, and the producer issues
them in program order (a loop's tiles can only depend on block indices, symbolic sizes and the
hoisted lets, which is checked). The consumers synchronize among themselves with named barrier
1 over their T threads (`insert-barriers` places them), never the block barrier. With the fact
`setmaxnreg` (sm_90a) the producer gives registers back (`setmaxnreg.dec` to 40) and the
consumers take them (`.inc`, as many as the register file allows, at most 240).
"""

from __future__ import annotations

from ..ir.expr import Var
from ..ir.stmt import For, LetStmt, SeqStmt, Stmt
from ..ir.thread import LaneTable, MemLoad, Shuffle, ThreadKernel, WarpSpecialized
from ..ir.visit import walk
from .prefetch import flat_stmts

PRODUCER_THREADS = 128  # one warpgroup: setmaxnreg works per warpgroup
PRODUCER_REGS = 40
REGISTER_FILE = 65536  # 32-bit registers per multiprocessor (one block resident)


class WsPlan:
    """What the pipeline pass collects for one kernel in warp-specialized mode."""

    def __init__(self, kernel: ThreadKernel, facts):
        self.split = kernel.num_threads
        self.producer_thread = kernel.num_threads  # the elected producer: first of its warpgroup
        self.producers: list[Stmt] = []
        self.ok = True
        self.top = {id(s) for s in flat_stmts(kernel.body)}
        self.setmaxnreg = bool(facts.get("setmaxnreg"))
        # "always", or True: only where the staged kernel's shared memory lets one block per
        # multiprocessor run anyway (measured on the H200 with mma.sync consumers: a producer
        # warpgroup next to 3 resident blocks cost occupancy, 0.59 ms against 0.38 ms)
        self.always = facts.get("warp_specialize") == "always"
        self.shared_limit = facts.shared_memory_bytes or 0


def ws_possible(kernel: ThreadKernel, facts) -> bool:
    """Whether the target and the block size allow a producer warpgroup."""
    return (bool(facts.get("warp_specialize")) and kernel.num_threads % PRODUCER_THREADS == 0
            and kernel.num_threads + PRODUCER_THREADS <= (facts.max_threads or 1024))


def _bound(node) -> set:
    """Ids of the variables bound inside `node` (lets and loop counters)."""
    return {id(n.var) for n in walk(node) if isinstance(n, (LetStmt, For))}


def _uniform_value(e, allowed: set, kernel_bound: set) -> bool:
    """A value every thread computes alike from block indices, sizes and `allowed` lets."""
    for n in walk(e):
        if isinstance(n, (MemLoad, Shuffle, LaneTable)):
            return False
        if isinstance(n, Var) and id(n) in kernel_bound and id(n) not in allowed:
            return False
    return True


def assemble(kernel: ThreadKernel, plan: WsPlan, body: Stmt, inits: list,
             shared: tuple) -> ThreadKernel | None:
    """The warp-specialized kernel (module docstring), or None when a producer would need a
    value only the consumers compute."""
    if not plan.ok or not plan.producers:
        return None
    used = sum(b.shape[0] * b.dtype.itemsize for b in shared)
    if not plan.always and used * 2 <= plan.shared_limit:
        return None  # two or more blocks fit: the extra warpgroup would cost occupancy
    kernel_bound = _bound(body) | {id(kernel.thread_var)}
    allowed = {id(v) for v in kernel.block_vars}
    hoist: list[Stmt] = []
    rest: list[Stmt] = []
    for s in flat_stmts(body):
        if isinstance(s, LetStmt) and _uniform_value(s.value, allowed, kernel_bound):
            hoist.append(s)
            allowed.add(id(s.var))
        else:
            rest.append(s)
    producer = SeqStmt(tuple(plan.producers), kernel.loc)
    inside = _bound(producer)
    for n in walk(producer):
        if isinstance(n, Var) and n is not kernel.thread_var and id(n) in kernel_bound \
                and id(n) not in allowed and id(n) not in inside:
            return None
    regs = (0, 0)
    if plan.setmaxnreg:
        cons = (REGISTER_FILE - PRODUCER_THREADS * PRODUCER_REGS) // plan.split // 8 * 8
        regs = (PRODUCER_REGS, min(240, cons))
    ws = WarpSpecialized(plan.split, producer, SeqStmt(tuple(rest), kernel.loc), regs[0], regs[1], kernel.loc)
    new_body = SeqStmt(tuple(inits) + tuple(hoist) + (ws,), kernel.loc)
    return ThreadKernel(kernel.grid, kernel.block_vars, kernel.thread_var, plan.split + PRODUCER_THREADS,
                        kernel.warp_size, shared, kernel.registers, new_body, kernel.loc)
