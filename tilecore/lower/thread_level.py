"""Lowering of thread-level kernels (tilecore.ir.thread_level) inside `lower-threads`.

A thread-level kernel's block-level scalar code is per-thread code already: every thread runs
it (stores included, no thread-0 guard), with `T.get_thread_binding()` the lowering's own thread
variable. Tile operations keep their collective meaning and are lowered as in tile programs, so
they must be reached by every thread: one under control flow that depends on the thread (a
branch on the thread index, a `T.ws` region) is a located TileError (`check_uniform_tile_ops`).

- `T.alloc_barrier` -> `MbarrierInit` of each mbarrier by thread 0, the init fence and a block
  barrier (at the top of the kernel, where TileLang initializes them);
- `T.barrier_arrive` / `T.barrier_wait` -> `MbarrierArrive` / `MbarrierWait` of the executing
  threads (each arrives once; the emulator reports a wait that can never complete as a deadlock);
- `T.sync_threads()` -> a block `Barrier`; `T.sync_threads(id, n)` -> named barrier `id` over
  `n` threads;
- `with T.ws(g...)` -> `if tx // 128 in (g...)`.

Which targets may lower them is decided by `refusal` (facts: `lowers_to_threads`, and
`mbarrier` for the barrier constructs).
"""

from __future__ import annotations

from ..errors import TileShapeError, TileTargetError
from ..ir.expr import Expr, Load, Var, binop, const
from ..ir.loops import While
from ..ir.stmt import TILE_OPS, For, IfThenElse, KernelLaunch, LetStmt, SeqStmt, Stmt
from ..ir.thread import (
    AsyncCommit,
    AsyncCopy,
    AsyncFence,
    AsyncWait,
    Barrier,
    MbarrierArrive,
    MbarrierInit,
    MbarrierWait,
    Shuffle,
)
from ..ir.thread_level import (
    THREAD_LEVEL_STMTS,
    WARPGROUP,
    BarrierArrive,
    BarrierInit,
    BarrierWait,
    CpAsync,
    CpAsyncCommit,
    CpAsyncWait,
    ThreadIndex,
    ThreadSync,
    TmaCopy,
    WarpRole,
    first_construct,
)
from ..ir.visit import rewrite, walk
from .body import BodyLowerer
from .context import flat_offset

__all__ = ["THREAD_LEVEL_STMTS", "bind_thread_index", "check_barrier_placement",
           "check_uniform_tile_ops", "lower_thread_stmt", "refusal", "split_roles"]
_BARRIERS = (BarrierInit, BarrierArrive, BarrierWait)


def refusal(func_body, desc) -> TileTargetError | None:
    """The error for a thread-level kernel on a target that cannot run it, or None.

    Thread-level kernels need a target that lowers to threads (facts `lowers_to_threads`) or
    runs them through the core's lowering (fact `thread_level`, interp); mbarriers
    additionally need the fact `mbarrier` (cuda sm_90+: try-wait on a phase) or `thread_level`."""
    found = first_construct(func_body)
    if found is None:
        return None
    name, loc = found
    facts = desc.facts
    emulated = facts.get("thread_level") is not None
    if not (facts.lowers_to_threads or emulated):
        return TileTargetError(
            f"{name} makes this a thread-level kernel (per-thread code), which {desc.target} cannot "
            "run: it executes tile programs only", loc,
            hint="run it on interp, emu:sm_90 or cuda, or write the kernel with tile operations only")
    for n in walk(func_body):
        if isinstance(n, _BARRIERS) and not (emulated or facts.get("mbarrier")):
            what = {BarrierInit: "T.alloc_barrier", BarrierArrive: "T.barrier_arrive",
                    BarrierWait: "T.barrier_wait"}[type(n)]
            return TileTargetError(f"{what} needs mbarriers, which {desc.lowering} does not have",
                                   n.loc, hint="run it on cuda:sm_90 (or emu:sm_90 / interp)")
    return None


