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
    thread 0: one `TmaStore(reduce="add")` per 128-byte panel of the tile, commit the group

so the additions are done by the TMA unit next to L2 (each element atomically, clipped at the
tensor's edge like a TMA store) while the threads go on with the next tile. This is the same
staging, fence and group discipline as tilecore.lower.tma_store (whose staging tile and
shared-memory fit test it shares); `proxy-fences` ends the kernel with the wait for the bulk
group's shared reads.

The staging tile keeps the widest canonical span (128-byte panels), where the float32
accumulator's 8-byte stores in fragment order are 2-way bank conflicted (rows r and r ^ 1 of a
phase share banks); `store_swap` has half the lanes store a partner run instead, which makes
them conflict-free with the same boxes (off under `tilecore.disable_staged_swizzle`). 32-byte
panels were conflict-free too but need four times the boxes: on the H200 a tie without a mask
and 7% slower causal (BENCHMARKS.md, "staged-tile swizzle").

Applies to a whole float32 fragment of two non-unit dimensions, added into a global float32
region whose last dimension is the tile's columns (other dimensions may be 1: dQ[b, rows, h, :]),
with static 16-byte row strides, where the staging tile fits (`tma_store.staging_fits`). Elsewhere,
or with `disable_tma_lower`, the per-element atomics are kept and a TileConfigWarning names
the line and why (TileLang's `use_tma` is never dropped silently).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import TileConfigWarning
from ..ir.expr import binop
from ..ir.smem_layout import canonical_layout
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


def store_swap(ctx: LowerCtx, flay, lay, itemsize: int) -> tuple | None:
    """A register exchange making the fragment's stores into the staging tile (layout `lay`)
    conflict-free, or None when they already are (or nothing tried makes them so, or
    `disable_staged_swizzle`): `(bit, partner)` for `write_slab`. Tried: the threads whose lane
    bit b is set store, in place of each register run, the run `m` columns over (col ^ m, the
    same register for every thread); the first (m, b) whose stores, tabulated as issued
    (`smem.store_degree`), are conflict-free wins. A float32 accumulator in 128-byte panels
    stores 8 bytes per lane, four rows of 32 bytes per phase, rows r and r ^ 1 in the same
    banks (2-way); the upper half of each quad of lanes (lane bit 1) storing the run 16
    columns over fills the line."""
    model = bank_model(ctx.facts)
    if model is None or ctx.options.disable_staged_swizzle:
        return None
    coords, valid = flay.table
    if not valid.all() or coords.shape[-1] != 2:
        return None
    run = store_run(ctx, flay, lay, itemsize)
    warp = ctx.warp_size
    if store_degree(lay, coords, valid, run, itemsize, model, warp) == 1:
        return None
    lane = np.arange(coords.shape[0]) % warp
    cols = flay.shape[-1]
    for m in (run << k for k in range(cols.bit_length())):
        if m >= cols:
            break
        partner = {}
        for r in range(0, flay.nregs, run):
            want = coords[:, r].copy()
            want[:, -1] ^= m
            p = flay.find_reg(want)
            if p is None or p % run:
                break
            partner[r] = p
        else:
            for b in range(warp.bit_length() - 1):
                on = (lane >> b) & 1 == 1
                moved = coords.copy()
                for r, p in partner.items():
                    moved[on, r:r + run] = coords[on, p:p + run]
                if store_degree(lay, moved, valid, run, itemsize, model, warp) == 1:
                    bit = binop("mod", binop("div", ctx.tx, 1 << b), 2) if b else binop("mod", ctx.tx, 2)
                    return ctx.simp(bit), partner
    return None


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
    lay = canonical_layout(rows, cols, tensor.dtype.itemsize)
    boxes = None if lay is None else tma_boxes(lay, box, tensor.dtype.itemsize)
    if boxes is None or not all(box_ok(tensor, b[2]) for b in boxes):
        _refuse(s, "the tile or the tensor's row strides are not what a tensor map takes "
                   "(rows a multiple of 8, rows of 16-byte multiples)")
        return None
    flay = ctx.layout(frag)
    if isinstance(flay, StridedLayout):
        _refuse(s, "the fragment has no accumulator layout")
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
        write_slab(ctx, frag, flay, stage, everything, 0, rows, rows, loc,
                   store_swap(ctx, flay, lay, tensor.dtype.itemsize)),
        AsyncFence("proxy_async", loc),
        IfThenElse(first, SeqStmt(tuple(ops), loc), None, loc),
    ), loc)
