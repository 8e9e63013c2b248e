"""Epilogues: accumulator tiles leave through shared memory as wide stores; bounds checked per tile.

An accumulator fragment (the tensor-core C layout) holds short runs per thread — two
consecutive columns of eight rows per warp — so copying it straight to global memory issues
many narrow stores that split memory sectors. `stage_epilogue` instead writes the fragment into
a shared staging tile (its layout chosen by `tilecore.lower.smem` for that column-wise write and
the row-wise read, so neither conflicts) and copies the tile to global memory with the widest
vector accesses the destination allows; `insert-barriers` puts the barriers between the halves.
Rows go in rounds: registers are grouped by the tile rows they hold (a grouping that is the same
for every thread, tabulated from the layout), so each round's stores need no predicate, and
rounds are merged while the staging tile stays within the largest shared buffer allocated so
far. Staging applies only when the direct stores would split sectors (fact
`global_sector_bytes`) and the staged ones are wider; strided fragments are copied directly.

`split_interior` lowers a copy into global memory twice: without bounds checks for tiles that
lie entirely inside the tensor (one uniform test of the region against the tensor's shape per
tile) and with per-element checks for edge tiles.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.buffer import Buffer, Region
from ..ir.expr import Const, Expr, binop, cast, const, const_int, select
from ..ir.stmt import Copy, IfThenElse, SeqStmt, Stmt
from ..ir.thread import MemLoad, MemStore, VecMove
from .context import LowerCtx, all_of
from .indexing import simplify
from .layout import StridedLayout, has_runs
from .smem import planner
from .tma_store import tma_store_epilogue


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
    dims = [d for d, e in enumerate(dst.extents) if e != 1]
    if len(shape) != 2 or min(shape) < 2 or [dst.extents[d] for d in dims] != list(shape):
        return None
    lay = ctx.layout(frag)
    if isinstance(lay, StridedLayout) or lay.replicated:
        return None
    item = dst.buffer.dtype.itemsize
    vec = vector_width(ctx, copy, shape)
    sector = ctx.facts.get("global_sector_bytes")
    if sector and _fills_sectors(ctx, lay, vec, item, int(sector)):
        return None  # every direct warp store already writes whole memory sectors
    everything = tuple(range(lay.nregs))
    tma = tma_store_epilogue(ctx, copy, lambda stage: write_slab(ctx, frag, lay, stage, everything, 0,
                                                                    shape[0], shape[0], copy.loc))
    if tma is not None:
        return tma
    slabs = _slabs(ctx, lay, shape, item)
    if slabs is None:
        return None
    first, band, stride, nb = slabs[0][1:]
    stage = _staging(ctx, (nb * band, shape[1]), dst.buffer)
    probe = _band_region(dst, dims, first, band)
    if vector_width(ctx, Copy(Region(stage, (const(0), const(0)), (band, shape[1])), probe, copy.loc),
                    (band, shape[1])) <= vec:
        return None
    out: list[Stmt] = []
    for regs, first, band, stride, nb in slabs:
        out.append(write_slab(ctx, frag, lay, stage, regs, first, band, stride, copy.loc))
        for j in range(nb):
            part = Region(stage, (const(j * band), const(0)), (band, shape[1]))
            out.append(lower(ctx, Copy(part, _band_region(dst, dims, first + j * stride, band), copy.loc)))
    return SeqStmt(tuple(out), copy.loc)


def _slabs(ctx: LowerCtx, lay, shape: tuple, item: int):
    """The staging rounds: [(registers, first row, band rows, band stride, bands)], each round
    the rows held by a set of registers that is the same in every thread (so no thread needs a
    predicate) and lies in regular bands; rounds are merged while the staging tile stays within
    the largest shared buffer allocated so far (an operand tile). None when the layout's rows do
    not split that way or the tile does not fit half the shared memory."""
    coords, valid = lay.table
    rows_of = [set(coords[valid[:, r], r, 0].tolist()) for r in range(lay.nregs)]
    groups: list[tuple[set, list]] = []  # connected components of (register, row)
    for r, rows in enumerate(rows_of):
        hit = [g for g in groups if g[0] & rows]
        merged = (set(rows), [r])
        for g in hit:
            merged[0].update(g[0])
            merged[1].extend(g[1])
            groups.remove(g)
        groups.append(merged)
    groups.sort(key=lambda g: min(g[0]))
    budget = max((b.shape[0] * b.dtype.itemsize for b in ctx.shared_list), default=0)
    per = max(1, len(groups))
    while per > 1 and budget and per * len(groups[0][0]) * shape[1] * item > budget \
            and len(groups) % (per // 2) == 0:
        per //= 2
    if len(groups) % per:
        per = len(groups)
    out = []
    for k in range(0, len(groups), per):
        rows = sorted(set().union(*(g[0] for g in groups[k:k + per])))
        regs = sorted(r for g in groups[k:k + per] for r in g[1])
        bands = _bands(rows)
        if bands is None:
            return None
        out.append((tuple(regs),) + bands)
    if len({(b[2], b[4]) for b in out}) != 1:
        return None  # every round must fit the same staging tile
    limit = ctx.facts.shared_memory_bytes
    used = sum(b.shape[0] * b.dtype.itemsize for b in ctx.shared_list)
    if limit and used + out[0][2] * out[0][4] * shape[1] * item > limit // 2:
        return None
    return out


def _bands(rows: list) -> tuple[int, int, int, int] | None:
    """(first, band, stride, count) with rows = first + j * stride + [0, band), or None."""
    first = rows[0]
    runs = []
    for r in rows:
        if runs and r == runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([r, r + 1])
    band = runs[0][1] - runs[0][0]
    stride = runs[1][0] - runs[0][0] if len(runs) > 1 else band
    for j, (a, b) in enumerate(runs):
        if a != first + j * stride or b - a != band:
            return None
    return first, band, stride, len(runs)


def _band_region(dst: Region, dims: list, row0: int, band: int) -> Region:
    """Rows [row0, row0 + band) of the tile within the destination region."""
    d = dims[0]
    starts = tuple(s + row0 if k == d else s for k, s in enumerate(dst.starts))
    extents = tuple(band if k == d else e for k, e in enumerate(dst.extents))
    return Region(dst.buffer, starts, extents)


def store_run(ctx: LowerCtx, lay, stage_layout, itemsize: int, keep: set | None = None) -> int:
    """Elements per store when fragment layout `lay` is written into a staging tile placed by
    `stage_layout` (`write_slab`'s rule): the widest run of 8, 4 or 2 that fits a vector, that
    every thread's registers hold, that the layout keeps contiguous and (given `keep`, the
    registers stored) that `keep` holds whole; else 1."""
    return next((v for v in (8, 4, 2) if v * itemsize <= ctx.facts.vector_bytes
                 and has_runs(lay, v) and stage_layout.contiguous(v)
                 and (keep is None or all(set(range(r - r % v, r - r % v + v)) <= keep for r in keep))), 1)


def write_slab(ctx: LowerCtx, frag: Buffer, lay, stage: Buffer, regs_in: tuple, first: int,
               band: int, stride: int, loc, swap: tuple | None = None) -> Stmt:
    """Every thread stores its registers `regs_in` of `frag` (rows first + j * stride + [0, band))
    into the staging tile at row j * band + offset, converted to the tile's dtype, in runs as
    wide as the layout and the tile allow. `swap = (bit, partner)`: threads whose `bit` (an
    int expression of the thread index, 0 or 1) is 1 store run `partner[r]` where the others
    store run r (each run still stored once per thread: `partner` is an involution), so the
    lanes of one store may reach different columns (tilecore.lower.tma_reduce.store_swap)."""
    keep = set(regs_in)
    run = store_run(ctx, lay, ctx.smem_layout(stage), stage.dtype.itemsize, keep)
    regs = ctx.regs(frag)
    flat = ctx.shared(stage)
    tmp = ctx.new_regs(f"{stage.name}_vec", run, stage.dtype) if run > 1 else None
    out: list[Stmt] = []
    for r in sorted(keep):
        if r % run:
            continue
        row, col = lay.coords(ctx.tx, r)
        src = [MemLoad(regs, const(r + k)) for k in range(max(run, 1))]
        if swap is not None and r in swap[1]:
            bit, p = swap[0], swap[1][r]
            delta = ctx.simp(lay.coords(ctx.tx, p)[-1] - col)  # the same for every thread
            col = ctx.simp(col + bit * delta)
            on = binop("eq", bit, 1)
            src = [select(on, MemLoad(regs, const(p + k)), v) for k, v in enumerate(src)]
        rel = ctx.simp(row - first)
        srow = ctx.simp(binop("div", rel, stride) * band + binop("mod", rel, stride)) if stride != band \
            else rel
        off = ctx.offset(stage, (srow, col))
        pred = lay.valid(ctx.tx, r)
        if tmp is None:
            out.append(MemStore(flat, off, cast(src[0], stage.dtype), pred, loc))
            continue
        for k in range(run):
            out.append(MemStore(tmp, const(k), cast(src[k], stage.dtype), None, loc))
        out.append(VecMove(flat, off, tmp, const(0), run, pred, False, loc))
    return SeqStmt(tuple(out), loc)


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
