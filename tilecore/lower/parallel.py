"""T.Parallel loops, copies, fills and region atomics, partitioned over the block's threads.

Each of these is an iteration space (the loop extents, or a region's shape) dealt to threads by
a layout: the fragment the loop writes (or reads) decides it, else a strided layout. Register r
of the layout becomes one unrolled copy of the body with the loop variables replaced by the
coordinates thread `tx` holds in r. Copies between global/shared/fragment with one dtype use
vector accesses (up to 16 bytes) where contiguity and alignment are provable; global reads
outside the tensor give 0 and global writes outside it are dropped.
"""

from __future__ import annotations

from ..errors import TileShapeError
from ..ir.buffer import Buffer, Region
from ..ir.expr import Const, Expr, Load, Var, binop, cast, const, linear
from ..ir.stmt import AtomicAddRegion, Copy, Fill, For, IfThenElse, SeqStmt, Stmt, Store
from ..ir.thread import Atomic, MemLoad, MemStore, VecMove
from ..ir.visit import walk
from .body import BodyLowerer, writer_pred
from .context import LowerCtx, all_of, flat_offset
from .epilogue import split_interior, stage_epilogue
from .indexing import simplify
from .inner_loops import bind_rows, check_inner_writes, extended_fragments, inner_indexed_writes
from .layout import Layout, StridedLayout, default_layout, equivalent, has_runs
from .vectorize import fold_selects, vectorize_group


def parallel_nest(loop: For) -> tuple[list[Var], list[int], Stmt]:
    """The variables, constant extents and body of directly nested T.Parallel loops."""
    vars_, exts = [], []
    s: Stmt = loop
    while isinstance(s, For) and s.kind == "parallel":
        n = _const(s.stop, s.loc)
        if _const(s.start, s.loc) != 0:
            raise TileShapeError("T.Parallel loops start at 0", s.loc,
                                 hint="loop from 0 and add the offset to the index")
        vars_.append(s.var)
        exts.append(n)
        s = s.body
        if isinstance(s, SeqStmt) and len(s.stmts) == 1 and isinstance(s.stmts[0], For) \
                and s.stmts[0].kind == "parallel":
            s = s.stmts[0]
    return vars_, exts, s


def _const(e, loc) -> int:
    from ..ir.expr import const_int

    v = const_int(e)
    if v is None:
        raise TileShapeError("T.Parallel extents must be compile-time constants", loc,
                             hint="loop over the tile shape and mask with `if`")
    return v


def fragment_accesses(body: Stmt):
    """(buffer, indices, is_write, loc) for every fragment element access in `body`."""
    out = []
    for n in walk(body):
        if isinstance(n, Store) and n.buffer.scope == "fragment":
            out.append((n.buffer, n.indices, True, n.loc))
        elif isinstance(n, Load) and n.buffer.scope == "fragment":
            out.append((n.buffer, n.indices, False, None))
    return out


def memory_itemsize(body: Stmt) -> int | None:
    """The narrowest itemsize of the global/shared buffers `body` reads or writes (None when it
    touches no memory): the dtype a layout partitioning `body` should size its runs for."""
    sizes = [n.buffer.dtype.itemsize for n in walk(body)
             if isinstance(n, (Load, Store)) and n.buffer.scope in ("global", "shared")]
    return min(sizes) if sizes else None


def is_identity(indices, vars_) -> bool:
    """True when `indices` are exactly the loop variables, in order."""
    return len(indices) == len(vars_) and all(i is v for i, v in zip(indices, vars_))


def loop_layout(ctx: LowerCtx, vars_, exts, body) -> tuple[Layout, str]:
    """The layout a parallel nest is partitioned by: a fragment it writes (else reads) with the
    loop variables as indices, else strided over the extents; and where that layout came from."""
    acc = fragment_accesses(body)
    for want_write in (True, False):
        for buf, idx, w, _ in acc:
            if w == want_write and is_identity(idx, vars_) and tuple(buf.shape) == tuple(exts):
                return ctx.layout(buf), f"the layout of {buf.name} (from {ctx.layouts.origin(buf)})"
    return default_loop_layout(exts, ctx.threads, body, ctx.facts.vector_bytes), "a strided layout"