def thread_coord(ctx, dim: int) -> Expr:
    """The thread's index along block dimension `dim` (x fastest) from the flat thread index."""
    threads = tuple(ctx.launch.threads)
    if len(threads) == 1:
        return ctx.tx
    stride = 1
    for t in threads[:dim]:
        stride *= t
    return ctx.simp(binop("mod", binop("div", ctx.tx, stride), threads[dim]))


def bind_thread_index(launch: KernelLaunch, ctx) -> KernelLaunch:
    """`launch` with every ThreadIndex replaced by the lowering's thread coordinates."""
    def fn(n):
        return thread_coord(ctx, n.dim) if isinstance(n, ThreadIndex) else None

    return rewrite(launch, fn)


def _varying(e, varying: set) -> bool:
    """Whether `e` may differ between the threads (thread index, per-thread values): a Var or
    local buffer in `varying` (ids), or a load at a varying address. `varying` holds the local
    buffers `_varying_locals` found; without that analysis every local load is varying."""
    for n in walk(e):
        if isinstance(n, ThreadIndex) or (isinstance(n, Var) and id(n) in varying):
            return True
        if isinstance(n, Load) and n.buffer.scope == "local" and id(n.buffer) in varying:
            return True
        if isinstance(n, Load) and _varying_indices(n, varying):
            return True
    return False


def _varying_locals(body, varying: set) -> None:
    """Add to `varying` the local buffers (per-thread variables) that may differ between the
    threads, by divergence analysis to a fixed point: one is varying when a store to it has a
    varying value or address, or happens under varying control flow, or it receives an atomic's
    old value (`return_prev`). A load at a uniform address of shared or global memory is
    uniform (every thread reads the same element; the emulator reports a racing write). Loop
    exit flags and counters assigned from such values stay uniform, so tile operations after
    a uniform `break` remain allowed."""
    from ..ir.stmt import AtomicAdd, Store

    def visit(s, why: bool) -> bool:
        changed = False
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                changed |= visit(x, why)
        elif isinstance(s, LetStmt):
            if id(s.var) not in varying and (why or _varying(s.value, varying)):
                varying.add(id(s.var))
                changed = True
        elif isinstance(s, IfThenElse):
            inner = why or _varying(s.cond, varying)
            changed |= visit(s.then_body, inner)
            if s.else_body is not None:
                changed |= visit(s.else_body, inner)
        elif isinstance(s, For):
            inner = why or _varying(s.start, varying) or _varying(s.stop, varying)
            if inner and id(s.var) not in varying:
                varying.add(id(s.var))
                changed = True
            changed |= visit(s.body, inner)
        elif isinstance(s, While):
            changed |= visit(s.body, why or _varying(s.cond, varying))
        elif isinstance(s, Store) and s.buffer.scope == "local" and id(s.buffer) not in varying:
            if why or _varying(s.value, varying) or any(_varying(i, varying) for i in s.indices):
                varying.add(id(s.buffer))
                changed = True
        elif isinstance(s, AtomicAdd) and s.prev is not None and id(s.prev) not in varying:
            varying.add(id(s.prev))
            changed = True
        elif hasattr(s, "body") and isinstance(s.body, Stmt):
            changed |= visit(s.body, why)
        return changed

    while visit(body, False):
        pass


def _varying_indices(n: Load, varying: set) -> bool:
    return any(_varying(i, varying) for i in n.indices)


