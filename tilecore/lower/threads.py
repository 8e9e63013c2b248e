"""The lowering of a whole kernel: `KernelLaunch` (tile IR) to `ThreadKernel` (thread IR).

Block-level statements become code every thread runs (uniformly); tile operations and
T.Parallel nests are partitioned over the threads by the modules of this package.
"""

from __future__ import annotations

from ..errors import TileShapeError
from ..ir.expr import Expr, const_int
from ..ir.grid_sync import GridSync
from ..ir.loops import While
from ..ir.reg_budget import SetMaxNReg
from ..ir.smem_layout import STREAM_K_ANNOTATION
from ..ir.stmt import (
    AtomicAdd,
    AtomicAddRegion,
    Copy,
    CumSum,
    Fill,
    For,
    Gemm,
    IfThenElse,
    KernelLaunch,
    LetStmt,
    Reduce,
    SeqStmt,
    Stmt,
    Store,
)
from ..ir.thread import ThreadKernel
from ..ir.thread_level import is_thread_level
from .accum_zero import drop_accumulator_clears, gemm_uses
from .body import BodyLowerer
from .context import LowerCtx
from .debug import is_debug_block, lower_debug_block
from .gemm import lower_gemm
from .parallel import lower_atomic_region, lower_copy, lower_fill, lower_parallel
from .raster import rasterize
from .reduce import lower_cumsum, lower_reduce
from .role_lowering import check_role_fragments
from .smem_plan import planned_bytes
from .thread_level import (
    THREAD_LEVEL_STMTS,
    bind_thread_index,
    check_barrier_placement,
    check_uniform_tile_ops,
    lower_thread_stmt,
    refusal,
    split_roles,
)
from .tile_roles import branches_as_regions
from .tma_pipeline import tile_copies
from .tma_reduce import tma_reduce_add


def _with_pre(pre: list, s: Stmt) -> Stmt:
    return s if not pre else SeqStmt(tuple(pre) + (s,), s.loc)


def lower_block(ctx: LowerCtx, s: Stmt) -> Stmt:
    """One block-level statement of the kernel body, lowered."""
    if isinstance(s, SeqStmt):
        stmts = drop_accumulator_clears(ctx, s.stmts)  # wgmma scale-d 0 instead (accum_zero.py)
        return SeqStmt(tuple(lower_block(ctx, x) for x in stmts), s.loc)
    if is_debug_block(s):  # T.print / T.device_assert
        return lower_debug_block(ctx, s)
    if isinstance(s, For):
        if s.kind == "parallel":
            return lower_parallel(ctx, s)
        bl = BodyLowerer(ctx, False, s.loc)
        start, stop = bl.expr(s.start), bl.expr(s.stop)
        kind = "unroll" if s.kind == "unroll" else "serial"
        lo = const_int(start)
        if lo is not None and lo >= 0 and s.step > 0:
            ctx.var_bounds[id(s.var)] = (lo, None)
        body = lower_block(ctx, s.body)
        loop = For(s.var, start, stop, s.step, kind, body, s.annotations + tile_copies(ctx, s), s.loc)
        return _with_pre(bl.pre, loop)
    if isinstance(s, IfThenElse):
        bl = BodyLowerer(ctx, False, s.loc)
        cond = bl.expr(s.cond)
        els = None if s.else_body is None else lower_block(ctx, s.else_body)
        return _with_pre(bl.pre, IfThenElse(cond, lower_block(ctx, s.then_body), els, s.loc))
    if isinstance(s, GridSync):  # a phase boundary, kept at the top of the body (grid_sync.py)
        return s
    if isinstance(s, SetMaxNReg):  # kept on sm_90a (the register-budget pass removed it elsewhere)
        return s
    if isinstance(s, While):
        bl = BodyLowerer(ctx, False, s.loc)
        cond = bl.expr(s.cond)
        if bl.pre:  # evaluated once, they would go stale as the body runs
            raise TileShapeError("this `while` condition reads a value the threads must first "
                                 "exchange through shared memory", s.loc,
                                 hint="copy the value into a `T.alloc_var` / local buffer in the "
                                 "loop body and test that")
        return While(cond, lower_block(ctx, s.body), s.loc)
    if isinstance(s, (LetStmt, Store, AtomicAdd)):
        bl = BodyLowerer(ctx, False, s.loc)
        out = bl.stmt(s)
        return _with_pre(bl.pre, out)
    if isinstance(s, Copy):
        return lower_copy(ctx, s)
    if isinstance(s, Fill):
        return lower_fill(ctx, s)
    if isinstance(s, Gemm):
        return lower_gemm(ctx, s)
    if isinstance(s, Reduce):
        return lower_reduce(ctx, s)
    if isinstance(s, CumSum):
        return lower_cumsum(ctx, s)
    if isinstance(s, AtomicAddRegion):
        bulk = tma_reduce_add(ctx, s) if s.use_tma else None  # `use_tma=True`: tma_reduce.py
        return bulk if bulk is not None else lower_atomic_region(ctx, s)
    if isinstance(s, THREAD_LEVEL_STMTS):  # T.sync_threads, mbarriers, T.ws (thread_level.py)
        return lower_thread_stmt(ctx, s, lower_block)
    if isinstance(s, KernelLaunch):
        raise TileShapeError("T.Kernel cannot be nested", s.loc, hint="use one T.Kernel per kernel")
    raise TileShapeError(f"cannot lower {type(s).__name__} to threads", getattr(s, "loc", None),
                         hint="run it on interp or cpu, or report the missing lowering")


def lower_launch(launch: KernelLaunch, ctx: LowerCtx) -> ThreadKernel:
    """The ThreadKernel of one launch."""
    ctx.thread_level = is_thread_level(launch)  # per-thread block code (thread_level.py)
    if ctx.thread_level:
        err = refusal(launch, ctx.desc)  # e.g. mbarriers where the target has none
        if err is not None:
            raise err
        launch = branches_as_regions(launch)  # `if tx < 128:` with tile ops: a T.ws region
        check_uniform_tile_ops(launch)
        check_role_fragments(launch)
        check_barrier_placement(launch)
        launch = bind_thread_index(split_roles(launch), ctx)
        ctx.role_body = launch.body  # the T.ws regions lowered as roles (role_lowering.py)
    body = rasterize(launch, ctx.var_bounds).body
    ctx.gemm_uses = gemm_uses(body)  # accum_zero.py rewrites only gemms that occur once
    body = lower_block(ctx, body)
    grid = tuple(g if isinstance(g, Expr) else g for g in launch.grid)
    sk = next((v for k, v in launch.annotations if k == STREAM_K_ANNOTATION), ())
    kernel = ThreadKernel(grid, tuple(launch.block_vars), ctx.tx, ctx.threads, ctx.warp_size,
                          tuple(ctx.shared_list), tuple(ctx.reg_list), body, launch.loc, stream_k=sk)
    used = planned_bytes(kernel)  # buffers with disjoint live ranges share bytes (smem_plan.py)
    limit = ctx.facts.shared_memory_bytes
    if limit and used > limit:
        names = ", ".join(f"{b.name} ({b.shape[0] * b.dtype.itemsize} B)" for b in ctx.shared_list)
        raise TileShapeError(f"the kernel needs {used} bytes of shared memory per block; "
                             f"{ctx.facts.target} has {limit}: {names}", launch.loc,
                             hint="use smaller tiles, fewer pipeline stages, or fragments instead of "
                                  "shared buffers")
    return kernel