def default_loop_layout(exts, threads: int, body: Stmt, vector_bytes: int) -> Layout:
    """The strided layout a nest over `exts` that indexes no fragment with its loop variables is
    dealt by (its runs sized for the memory `body` moves); layout inference extends it to the
    fragments the nest writes through inner loops (`tilecore.lower.inner_loops`)."""
    return default_layout(tuple(exts), threads, memory_itemsize(body) or 4, vector_bytes)


def partition(ctx: LowerCtx, vars_, layout: Layout, body: Stmt, loc, origin: str = "") -> Stmt:
    """One copy of `body` per register of `layout`, loop variables bound to its coordinates;
    its memory stores and atomics run in one holder of a replicated element (`writer_pred`)."""
    _, valid_t = layout.table
    staged: dict = {}
    pre: list[Stmt] = []
    bodies: list[Stmt | None] = []
    rows = extended_fragments(ctx, body, vars_, layout)
    for r in range(layout.nregs):
        if not valid_t[:, r].any():
            bodies.append(None)
            continue
        coords = layout.coords(ctx.tx, r)
        bl = BodyLowerer(ctx, True, loc, active=valid_t[:, r],
                         subst={id(v): c for v, c in zip(vars_, coords)}, staged=staged)
        bl.partition_origin = origin
        bind_rows(bl, rows, coords, r)
        bl.writer = writer_pred(ctx, layout, r, valid_known=True)
        bodies.append(fold_selects(bl.stmt(body)))
        pre.extend(bl.pre)
    vec = layout.vec if isinstance(layout, StridedLayout) else 1
    out: list[Stmt] = []
    for r0 in range(0, layout.nregs, vec):
        group = bodies[r0:r0 + vec]
        if vec > 1 and all(b is not None for b in group):
            merged = vectorize_group(ctx, group, vec, loc)
            if merged is not None:
                # a run shares its validity: numel is a multiple of vec for vector layouts
                group = [merged]
        for k, s in enumerate(group):
            if s is None:
                continue
            valid = layout.valid(ctx.tx, r0 + k)
            out.append(s if valid is None else IfThenElse(valid, s, None, loc))
    return SeqStmt(tuple(pre + out), loc)


def lower_parallel(ctx: LowerCtx, loop: For) -> Stmt:
    """A T.Parallel nest, partitioned over threads."""
    vars_, exts, body = parallel_nest(loop)
    acc = fragment_accesses(body)
    identity = any(w and is_identity(idx, vars_) and tuple(b.shape) == tuple(exts) for b, idx, w, _ in acc)
    rows = inner_indexed_writes(body, vars_)
    if not identity and not rows:
        for buf, idx, w, _ in acc:
            if w and all(any(i is v for i in idx) for v in vars_):
                return owner_partition(ctx, vars_, exts, body, buf, idx, loop.loc)
    layout, origin = loop_layout(ctx, vars_, exts, body)
    check_inner_writes(ctx, rows, layout, origin)
    return partition(ctx, vars_, layout, body, loop.loc, origin)


def owner_partition(ctx: LowerCtx, vars_, exts, body: Stmt, frag: Buffer, idx, loc) -> Stmt:
    """Partition by the registers of a written fragment indexed by every loop variable plus other
    expressions (`t[i, j]` in a loop over j only): the thread holding the element runs the
    iteration, when the other indices match its coordinates."""
    lay = ctx.layout(frag)
    pos = {}
    for k, v in enumerate(vars_):
        pos[k] = next(d for d, i in enumerate(idx) if i is v)
    fixed = [d for d in range(len(idx)) if d not in pos.values()]
    _, valid_t = lay.table
    staged: dict = {}
    pre: list[Stmt] = []
    out: list[Stmt] = []
    for r in range(lay.nregs):
        c = lay.coords(ctx.tx, r)
        bl = BodyLowerer(ctx, True, loc, active=valid_t[:, r],
                         subst={id(vars_[k]): c[d] for k, d in pos.items()}, staged=staged)
        bl.owned[id(frag)] = (tuple(idx), r)
        bl.writer = writer_pred(ctx, lay, r, valid_known=True)
        conds = [lay.valid(ctx.tx, r)]
        conds += [binop("eq", c[d], bl.expr(idx[d])) for d in fixed]
        conds += [binop("lt", c[d], exts[k]) for k, d in pos.items() if exts[k] < frag.shape[d]]
        s = bl.stmt(body)
        pre.extend(bl.pre)
        cond = all_of(conds)
        out.append(s if cond is None else IfThenElse(ctx.simp(cond), s, None, loc))
    return SeqStmt(tuple(pre + out), loc)


