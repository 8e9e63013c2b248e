"""Epilogues: accumulator tiles leave through shared memory as wide stores; bounds checked per tile.

An accumulator fragment (the tensor-core C layout) holds short runs per thread — two
consecutive columns of eight rows per warp — so copying it straight to global memory issues
many narrow stores. `stage_epilogue` instead writes the fragment into a shared staging tile
(its layout chosen by `tilecore.lower.smem` for that column-wise write and the row-wise read,
so neither conflicts) and copies the tile to global memory with the widest vector accesses the
destination allows; `insert-barriers` puts the barrier between the two halves. It applies only
when the staged stores are wider than the direct ones and the staging tile fits in half of the
target's shared memory beside the buffers allocated so far (pipeline stages may be added
later); strided fragments (already coalesced) are copied directly.

`split_interior` lowers a copy into global memory twice: without bounds checks for tiles that
lie entirely inside the tensor (one uniform test of the region against the tensor's shape per
tile) and with per-element checks for edge tiles.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.buffer import Buffer, Region
from ..ir.expr import Const, Expr, binop, const_int
from ..ir.stmt import Copy, IfThenElse, SeqStmt, Stmt
from .context import LowerCtx, all_of
from .indexing import simplify
from .layout import StridedLayout
from .smem import planner


def interior(ctx: LowerCtx, region: Region) -> Expr | None:
    """The condition that `region` of a global tensor lies inside it (None when provable;
    block indices are below constant grid extents)."""
    bounds = ctx.bounds
    for v, g in zip(ctx.launch.block_vars, ctx.launch.grid):
        n = const_int(g)
        if n is not None and n >= 1:
            bounds[id(v)] = (0, n - 1)
    conds = []
    for start, ext, size in zip(region.starts, region.extents, region.buffer.shape):
        conds.append(binop("ge", start, 0))
        conds.append(binop("le", start + ext, size))
    cond = all_of(simplify(c, bounds) for c in conds)
    return None if cond is None else simplify(cond, bounds)


def split_interior(ctx: LowerCtx, region: Region, build: Callable[[bool], Stmt], loc) -> Stmt:
    """`build(False)` (no bounds checks) when `region` is inside its tensor, `build(True)`
    otherwise; a tile-level branch when that is only known at run time."""
    cond = interior(ctx, region)
    if cond is None:
        return build(False)
    guarded = build(True)
    if isinstance(cond, Const) and not cond.value:
        return guarded
    fast = build(False)
    if fast == guarded:  # nothing was guarded: no branch needed
        return guarded
    return IfThenElse(cond, fast, guarded, loc)


def stage_epilogue(ctx: LowerCtx, copy: Copy, lower: Callable, vector_width: Callable) -> Stmt | None:
    """A fragment-to-global copy through a shared staging tile, or None when staging would
    not widen the stores (see the module docstring). `lower` lowers a Copy; `vector_width`
    is the copy lowering's vector rule (elements per access for a copy and shape)."""
    src, dst = copy.src, copy.dst
    frag = src.buffer
    if frag.scope != "fragment" or dst.buffer.scope != "global" or not src.is_full:
        return None
    shape = tuple(frag.shape)
    if len(shape) < 2 or src.squeezed_shape != dst.squeezed_shape:
        return None
    lay = ctx.layout(frag)
    if isinstance(lay, StridedLayout) or lay.replicated:
        return None
    sq = src.squeezed_shape or (1,)
    item = dst.buffer.dtype.itemsize
    vec = vector_width(ctx, copy, sq)
    direct = vec * item
    sector = ctx.facts.get("global_sector_bytes")
    if sector and _fills_sectors(ctx, lay, vec, item, int(sector)):
        return None  # every direct warp store already writes whole memory sectors
    stage = _staging(ctx, shape, dst.buffer)
    wide = vector_width(ctx, Copy(Region.full(stage), dst, copy.loc), sq) * item
    if wide <= direct:
        return None
    limit = ctx.facts.shared_memory_bytes
    used = sum(b.shape[0] * b.dtype.itemsize for b in ctx.shared_list)
    need = 0 if ctx.has_shared(stage) else ctx.smem_layout(stage).size * item
    if limit and used + need > limit // 2:
        return None
    write = lower(ctx, Copy(src, Region.full(stage), copy.loc))
    read = lower(ctx, Copy(Region.full(stage), dst, copy.loc))
    return SeqStmt((write, read), copy.loc)


def _fills_sectors(ctx: LowerCtx, lay, vec: int, item: int, sector: int) -> bool:
    """True when each warp's direct store of each register run of fragment layout `lay`
    (`vec` elements of `item` bytes per lane) covers only whole `sector`-byte pieces of rows."""
    coords, valid = lay.table
    ws = ctx.warp_size
    for r in range(0, lay.nregs, vec):
        for w0 in range(0, coords.shape[0], ws):
            c, v = coords[w0:w0 + ws, r], valid[w0:w0 + ws, r]
            c = c[v]
            if not len(c):
                continue
            row = lay.flat_index(np.concatenate([c[:, :-1], np.zeros((len(c), 1), np.int64)], 1))
            first, last = c[:, -1] * item // sector, ((c[:, -1] + vec) * item - 1) // sector
            sectors = {(a, s) for a, f, e in zip(row, first, last) for s in range(f, e + 1)}
            if len(c) * vec * item < len(sectors) * sector:
                return False
    return True


def _staging(ctx: LowerCtx, shape: tuple, like: Buffer) -> Buffer:
    """The kernel's staging tile of `shape` and `like`'s dtype (one per shape and dtype)."""
    p = planner(ctx)
    key = ("stage", shape, like.dtype.name)
    buf = p.extra.get(key)
    if buf is None:
        buf = Buffer(f"{like.name}_stage", shape, like.dtype, "shared")
        p.mark_staging(buf)
        p.extra[key] = buf
    return buf