def check_uniform_tile_ops(launch: KernelLaunch) -> None:
    """Raise a located TileError for a tile operation or T.Parallel loop under thread-varying
    control flow (a branch on the thread index, a `T.ws` region) of a thread-level kernel."""
    varying: set[int] = set()
    _varying_locals(launch.body, varying)

    def visit(s, why):
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                visit(x, why)
        elif isinstance(s, LetStmt):
            if _varying(s.value, varying) or why:
                varying.add(id(s.var))
        elif isinstance(s, IfThenElse):
            inner = why or ("a branch on a thread-varying condition" if _varying(s.cond, varying) else None)
            visit(s.then_body, inner)
            if s.else_body is not None:
                visit(s.else_body, inner)
        elif isinstance(s, WarpRole):  # at a uniform point its tile ops run over its threads
            visit(s.body, why)
        elif isinstance(s, For):
            if s.kind == "parallel":
                _refuse(s, "T.Parallel", why)
                return
            if why or _varying(s.start, varying) or _varying(s.stop, varying):
                varying.add(id(s.var))
            visit(s.body, why or ("a loop with thread-varying bounds" if id(s.var) in varying else None))
        elif isinstance(s, TILE_OPS):
            _refuse(s, f"T.{type(s).__name__.lower()}", why)
        elif isinstance(s, TmaCopy):
            _refuse(s, "T.tma_copy", why)
        elif why is not None and any(isinstance(n, Shuffle) for n in walk(s)):
            raise TileShapeError(  # T.tvm_warp_shuffle: every lane of the warp takes part
                f"T.tvm_warp_shuffle inside {why}: a warp shuffle must be executed by every lane "
                "of the warp", s.loc,
                hint="shuffle outside the branch (in every thread) and use the value only where "
                     "it is needed")

    visit(launch.body, None)


def _refuse(s, what: str, why: str | None) -> None:
    if why is None:
        return
    raise TileShapeError(
        f"{what} inside {why}: the thread lowering runs tile operations over every thread of the "
        "block, so in thread-level kernels they must be reached by every thread (interp runs "
        "warp-specialized tile programs, whose roles hold tile operations, at the tile level)", s.loc,
        hint="move the tile operation out of the branch / T.ws region, write that part per thread "
             "(index with the thread index, loop with T.serial), or run the kernel on interp")


def _role_condition(ctx, groups: tuple) -> Expr:
    wg = ctx.simp(binop("div", ctx.tx, WARPGROUP))
    cond = None
    for g in groups:
        c = binop("eq", wg, g)
        cond = c if cond is None else binop("or", cond, c)
    return cond


def lower_thread_stmt(ctx, s: Stmt, lower_block) -> Stmt:
    """One thread-level statement of the kernel body, lowered (`lower_block` lowers bodies)."""
    if isinstance(s, ThreadSync):
        if s.barrier_id is None:
            return Barrier("T.sync_threads()", s.loc)
        return Barrier("T.sync_threads()", s.loc, "named", s.barrier_id, s.count)
    if isinstance(s, BarrierInit):
        bar = ctx.shared(s.bar)
        inits: list[Stmt] = [MbarrierInit(bar, const(i), int(c), s.loc) for i, c in enumerate(s.counts)]
        inits.append(AsyncFence("mbarrier_init", s.loc))
        head = IfThenElse(binop("eq", ctx.tx, 0), SeqStmt(tuple(inits), s.loc), None, s.loc)
        return SeqStmt((head, Barrier(f"T.alloc_barrier: {s.bar.name} initialized", s.loc)), s.loc)
    if isinstance(s, (BarrierArrive, BarrierWait)):
        bl = BodyLowerer(ctx, False, s.loc)
        idx = bl.expr(s.index)
        bar = ctx.shared(s.bar)
        node = (MbarrierArrive(bar, idx, 0, s.loc) if isinstance(s, BarrierArrive)
                else MbarrierWait(bar, idx, bl.expr(s.parity), s.loc))
        return SeqStmt(tuple(bl.pre) + (node,), s.loc) if bl.pre else node
    if isinstance(s, (CpAsync, CpAsyncCommit, CpAsyncWait)):
        return _lower_cp_async(ctx, s)
    if isinstance(s, WarpRole):
        collective = any(isinstance(n, (*TILE_OPS, TmaCopy)) or (isinstance(n, For) and n.kind == "parallel")
                         for n in walk(s.body))
        if collective:  # its tile operations run over the region's own threads
            from .role_lowering import lower_role

            body = lower_role(ctx, s, lower_block)
        else:
            body = lower_block(ctx, s.body)
        return IfThenElse(_role_condition(ctx, s.groups), body, None, s.loc)
    if isinstance(s, TmaCopy):
        # the executing threads copy the tile themselves: its bytes are then complete before
        # their T.barrier_arrive, whose release the waiters acquire (the expect/complete pair
        # of a TMA copy cancels out); a TMA bulk copy here is a performance step, not a meaning
        from .parallel import lower_copy

        return lower_copy(ctx, s.copy)
    raise TileShapeError(f"cannot lower {type(s).__name__}", s.loc, hint="report it")