# --------------------------------------------------------------------------- regions


def frag_copy_layout(ctx: LowerCtx, r: Region, shape) -> Layout | None:
    """The layout of the whole fragment `r` when a copy (or region atomic) over `shape` (the
    squeezed region shape) can be partitioned by it, else None. The fragment may keep unit
    dimensions the region squeezes away: a (1, W) fragment against the 1-row region X[bx, 0:W]
    is partitioned by its own (1, W) layout, not by a (W,) layout it does not have."""
    return ctx.layout(r.buffer) if whole_fragment(r, shape) else None


def whole_fragment(r: Region, shape) -> bool:
    """True when region `r` is a whole fragment whose shape is `shape` (a copy's squeezed shape)
    up to unit dimensions (see `frag_copy_layout`)."""
    b = r.buffer
    if b.scope != "fragment" or not r.is_full:
        return False
    return tuple(b.shape) == tuple(shape) or (tuple(s for s in b.shape if s != 1) or (1,)) == tuple(shape)


def squeeze_coords(layout: Layout, coords) -> list:
    """The coordinates of a copy layout's element along the region's squeezed dimensions (the
    layout's non-unit ones; see `frag_copy_layout`), for `region_index`."""
    return [c for c, n in zip(coords, layout.shape) if n != 1]


def region_index(r: Region, loop_idx) -> tuple[Expr, ...]:
    """Full buffer indices of a region element given indices over its squeezed shape."""
    it = iter(loop_idx)
    out = []
    for s, n in zip(r.starts, r.extents):
        out.append(s if n == 1 else s + next(it))
    return tuple(out)


def in_bounds(buf: Buffer, idx, bounds: dict | None = None) -> Expr | None:
    """The condition that `idx` lies inside global tensor `buf` (None when provably true: for
    constant indices, or with `bounds`, the known variable ranges, for the ones they decide --
    a block index below its constant grid extent keeps `bx * 128 + i < 4096` unguarded)."""
    conds = []
    for i, s in zip(idx, buf.shape):
        lin = linear(i)
        if lin is not None and not lin[0] and isinstance(s, int) and 0 <= lin[1] < s:
            continue
        c = binop("and", binop("ge", i, 0), binop("lt", i, s))
        if bounds is not None:
            c = simplify(c, bounds)
            if isinstance(c, Const) and c.value is True:
                continue
        conds.append(c)
    return all_of(conds)


def _loop_bounds(ctx: LowerCtx, vars_, shape) -> dict:
    """The known ranges plus those of a region's loop variables (each in [0, extent))."""
    out = ctx.bounds
    for v, n in zip(vars_, shape):
        out[id(v)] = (0, n - 1)
    return out


def _aligned(e: Expr, vec: int) -> bool:
    lin = linear(e)
    return lin is not None and lin[1] % vec == 0 and all(c % vec == 0 for c in lin[0].values())


