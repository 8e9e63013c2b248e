"""TMA-store epilogues: an accumulator tile leaves through one shared staging tile and bulk
tensor stores (`cp.async.bulk.tensor ... global.shared::cta`), issued by one thread.

On a target whose facts say `tma` (cuda sm_90 / sm_90a, emu:sm_90), a `T.copy` of a whole
accumulator fragment into a 2-D global tensor, in a kernel with a `T.Pipelined` loop of
global-to-shared copies (a Hopper GEMM main loop: the case this is measured for), is lowered as

    thread 0: wait until its earlier bulk stores have read their staging tile
    (insert-barriers: a barrier, since thread 0's stores read what is written next)
    every thread: its registers, converted, into the staging tile
    every thread: fence.proxy.async (the bulk store reads through the async proxy)
    (insert-barriers: a barrier, the tile is read by thread 0's stores)
    thread 0: one TmaStore per 64-column panel of the tile, commit the bulk group

The staging tile has the canonical panelled 128-byte swizzle (`canonical_layout`), which TMA
reads box by box and which the accumulator layout writes without bank conflicts (the eight
rows a warp writes per register pair land in eight different 16-byte chunks). TMA clips the
boxes at the tensor's edge, so ragged tiles need no bounds checks, and the store runs
asynchronously: in a persistent kernel (tilecore.lower.warp_specialize) the consumers start
the next tile's main loop while the tile is written, instead of copying it out with per-thread
shared loads and global stores. `proxy-fences` ends the kernel with a wait for every bulk
store's shared reads (a block must not exit while one still reads its shared memory).

The whole tile is staged at once, so this applies only where it fits beside the pipeline's
stages (counted from the tile program's `T.Pipelined` loops) and does not push a kernel that
fit twice per multiprocessor past half the shared memory; otherwise, or with the option
`disable_tma_store` / `disable_tma_lower`, the epilogue stays the per-thread staged copy of
tilecore.lower.epilogue. The destination's rows must be static 16-byte multiples (the tensor
map's strides).
"""

from __future__ import annotations

from ..ir.buffer import Buffer
from ..ir.expr import binop, const
from ..ir.smem_layout import canonical_layout
from ..ir.stmt import Copy, For, IfThenElse, SeqStmt, Stmt
from ..ir.thread import TMA_BOX_MAX, AsyncCommit, AsyncFence, AsyncWait, TmaStore
from ..ir.visit import walk
from .context import LowerCtx
from .smem import planner
from .tma_pipeline import box_ok, tma_boxes

ALIGN_SLACK = 1024  # bytes per shared buffer: swizzled tiles start on 1024-byte boundaries
MBARRIER_SLACK = 1024  # the pipeline's mbarrier rings and the renderer's padding


def _nbytes(buf: Buffer) -> int:
    n = buf.dtype.itemsize
    for e in buf.shape:
        n *= int(e)
    return n


def kernel_pipelines(ctx: LowerCtx) -> list:
    """(stages, [shared buffers filled by its copies]) for each `T.Pipelined` loop of the tile
    program whose copies read global memory (TMA or cp.async stages, num_stages copies each)."""
    out = []
    for n in walk(ctx.launch.body):
        if not isinstance(n, For):
            continue
        stages = int(n.annotation("num_stages", 0) or 0)
        if stages < 2:
            continue
        bufs = {}
        for c in walk(n.body):
            if isinstance(c, Copy) and c.src.buffer.scope == "global" and c.dst.buffer.scope == "shared":
                bufs[id(c.dst.buffer)] = c.dst.buffer
        if bufs:
            out.append((stages, list(bufs.values())))
    return out