def _lower_cp_async(ctx, s: Stmt) -> Stmt:
    """T.ptx_cp_async / commit / wait as the thread IR's cp.async group operations."""
    if isinstance(s, CpAsyncCommit):
        return AsyncCommit("cp.async", s.loc)
    if isinstance(s, CpAsyncWait):
        return AsyncWait("cp.async", s.pending, s.loc)
    bl = BodyLowerer(ctx, True, s.loc)
    dst_idx = tuple(bl.expr(i) for i in s.dst_indices)
    src_idx = tuple(bl.expr(i) for i in s.src_indices)
    pred = None if s.pred is None else bl.expr(s.pred)
    node = AsyncCopy(ctx.shared(s.dst), ctx.offset(s.dst, dst_idx), s.src,
                     flat_offset(s.src, src_idx, ctx.bounds, ctx.wide(s.src)), s.lanes, pred, True,
                     "group", s.loc)
    return SeqStmt(tuple(bl.pre) + (node,), s.loc) if bl.pre else node


def split_roles(launch: KernelLaunch) -> KernelLaunch:
    """A kernel with `T.ws` regions and mbarrier waits, as one program per role: the body
    becomes `if warpgroup in roles[0]: <body for it> elif ...`, each arm the body with the
    regions of other warpgroups removed (warpgroups with equal programs share an arm), after
    the top-level `T.alloc_barrier`s. On a GPU each warpgroup progresses on its own; written
    this way the emulator runs the arms concurrently (tilecore.emulator.divergence), so a role
    may wait on an arrival that a later region of another role makes."""
    roles = [n for n in walk(launch.body) if isinstance(n, WarpRole)]
    if not roles or not any(isinstance(n, BarrierWait) for n in walk(launch.body)):
        return launch
    stmts = launch.body.stmts if isinstance(launch.body, SeqStmt) else (launch.body,)
    head = tuple(x for x in stmts if isinstance(x, BarrierInit))
    rest = SeqStmt(tuple(x for x in stmts if not isinstance(x, BarrierInit)), launch.body.loc)
    total = 1
    for t in launch.threads:
        total *= t
    arms: list[tuple[list, Stmt]] = []
    for g in range(total // WARPGROUP):
        def keep(n, g=g):  # regions stay regions: their tile operations lower over their threads
            if isinstance(n, WarpRole):
                return n if g in n.groups else SeqStmt((), n.loc)
            return None

        body = rewrite(rest, keep)
        for groups, b in arms:
            if b == body:
                groups.append(g)
                break
        else:
            arms.append(([g], body))
    wg = binop("div", ThreadIndex(), WARPGROUP)
    chain: Stmt | None = None
    for groups, body in reversed(arms):
        if chain is None:
            chain = body
            continue
        cond = None
        for g in groups:
            c = binop("eq", wg, g)
            cond = c if cond is None else binop("or", cond, c)
        chain = IfThenElse(cond, body, chain, launch.loc)
    body = SeqStmt(head + (chain,), launch.body.loc)
    return KernelLaunch(launch.grid, launch.block_vars, launch.threads, launch.allocs, body,
                        launch.annotations, launch.loc)


def check_barrier_placement(launch: KernelLaunch) -> None:
    """T.alloc_barrier at the top level of the kernel (it runs once, before other threads use
    the mbarriers), never inside a loop or branch."""
    top = {id(x) for x in (launch.body.stmts if isinstance(launch.body, SeqStmt) else (launch.body,))}
    for n in walk(launch.body):
        if isinstance(n, BarrierInit) and id(n) not in top:
            raise TileShapeError("T.alloc_barrier inside a loop, branch or T.ws region", n.loc,
                                 hint="allocate the mbarriers at the top of the kernel body")
