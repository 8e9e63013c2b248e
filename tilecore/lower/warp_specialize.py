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
consumers take them (`.inc`, as many as the register file allows, at most 240); TileLang's
`T.annotate_producer_reg_dealloc(n)` / `T.annotate_consumer_reg_alloc(n)` set these counts and
`T.no_set_max_nreg()` leaves both out (`register_split`; the hints reach this module as the
function's attr "reg_alloc", tilecore.passes.reg_budget).
"""

from __future__ import annotations

from ..errors import TileShapeError
from ..ir.expr import Var, binop, const, const_int
from ..ir.reg_budget import RegHints
from ..ir.stmt import For, LetStmt, SeqStmt, Stmt
from ..ir.thread import LaneTable, MemLoad, Shuffle, ThreadKernel, WarpSpecialized
from ..ir.visit import substitute, walk
from .prefetch import flat_stmts
from .stream_k import applies, build, stream_k_for

PRODUCER_THREADS = 128  # one warpgroup: setmaxnreg works per warpgroup
DEFAULT_MULTIPROCESSORS = 132  # H100 SXM / H200: the persistent grid where facts do not say
PRODUCER_REGS = 40
REGISTER_FILE = 65536  # 32-bit registers per multiprocessor (one block resident)


class WsPlan:
    """What the pipeline pass collects for one kernel in warp-specialized mode."""

    def __init__(self, kernel: ThreadKernel, facts, persistent_any: bool = False,
                 hints: RegHints | None = None):
        self.split = kernel.num_threads
        self.producer_thread = kernel.num_threads  # the elected producer: first of its warpgroup
        self.producers: list[Stmt] = []
        self.ok = True
        self.top = {id(s) for s in flat_stmts(kernel.body)}
        self.setmaxnreg = bool(facts.get("setmaxnreg"))
        self.hints = hints  # the user's register hints (register_split)
        # "always", or True: only where the staged kernel's shared memory lets one block per
        # multiprocessor run anyway (measured on the H200 with mma.sync consumers: a producer
        # warpgroup next to 3 resident blocks cost occupancy, 0.59 ms against 0.38 ms)
        self.always = facts.get("warp_specialize") == "always"
        self.shared_limit = facts.shared_memory_bytes or 0
        # persistent tile scheduling (module docstring): decided here, from the grid, so the
        # rings can count tiles across a block's tiles; `base` is that count's offset
        self.relaxed = []  # per staged loop: whether its wgmma wait was relaxed
        self.trips = []  # per staged loop: its trip count
        self.persistent = persistent_grid(kernel, facts)
        self.base = Var("tile_base") if self.persistent else None
        self.persistent_any = persistent_any  # option ws_persistent_any: any body (_persistent)
        self.sk = stream_k_for(kernel, self.persistent)  # T.stream_k: tilecore.lower.stream_k


def persistent_grid(kernel: ThreadKernel, facts) -> int | None:
    """The persistent grid size (one block per multiprocessor, fact `multiprocessors`, 132 on
    the H100 / H200 where it is not stated) when `kernel`'s grid is constant and has more tiles
    than that and the target's fact `persistent` is not False; else None."""
    if not facts.get("persistent", True):
        return None
    sms = int(facts.get("multiprocessors", DEFAULT_MULTIPROCESSORS) or 0)
    dims = [const_int(g) for g in kernel.grid]
    if sms < 1 or any(d is None for d in dims):
        return None
    tiles = 1
    for d in dims:
        tiles *= d
    return sms if tiles > sms else None


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
    regs = register_split(plan.hints, plan.split) if plan.setmaxnreg else (0, 0)
    consumer = SeqStmt(tuple(rest), kernel.loc)
    grid, block_vars = kernel.grid, kernel.block_vars
    registers = tuple(kernel.registers)
    tiled = _persistent(kernel, plan, hoist, producer, consumer)
    if tiled is not None:
        grid, block_vars, producer, consumer, extra = tiled
        registers += extra
        hoist = []
    else:
        if plan.sk is not None:  # T.stream_k where the schedule is not built: whole tiles
            producer, consumer = (plan.sk.plain(x, plan.trips[0]) for x in (producer, consumer))
        if plan.base is not None:  # rings written for a tile count: this block runs one tile
            hoist = [LetStmt(plan.base, const(0), kernel.loc)] + hoist
    ws = WarpSpecialized(plan.split, producer, consumer, regs[0], regs[1], kernel.loc)
    new_body = SeqStmt(tuple(inits) + tuple(hoist) + (ws,), kernel.loc)
    return ThreadKernel(grid, block_vars, kernel.thread_var, plan.split + PRODUCER_THREADS,
                        kernel.warp_size, shared, registers, new_body, kernel.loc)


def register_split(hints: RegHints | None, consumers: int) -> tuple[int, int]:
    """The (producer, consumer) setmaxnreg counts of a producer warpgroup and `consumers`
    consumer threads: (0, 0), none at all, under `T.no_set_max_nreg()`; the user's annotated
    counts where given; otherwise the producer keeps PRODUCER_REGS (less where an annotated
    consumer count needs them) and the consumers get what the register file leaves, at most
    240. Counts the register file cannot hold are a TileShapeError at the user's hint:
    `setmaxnreg.inc` would wait forever for registers nobody frees."""
    hints = hints or RegHints()
    if hints.off is not None:
        return 0, 0
    p = hints.producer.count if hints.producer is not None else None
    c = hints.consumer.count if hints.consumer is not None else None
    if p is None:
        p = PRODUCER_REGS if c is None else \
            max(24, min(PRODUCER_REGS, (REGISTER_FILE - consumers * c) // PRODUCER_THREADS // 8 * 8))
    if c is None:
        c = min(240, (REGISTER_FILE - PRODUCER_THREADS * p) // consumers // 8 * 8)
    total = PRODUCER_THREADS * p + consumers * c
    if total > REGISTER_FILE:
        h = hints.consumer or hints.producer
        given = " and ".join(x.text for x in hints.given)
        fit = (REGISTER_FILE - PRODUCER_THREADS * p) // consumers // 8 * 8
        raise TileShapeError(
            f"{given}: {PRODUCER_THREADS} producer threads x {p} + {consumers} consumer threads x {c} = "
            f"{total} registers, more than the {REGISTER_FILE} of the multiprocessor's register file "
            "(setmaxnreg.inc would wait forever for them)", h.loc,
            hint=f"lower the counts, e.g. T.annotate_consumer_reg_alloc({fit}) with a producer of {p}")
    return p, c


def _persistent(kernel: ThreadKernel, plan: WsPlan, hoist: list, producer: Stmt, consumer: Stmt):
    """(grid, block_vars, producer, consumer) of the persistent form, or None where it does not
    apply: one staged loop, whose wgmma wait was relaxed (a GEMM main loop: the body is the
    tensor-core issue alone; with `plan.persistent_any` any body, e.g. FlashAttention's forward
    over the key tiles), with a trip count every tile shares.

    Block b of the G = `plan.persistent` blocks runs tiles t = b, b + G, ... of the original
    grid (t in launch order: bx = t % gx, by = t // gx % gy, ...), both roles walking the same
    tiles; each role re-binds the original block indices and the hoisted lets per tile and the
    rings count the block's k tiles across its tiles (`tile_base` = tiles done x trip count), so
    the producer fills the next tile's stages while the consumers run the epilogue."""
    if plan.persistent is None or len(plan.relaxed) != 1 or not (plan.relaxed[0] or plan.persistent_any):
        return None
    trips = plan.trips[0]
    block = set(map(id, kernel.block_vars)) | {id(kernel.thread_var)}
    for h in hoist:  # a hoisted let of block-index arithmetic (a causal loop's length) is per tile
        if any(isinstance(n, Var) and id(n) in block for n in walk(h.value)):
            block.add(id(h.var))
    if any(isinstance(n, Var) and id(n) in block for n in walk(trips)):
        return None  # a trip count that depends on the tile
    dims = [const_int(g) for g in kernel.grid]
    tiles = 1
    for d in dims:
        tiles *= d
    sms = plan.persistent
    pid = Var("block_id")
    t = Var("tile")
    loc = kernel.loc

    def lets_of(t: Var) -> list:  # the original block indices of tile t, in launch order
        out, rest = [], t
        for v, d in zip(kernel.block_vars, dims):
            out.append(LetStmt(v, binop("mod", rest, const(d)), loc))
            rest = binop("div", rest, const(d))
        return out

    if applies(plan.sk, tiles, sms, trips):
        built = build(kernel, plan.sk, plan.split, plan.base, lets_of, hoist, producer, consumer, tiles,
                      sms, trips, pid)
        if built is not None:
            return (const(sms),), (pid,), *built
    if plan.sk is not None:
        producer, consumer = plan.sk.plain(producer, trips), plan.sk.plain(consumer, trips)
    lets = lets_of(t)
    lets.append(LetStmt(plan.base, binop("mul", binop("div", binop("sub", t, pid), const(sms)), trips), loc))

    def tile_loop(body: Stmt) -> Stmt:
        inner = SeqStmt(tuple(lets) + tuple(hoist) + (body,), loc)
        return For(t, pid, const(tiles), sms, "serial", inner, (), loc)

    # the producer's own copies of the per-tile variables: the two roles run concurrently (the
    # emulator's two tasks share one environment), each walking its own tile
    mine = [t, plan.base, *kernel.block_vars] + [h.var for h in hoist]
    fresh = {v: Var(f"{v.name}_produce", v.dtype) for v in mine}
    return (const(sms),), (pid,), substitute(tile_loop(producer), fresh), tile_loop(consumer), ()