def _vector_width(ctx: LowerCtx, copy: Copy, shape) -> int:
    """The widest vector (elements) a copy can use, 1 when none (or `Options.disable_vectorize`).

    Only the memory sides (global, shared) are accesses of at most `vector_bytes`; a fragment
    side is registers, filled or drained element by element when the dtypes differ, so an
    fp16 -> fp32 copy moves 8 elements per 16-byte load. A register-to-register copy (one
    VecMove between register arrays) is limited by its own dtype."""
    src, dst = copy.src, copy.dst
    if not shape or ctx.options.disable_vectorize:
        return 1
    if src.buffer.scope == dst.buffer.scope == "fragment" and \
            not equivalent(ctx.layout(src.buffer), ctx.layout(dst.buffer)):
        return 1  # register runs line up only when both fragments share the layout
    sides = [r.buffer.dtype.itemsize for r in (src, dst) if r.buffer.scope in ("global", "shared")]
    widest = max(sides or [src.buffer.dtype.itemsize, dst.buffer.dtype.itemsize])
    vec = max(1, min(ctx.facts.vector_bytes, 16) // widest)
    while vec > 1:
        if shape[-1] % vec == 0 and all(_side_vectorizes(ctx, r, shape, vec) for r in (src, dst)):
            return vec
        vec //= 2
    return 1


def _side_vectorizes(ctx: LowerCtx, r: Region, shape, vec: int) -> bool:
    """True when one side of a copy over `shape` can move runs of `vec` elements as one access:
    a whole fragment whose layout holds aligned runs of `vec` (`frag_copy_layout`), or memory
    whose rows keep `vec` columns contiguous and aligned."""
    b = r.buffer
    if r.extents[-1] == 1 or not isinstance(b.shape[-1], int) or b.shape[-1] % vec:
        return False
    if b.scope == "fragment":
        return frag_copy_layout(ctx, r, shape) is not None and has_runs(ctx.layout(b), vec)
    return all(isinstance(s, int) for s in b.shape[:-1]) and _aligned(r.starts[-1], vec) \
        and ctx.vector_ok(b, vec)


def uniform_nest(ctx: LowerCtx, vars_, exts, body: Stmt, loc) -> Stmt:
    """Serial loops over the extents that every thread runs in full (per-thread `local` data)."""
    bl = BodyLowerer(ctx, False, loc)
    inner = bl.stmt(body)
    for v, n in reversed(list(zip(vars_, exts))):
        inner = For(v, const(0), const(n), 1, "serial", inner, (), loc)
    return SeqStmt(tuple(bl.pre) + (inner,), loc)


def lower_copy(ctx: LowerCtx, copy: Copy) -> Stmt:
    """T.copy between global, shared and fragment memory. Accumulator tiles bound for global
    memory go through a shared staging tile when that makes the stores wider (see
    `tilecore.lower.epilogue`); copies into global memory check bounds once per tile when
    they can (`split_interior`)."""
    src, dst = copy.src, copy.dst
    shape = src.squeezed_shape or (1,)
    if (dst.squeezed_shape or (1,)) != shape:
        raise TileShapeError(f"copy shapes differ: {src.extents} vs {dst.extents}", copy.loc,
                             hint="make both sides of T.copy the same tile shape")
    copy = _loads_in_starts_lowered(ctx, copy)
    staged = stage_epilogue(ctx, copy, lower_copy, _vector_width)
    if staged is not None:
        return staged
    if dst.buffer.scope == "global" and src.buffer.scope != "global":
        return split_interior(ctx, dst, lambda guard: _lower_copy(ctx, copy, guard), copy.loc)
    return _lower_copy(ctx, copy, True)


def _loads_in_starts_lowered(ctx: LowerCtx, copy: Copy) -> Copy:
    """`copy` with element reads nested in its region starts (a paged cache's
    `K[table[b, p], ...]`) turned into memory loads: the copy's addresses are computed from the
    starts as they are, so a tile-level Load left there would reach the thread IR."""
    from dataclasses import replace

    def lowered(r: Region) -> Region:
        if not any(isinstance(n, Load) for st in r.starts for n in walk(st)):
            return r
        bl = BodyLowerer(ctx, False, copy.loc)
        return replace(r, starts=tuple(bl.expr(st) for st in r.starts))

    src, dst = lowered(copy.src), lowered(copy.dst)
    return copy if (src is copy.src and dst is copy.dst) else replace(copy, src=src, dst=dst)


def _lower_copy(ctx: LowerCtx, copy: Copy, guard: bool) -> Stmt:
    """The copy, with (guard) or without per-element bounds checks on a global destination."""
    src, dst = copy.src, copy.dst
    shape = src.squeezed_shape or (1,)
    if dst.buffer.scope == "local":  # every thread holds its own copy of a local buffer
        vars_ = [Var(f"c{k}") for k in range(len(shape))]
        sidx = region_index(src, vars_) if src.squeezed_shape else tuple(src.starts)
        didx = region_index(dst, vars_) if dst.squeezed_shape else tuple(dst.starts)
        value = _guarded_load(src.buffer, sidx, _loop_bounds(ctx, vars_, shape)) \
            if src.buffer.scope == "global" else Load(src.buffer, sidx)
        body = Store(dst.buffer, didx, cast(value, dst.buffer.dtype), copy.loc)
        return uniform_nest(ctx, vars_, shape, body, copy.loc)
    vec = _vector_width(ctx, copy, shape)
    layout = frag_copy_layout(ctx, dst, shape) or frag_copy_layout(ctx, src, shape)
    if layout is None:
        layout = StridedLayout(tuple(shape), ctx.threads, vec)
    if vec > 1:
        return _vector_copy(ctx, copy, layout, vec, guard)
    # one variable per layout dimension; the region indices take the non-unit ones
    vars_ = [Var(f"c{k}") for k in range(len(layout.shape))]
    sq = squeeze_coords(layout, vars_)
    sidx = region_index(src, sq) if src.squeezed_shape else tuple(src.starts)
    didx = region_index(dst, sq) if dst.squeezed_shape else tuple(dst.starts)
    value: Expr = Load(src.buffer, sidx)
    if src.buffer.scope == "global":
        value = _guarded_load(src.buffer, sidx, _loop_bounds(ctx, vars_, layout.shape))
    body: Stmt = Store(dst.buffer, didx, cast(value, dst.buffer.dtype), copy.loc)
    if dst.buffer.scope == "global" and guard:
        cond = in_bounds(dst.buffer, didx, _loop_bounds(ctx, vars_, layout.shape))
        if cond is not None:
            body = IfThenElse(cond, body, None, copy.loc)
    return partition(ctx, vars_, layout, body, copy.loc)


def _guarded_load(buf: Buffer, idx, bounds: dict | None = None) -> Expr:
    from ..ir.expr import select

    cond = in_bounds(buf, idx, bounds)
    load = Load(buf, idx)
    if cond is None:
        return load
    # the select keeps the load from executing outside the tensor
    return select(cond, load, cast(0, buf.dtype))


def _vector_copy(ctx: LowerCtx, copy: Copy, layout: Layout, vec: int, guard: bool = True) -> Stmt:
    """Each thread's runs of `vec` elements as one access per side; a dtype change goes through
    registers (vector in, convert element-wise, vector out). `guard=False` drops the bounds
    predicates of a global destination (the caller proved the tile interior)."""
    src, dst = copy.src, copy.dst
    same = src.buffer.dtype == dst.buffer.dtype
    tmp_s = tmp_d = None
    if not same and src.buffer.scope != "fragment":
        tmp_s = ctx.new_regs(f"{src.buffer.name}_vec", vec, src.buffer.dtype)
    if not same and dst.buffer.scope != "fragment":
        tmp_d = ctx.new_regs(f"{dst.buffer.name}_vec", vec, dst.buffer.dtype)
    out: list[Stmt] = []
    for r in range(0, layout.nregs, vec):
        coords = squeeze_coords(layout, layout.coords(ctx.tx, r))
        sidx, didx = region_index(src, coords), region_index(dst, coords)
        sbuf, soff = _vec_side(ctx, src.buffer, sidx, r)
        dbuf, doff = _vec_side(ctx, dst.buffer, didx, r)
        # no predicate where the known ranges (block index < grid extent) prove the access inside
        spred = in_bounds(src.buffer, sidx, ctx.bounds) if src.buffer.scope == "global" else None
        dpred = in_bounds(dst.buffer, didx, ctx.bounds) if dst.buffer.scope == "global" and guard \
            else None
        zero_fill = src.buffer.scope == "global" and dst.buffer.scope != "global"
        # the T.copy's eviction_policy travels with the access of the global side
        hint = copy.cache_hint if "global" in (src.buffer.scope, dst.buffer.scope) else ""
        group: list[Stmt] = []
        if same:
            group.append(VecMove(dbuf, doff, sbuf, soff, vec, all_of([spred, dpred]), zero_fill, copy.loc,
                                 hint))
        else:
            if tmp_s is not None:
                group.append(VecMove(tmp_s, const(0), sbuf, soff, vec, spred, spred is not None, copy.loc,
                                     hint))
                vals = [MemLoad(tmp_s, const(k)) for k in range(vec)]
            else:
                vals = [MemLoad(sbuf, soff + k) for k in range(vec)]
            target, base = (tmp_d, 0) if tmp_d is not None else (dbuf, r)
            for k, v in enumerate(vals):
                group.append(MemStore(target, const(base + k), cast(v, dst.buffer.dtype), None, copy.loc))
            if tmp_d is not None:
                group.append(VecMove(dbuf, doff, tmp_d, const(0), vec, dpred, False, copy.loc, hint))
        move: Stmt = group[0] if len(group) == 1 else SeqStmt(tuple(group), copy.loc)
        # a replicated source fragment: one replica stores each run to memory
        valid = all_of([layout.valid(ctx.tx, r), writer_pred(ctx, layout, r, valid_known=True)
                        if dst.buffer.scope in ("global", "shared") else None])
        out.append(move if valid is None else IfThenElse(valid, move, None, copy.loc))
    return SeqStmt(tuple(out), copy.loc)


def _vec_side(ctx: LowerCtx, buf: Buffer, idx, r: int) -> tuple[Buffer, Expr]:
    if buf.scope == "fragment":
        return ctx.regs(buf), const(r)
    if buf.scope == "shared":
        return ctx.shared(buf), ctx.offset(buf, idx)
    if buf.scope == "local":
        return ctx.regs(buf), flat_offset(buf, idx, ctx.bounds, ctx.wide(buf))
    return buf, flat_offset(buf, idx, ctx.bounds, ctx.wide(buf))


def lower_fill(ctx: LowerCtx, fill: Fill) -> Stmt:
    """T.fill / T.clear of a region."""
    d = fill.dst
    buf = d.buffer
    if buf.scope == "fragment":
        lay = ctx.layout(buf)
        regs = ctx.regs(buf)
        v = cast(fill.value, buf.dtype)
        out = []
        for r in range(lay.nregs):
            conds = []
            if not d.is_full:
                for c, s, n in zip(lay.coords(ctx.tx, r), d.starts, d.extents):
                    conds.append(binop("and", binop("ge", c, s), binop("lt", c, s + n)))
            out.append(MemStore(regs, const(r), v, all_of(conds), fill.loc))
        return SeqStmt(tuple(out), fill.loc)
    shape = d.squeezed_shape or (1,)
    vars_ = [Var(f"f{k}") for k in range(len(shape))]
    idx = region_index(d, vars_) if d.squeezed_shape else tuple(d.starts)
    body: Stmt = Store(buf, idx, cast(fill.value, buf.dtype), fill.loc)
    if buf.scope == "local":
        return uniform_nest(ctx, vars_, shape, body, fill.loc)
    if buf.scope == "global":
        cond = in_bounds(buf, idx, _loop_bounds(ctx, vars_, shape))
        if cond is not None:
            body = IfThenElse(cond, body, None, fill.loc)
    return partition(ctx, vars_, StridedLayout(tuple(shape), ctx.threads, 1), body, fill.loc)


def lower_atomic_region(ctx: LowerCtx, s: AtomicAddRegion) -> Stmt:
    """T.atomic_add(dst_region, src_tile): one atomic per element, dropped outside the tensor."""
    src, dst = s.src, s.dst
    shape = src.squeezed_shape or (1,)
    layout = frag_copy_layout(ctx, src, shape)
    if layout is None:
        layout = StridedLayout(tuple(shape), ctx.threads, 1)
    out: list[Stmt] = []
    staged: dict = {}
    _, valid_t = layout.table
    for r in range(layout.nregs):
        coords = squeeze_coords(layout, layout.coords(ctx.tx, r))
        bl = BodyLowerer(ctx, True, s.loc, active=valid_t[:, r], staged=staged)
        sidx, didx = region_index(src, coords), region_index(dst, coords)
        v = cast(bl.expr(Load(src.buffer, sidx)), dst.buffer.dtype)
        target = dst.buffer if dst.buffer.scope == "global" else ctx.shared(dst.buffer)
        conds = [layout.valid(ctx.tx, r), writer_pred(ctx, layout, r, valid_known=True)]
        if dst.buffer.scope == "global":
            conds.append(in_bounds(dst.buffer, didx, ctx.bounds))
        out.extend(bl.pre)
        out.append(Atomic("add", target, ctx.offset(dst.buffer, didx), v, all_of(conds),
                          s.loc))
    return SeqStmt(tuple(out), s.loc)

