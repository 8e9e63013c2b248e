"""Bulk reduce-add of an accumulator tile: `T.atomic_add(dst[...], frag, use_tma=True)` as one
shared staging tile and TMA reductions (`cp.reduce.async.bulk.tensor ... .add`), issued by one
thread.

The per-element form (tilecore.lower.parallel.lower_atomic_region) issues one global atomic
per register pair and thread: for the FlashAttention backward's dQ (a 64x128 float32 tile
added once per query tile by every key-tile block) that was 1.5 of its 3.5 ms on the H200
(benchmarks/attention_ablate.py). With `use_tma=True` on a target whose facts say `tma`, the
tile instead leaves as

    thread 0: wait until its earlier bulk operations have read their staging tile
    (insert-barriers: a barrier, since thread 0's reductions read what is written next)
    every thread: its registers into the staging tile (the TMA-store epilogue's write)
    every thread: fence.proxy.async (the bulk reduction reads through the async proxy)
    (insert-barriers: a barrier, the tile is read by thread 0's reductions)
    thread 0: one `TmaStore(reduce="add")` per swizzle panel of the tile (`staging_layout`), commit the group

so the additions are done by the TMA unit next to L2 (each element atomically, clipped at the
tensor's edge like a TMA store) while the threads go on with the next tile. This is the same
staging, fence and group discipline as tilecore.lower.tma_store (whose staging tile and
shared-memory fit test it shares); `proxy-fences` ends the kernel with the wait for the bulk
group's shared reads.

Applies to a whole float32 fragment of two non-unit dimensions, added into a global float32
region whose last dimension is the tile's columns (other dimensions may be 1: dQ[b, rows, h, :]),
with static 16-byte row strides, where the staging tile fits (`tma_store.staging_fits`). Elsewhere,
or with `disable_tma_lower`, the per-element atomics are kept and a TileConfigWarning names
the line and why (TileLang's `use_tma` is never dropped silently).
"""

from __future__ import annotations

import warnings

from ..errors import TileConfigWarning
from ..ir.expr import binop
from ..ir.smem_layout import SWIZZLE_SPANS, Panelled, canonical_layout
from ..ir.stmt import AtomicAddRegion, IfThenElse, SeqStmt, Stmt
from ..ir.thread import TMA_BOX_MAX, AsyncFence, AsyncWait
from .context import LowerCtx
from .epilogue import store_run, write_slab
from .layout import StridedLayout
from .smem import bank_model, store_degree
from .tma_pipeline import box_ok, tma_boxes
from .tma_store import box_stores, kernel_pipelines, staging_fits, tma_staging_tile

_told: set = set()


def _refuse(s: AtomicAddRegion, why: str) -> None:
    """Warn once per source line that `use_tma=True` falls back to per-element atomics."""
    key = (s.loc, why)
    if key in _told:
        return
    _told.add(key)
    file, line = (s.loc.file, s.loc.line) if s.loc is not None else ("<tilecore>", 0)
    warnings.warn_explicit(f"T.atomic_add(use_tma=True) is lowered as per-element atomics: {why}",
                           TileConfigWarning, file, line)


def staging_layout(ctx: LowerCtx, flay, rows: int, cols: int, itemsize: int) -> Panelled | None:
    """The TMA-writable (canonical) layout of the staging tile fragment layout `flay` writes:
    of the 128-, 64- and 32-byte swizzle spans that divide a row, the one whose panels the
    fragment's stores (`write_slab`'s, as issued) hit with the fewest bank conflicts, the widest
    on ties. A float32 accumulator stores 8 bytes per lane, four rows of 32 bytes per phase:
    in 128-byte panels rows r and r ^ 1 share banks (2-way), in 32-byte panels the four rows
    fill the 128-byte line (conflict-free, at four times the boxes). The widest span under
    `disable_staged_swizzle` or without bank facts."""
    widest = canonical_layout(rows, cols, itemsize)
    model = bank_model(ctx.facts)
    if widest is None or model is None or ctx.options.disable_staged_swizzle:
        return widest
    coords, valid = flay.table
    best, best_deg = widest, None
    for span in SWIZZLE_SPANS:
        lay = canonical_layout(rows, cols, itemsize, span)
        if lay is None:
            continue
        run = store_run(ctx, flay, lay, itemsize)
        deg = store_degree(lay, coords, valid, run, itemsize, model, ctx.warp_size)
        if best_deg is None or deg < best_deg:
            best, best_deg = lay, deg
    return best


def tma_reduce_add(ctx: LowerCtx, s: AtomicAddRegion) -> Stmt | None:
    """The bulk reduce-add lowering of `s` (module docstring), or None (after a warning) where
    it does not apply."""
    if not ctx.facts.get("tma") or ctx.options.disable_tma_lower:
        _refuse(s, "the target has no TMA (or disable_tma_lower is set)")
        return None
    src, dst = s.src, s.dst
    frag, tensor = src.buffer, dst.buffer
    shape = tuple(frag.shape)
    if frag.scope != "fragment" or not src.is_full or len(shape) != 2:
        _refuse(s, "the value is not a whole two-dimensional fragment")
        return None
    if tensor.scope != "global" or tensor.dtype.name != "float32" or frag.dtype != tensor.dtype:
        _refuse(s, "only a float32 fragment added into a float32 global tensor has a bulk form here")
        return None
    box = tuple(dst.extents)
    rows, cols = shape
    lead = 1
    for e in box[:-1]:
        lead = lead * e if isinstance(e, int) else -1
    if not isinstance(box[-1], int) or box[-1] != cols or lead != rows or rows > TMA_BOX_MAX:
        _refuse(s, "the region's last dimension must be the tile's columns (others of extent 1 "
                   f"or the rows, at most {TMA_BOX_MAX})")
        return None
    flay = ctx.layout(frag)
    if isinstance(flay, StridedLayout):
        _refuse(s, "the fragment has no accumulator layout")
        return None
    lay = staging_layout(ctx, flay, rows, cols, tensor.dtype.itemsize)
    boxes = None if lay is None else tma_boxes(lay, box, tensor.dtype.itemsize)
    if boxes is None or not all(box_ok(tensor, b[2]) for b in boxes):
        _refuse(s, "the tile or the tensor's row strides are not what a tensor map takes "
                   "(rows a multiple of 8, rows of 16-byte multiples)")
        return None
    if not staging_fits(ctx, lay.size * tensor.dtype.itemsize, kernel_pipelines(ctx)):
        _refuse(s, "the staging tile does not fit the shared memory beside the kernel's buffers")
        return None
    stage = tma_staging_tile(ctx, shape, tensor, lay)
    flat = ctx.shared(stage)
    first = binop("eq", ctx.tx, 0)
    loc = s.loc
    ops = box_stores(ctx, flat, tensor, dst.starts, boxes, loc, reduce="add")
    everything = tuple(range(flay.nregs))
    return SeqStmt((
        IfThenElse(first, AsyncWait("bulk", 0, loc), None, loc),
        write_slab(ctx, frag, flay, stage, everything, 0, rows, rows, loc),
        AsyncFence("proxy_async", loc),
        IfThenElse(first, SeqStmt(tuple(ops), loc), None, loc),
    ), loc)