def staging_fits(ctx: LowerCtx, stage_bytes: int, pipes: list) -> bool:
    """Whether a staging tile of `stage_bytes` fits the shared memory beside the kernel's
    buffers with every pipeline's stages, without making a kernel that two blocks per
    multiprocessor could run need more than half of it (one resident block: that loses the
    second block's overlap, and flips the warp-specialization choice, tilecore.lower.
    warp_specialize; measured configurations keep their occupancy)."""
    limit = ctx.facts.shared_memory_bytes or 0
    used = sum(_nbytes(b) for b in ctx.shared_list)
    extra = sum((stages - 1) * _nbytes(b) for stages, bufs in pipes for b in bufs)
    before = used + extra + ALIGN_SLACK * len(ctx.shared_list) + MBARRIER_SLACK
    after = before + stage_bytes + ALIGN_SLACK
    return bool(limit) and after <= limit and (2 * before > limit) == (2 * after > limit)


def tma_store_epilogue(ctx: LowerCtx, copy: Copy, write_tile) -> Stmt | None:
    """The TMA-store epilogue of `copy` (module docstring), or None where it does not apply.
    `write_tile(stage)` returns the statements writing every register of the fragment into
    the staging tile `stage` (row r of the tile at row r of the stage)."""
    opts = ctx.options
    if not ctx.facts.get("tma") or opts.disable_tma_store or opts.disable_tma_lower:
        return None
    src, dst = copy.src, copy.dst
    tensor = dst.buffer
    shape = tuple(src.buffer.shape)
    if len(tensor.shape) != 2 or tuple(dst.extents) != shape or len(shape) != 2:
        return None
    rows, cols = shape
    if not all(isinstance(e, int) and 1 <= e for e in shape):
        return None
    pipes = kernel_pipelines(ctx)
    if not pipes:
        return None  # no TMA pipeline: the per-thread staged copy is what was measured
    lay = canonical_layout(rows, cols, tensor.dtype.itemsize)
    if lay is None or rows > TMA_BOX_MAX:
        return None
    boxes = tma_boxes(lay, shape, tensor.dtype.itemsize)
    if boxes is None or not all(box_ok(tensor, b[2]) for b in boxes):
        return None  # box extents or the tensor's row strides are not what a tensor map takes
    if not staging_fits(ctx, lay.size * tensor.dtype.itemsize, pipes):
        return None
    stage = tma_staging_tile(ctx, shape, tensor, lay)
    flat = ctx.shared(stage)
    first = binop("eq", ctx.tx, 0)
    loc = copy.loc
    stores = box_stores(ctx, flat, tensor, dst.starts, boxes, loc)
    return SeqStmt((
        IfThenElse(first, AsyncWait("bulk", 0, loc), None, loc),
        write_tile(stage),
        AsyncFence("proxy_async", loc),
        IfThenElse(first, SeqStmt(tuple(stores), loc), None, loc),
    ), loc)


def box_stores(ctx: LowerCtx, flat: Buffer, tensor: Buffer, starts: tuple, boxes: list, loc,
               reduce: str = "") -> list[Stmt]:
    """One bulk tensor store (a reduce-add when `reduce == "add"`) of each box of the staged
    tile `flat` to `tensor` at `starts` (+ the box's column), then the bulk group's commit: the
    issuing half shared by the TMA-store epilogue and the TMA reduction (`tma_reduce.py`)."""
    out: list[Stmt] = []
    for col, off, box, box_lay in boxes:
        at = tuple(ctx.simp(e) for e in starts[:-1]) + (ctx.simp(starts[-1] + col),)
        out.append(TmaStore(flat, const(off), tensor, at, box, box_lay, loc, reduce=reduce))
    out.append(AsyncCommit("bulk", loc))
    return out


def tma_staging_tile(ctx: LowerCtx, shape: tuple, like: Buffer, lay) -> Buffer:
    """The kernel's TMA staging tile of `shape` and `like`'s dtype, in layout `lay`."""
    p = planner(ctx)
    key = ("tma_stage", shape, like.dtype.name)
    buf = p.extra.get(key)
    if buf is None:
        buf = Buffer(f"{like.name}_tma_stage", shape, like.dtype, "shared")
        p.mark_staging(buf)
        p.chosen[id(buf)] = lay  # TMA reads it box by box: the canonical panels, not a choice
        p.extra[key] = buf
    return buf

