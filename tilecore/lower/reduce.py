"""reduce_* and cumsum over fragments and shared buffers.

Fast path (the destination's layout is the source's layout sliced along the reduced dim):
each thread combines its own registers, then the threads of a warp holding the same output
element combine with butterfly shuffles (`Shuffle` xor), then the warps holding it combine
through a shared scratch array. Which lanes and warps take part is read off the layouts'
tables, so any layout (strided, tensor-core, ...) works. Every other case stages the source in
shared memory and lets each owner of an output element loop over the reduced dimension.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..ir.buffer import Buffer
from ..ir.expr import Expr, Var, binop, bitwise, cast, const, unary
from ..ir.stmt import BIT_REDUCE_KINDS, CumSum, For, IfThenElse, Reduce, SeqStmt, Stmt
from ..ir.thread import MemLoad, MemStore, Shuffle
from ..semantics import accumulator_dtype
from .body import stage_fragment
from .context import LowerCtx, flat_offset
from .layout import Layout, SliceLayout, StridedLayout, equivalent, slice_layout


def combine(kind: str, a: Expr, b: Expr) -> Expr:
    """The binary operation of reduction `kind`."""
    if kind in BIT_REDUCE_KINDS:
        return bitwise(kind, a, b)
    if kind in ("sum", "abssum"):
        return binop("add", a, b)
    if kind in ("max", "absmax"):
        return binop("max", a, b)
    return binop("min", a, b)


def identity(kind: str, d: dt.DType) -> Expr:
    """The neutral element of reduction `kind` in dtype `d`."""
    if kind == "bitand":  # every bit set: -1 in two's complement, the maximum when unsigned
        return cast(dt.max_value(d) if d.kind == "uint" else -1, d)
    if kind in ("sum", "abssum", "absmax", "bitor", "bitxor"):
        return cast(0, d)
    if d.is_float:
        return cast(float("-inf") if kind == "max" else float("inf"), d)
    return cast(dt.min_value(d) if kind == "max" else dt.max_value(d), d)


def _element(kind: str, v: Expr, acc: dt.DType) -> Expr:
    v = cast(v, acc)
    return unary("abs", v) if kind in ("abssum", "absmax") else v


def lower_reduce(ctx: LowerCtx, s: Reduce) -> Stmt:
    """T.reduce_<kind>(src, dst, dim, clear)."""
    src, dst = s.src, s.dst
    if src.scope == "fragment" and dst.scope == "fragment":
        sl = ctx.layout(src)
        dl = slice_layout(sl, s.dim)
        # the destination may carry an equal slice of another fragment's layout (same rows)
        if isinstance(dl, SliceLayout) and tuple(dst.shape) == dl.shape and not sl.replicated \
                and equivalent(dl, ctx.layout(dst)):
            plan = _shuffle_plan(ctx, dl)
            if plan is not None:
                return _fast_reduce(ctx, s, sl, dl, *plan)
    return _generic_reduce(ctx, s)


def _shuffle_plan(ctx: LowerCtx, dl: SliceLayout):
    """(xor masks, cross-warp needed, every scratch slot written) for a sliced layout, or None."""
    T, W = ctx.threads, ctx.warp_size
    coords, _ = dl.table
    flat = dl.flat_index(coords)  # (T, nregs)
    masks = []
    if T % W == 0:
        tx = np.arange(T)
        m = 1
        while m < W:
            if np.array_equal(flat, flat[tx ^ m]):
                masks.append(m)
            m *= 2
    # after the butterfly, lanes of a warp holding an element must all hold the same partial:
    # the holders in one warp are exactly one coset of the xor group of `masks`
    group = 1 << len(masks)
    nw = -(-T // W)
    numel = int(np.prod(dl.shape))
    holders = np.zeros((nw, numel), dtype=np.int64)
    for t in range(T):
        holders[t // W, flat[t]] += 1
    if np.any((holders != 0) & (holders != group)):
        return None
    cross = bool(np.any((holders != 0).sum(axis=0) > 1))
    full = bool(np.all(holders != 0))
    return masks, cross, full


def _fast_reduce(ctx: LowerCtx, s: Reduce, sl: Layout, dl: SliceLayout, masks, cross, full) -> Stmt:
    src, dst = s.src, s.dst
    acc = accumulator_dtype(src.dtype)
    sregs, dregs = ctx.regs(src), ctx.regs(dst)
    part = ctx.new_regs(f"{dst.name}_part", dl.nregs, acc)
    out: list[Stmt] = []
    for g, members in enumerate(dl.groups):
        v: Expr = _element(s.kind, MemLoad(sregs, const(members[0])), acc)
        for r in members[1:]:
            v = combine(s.kind, v, _element(s.kind, MemLoad(sregs, const(r)), acc))
        out.append(MemStore(part, const(g), v, None, s.loc))
    for m in masks:
        for g in range(dl.nregs):
            cur = MemLoad(part, const(g))
            other = Shuffle(cur, "xor", const(m), ctx.warp_size)
            out.append(MemStore(part, const(g), combine(s.kind, cur, other), None, s.loc))
    if cross:
        nw = -(-ctx.threads // ctx.warp_size)
        numel = int(np.prod(dl.shape))
        scratch = ctx.scratch_shared(("reduce", acc.name), "red_scratch", nw * numel, acc)
        if not full:
            n = nw * numel
            for k in range(-(-n // ctx.threads)):
                off = ctx.simp(ctx.tx + k * ctx.threads)
                pred = None if (k + 1) * ctx.threads <= n else binop("lt", off, n)
                out.append(MemStore(scratch, off, identity(s.kind, acc), pred, s.loc))
        lane_bits = 0
        for m in masks:
            lane_bits |= m
        rep = binop("eq", ctx.lane() % (lane_bits + 1), 0) if lane_bits else None
        if lane_bits and lane_bits & (lane_bits + 1):
            rep = binop("eq", _bitand(ctx.lane(), lane_bits), 0)
        warp = ctx.warp()
        for g in range(dl.nregs):
            d = flat_offset(dst, dl.coords(ctx.tx, g), ctx.bounds, ctx.wide(dst))
            out.append(MemStore(scratch, ctx.simp(warp * numel + d), MemLoad(part, const(g)), rep, s.loc))
        for g in range(dl.nregs):
            d = flat_offset(dst, dl.coords(ctx.tx, g), ctx.bounds, ctx.wide(dst))
            v = MemLoad(scratch, d)
            for w in range(1, nw):
                v = combine(s.kind, v, MemLoad(scratch, ctx.simp(d + w * numel)))
            out.append(MemStore(part, const(g), v, None, s.loc))
    for g in range(dl.nregs):
        total: Expr = cast(MemLoad(part, const(g)), dst.dtype)
        if not s.clear:
            total = combine(s.kind, MemLoad(dregs, const(g)), total)
        out.append(MemStore(dregs, const(g), cast(total, dst.dtype), None, s.loc))
    return SeqStmt(tuple(out), s.loc)


def _bitand(e: Expr, mask: int) -> Expr:
    """`e & mask` for a non-negative e, written with div/mod (the expression set has no bit ops)."""
    out: Expr = const(0)
    b = 0
    while mask >> b:
        if mask >> b & 1:
            out = out + (e // (1 << b)) % 2 * (1 << b)
        b += 1
    return out


def _source(ctx: LowerCtx, buf: Buffer, loc) -> tuple[Buffer, list[Stmt]]:
    """A shared buffer holding `buf` row-major (the buffer itself when it is shared)."""
    if buf.scope == "shared":
        return ctx.shared(buf), []
    if buf.scope == "fragment":
        return stage_fragment(ctx, buf, loc)
    from ..errors import TileShapeError

    raise TileShapeError(f"{buf.name} is a {buf.scope} buffer; reductions and cumsum take fragment or "
                         f"shared buffers", loc, hint=f"T.copy {buf.name} into a T.alloc_fragment first")


def _owners(ctx: LowerCtx, dst: Buffer) -> Layout:
    return ctx.layout(dst) if dst.scope == "fragment" else StridedLayout(tuple(dst.shape), ctx.threads, 1)


def _store_dst(ctx: LowerCtx, dst: Buffer, r: int, coords, value: Expr, loc) -> Stmt:
    if dst.scope == "fragment":
        return MemStore(ctx.regs(dst), const(r), value, None, loc)
    return MemStore(ctx.shared(dst), ctx.offset(dst, coords), value, None, loc)


def _load_dst(ctx: LowerCtx, dst: Buffer, r: int, coords) -> Expr:
    if dst.scope == "fragment":
        return MemLoad(ctx.regs(dst), const(r))
    return MemLoad(ctx.shared(dst), ctx.offset(dst, coords))


def _src_coords(src: Buffer, dst: Buffer, dim: int, dcoords, k: Expr) -> list[Expr]:
    """Source coordinates of output element `dcoords` at position k of the reduced dim."""
    keep = [c for c, n in zip(dcoords, dst.shape) if n != 1]
    out = []
    for a, n in enumerate(src.shape):
        if a == dim:
            out.append(k)
        elif n == 1:
            out.append(const(0))
        else:
            out.append(keep.pop(0))
    return out


def _generic_reduce(ctx: LowerCtx, s: Reduce) -> Stmt:
    src, dst = s.src, s.dst
    acc = accumulator_dtype(src.dtype)
    sbuf, out = _source(ctx, src, s.loc)
    out = list(out)
    lay = _owners(ctx, dst)
    accr = ctx.new_regs(f"{dst.name}_acc", 1, acc)
    n = src.shape[s.dim]
    for r in range(lay.nregs):
        coords = lay.coords(ctx.tx, r)
        k = ctx.fresh_var("k")
        sc = _src_coords(src, dst, s.dim, coords, k)
        v = _element(s.kind, MemLoad(sbuf, ctx.offset(src, sc)), acc)
        body = [MemStore(accr, const(0), identity(s.kind, acc), None, s.loc),
                For(k, const(0), const(n), 1, "serial",
                    MemStore(accr, const(0), combine(s.kind, MemLoad(accr, const(0)), v), None, s.loc),
                    (), s.loc)]
        total: Expr = cast(MemLoad(accr, const(0)), dst.dtype)
        if not s.clear:
            total = cast(combine(s.kind, _load_dst(ctx, dst, r, coords), total), dst.dtype)
        body.append(_store_dst(ctx, dst, r, coords, total, s.loc))
        valid = lay.valid(ctx.tx, r)
        seq = SeqStmt(tuple(body), s.loc)
        out.append(seq if valid is None else IfThenElse(valid, seq, None, s.loc))
    return SeqStmt(tuple(out), s.loc)


def lower_cumsum(ctx: LowerCtx, s: CumSum) -> Stmt:
    """T.cumsum: each owner of an output element sums the staged source up to it."""
    src, dst = s.src, s.dst
    acc = accumulator_dtype(src.dtype)  # as reductions: a narrow running sum would wrap or round
    sbuf, pre = _source(ctx, src, s.loc)
    out = list(pre)
    lay = _owners(ctx, dst)
    accr = ctx.new_regs(f"{dst.name}_acc", 1, acc)
    n = src.shape[s.dim]
    for r in range(lay.nregs):
        coords = list(lay.coords(ctx.tx, r))
        k: Var = ctx.fresh_var("k")
        sc = list(coords)
        sc[s.dim] = k
        v = cast(MemLoad(sbuf, ctx.offset(src, sc)), acc)
        # the same summation order as a sequential scan from the start (or the end, reversed)
        lo, hi, step = (const(n - 1), coords[s.dim] - 1, -1) if s.reverse else (
            const(0), coords[s.dim] + 1, 1)
        body = [MemStore(accr, const(0), cast(0, acc), None, s.loc),
                For(k, lo, hi, step, "serial",
                    MemStore(accr, const(0), binop("add", MemLoad(accr, const(0)), v), None, s.loc),
                    (), s.loc),
                _store_dst(ctx, dst, r, coords, cast(MemLoad(accr, const(0)), dst.dtype), s.loc)]
        valid = lay.valid(ctx.tx, r)
        seq = SeqStmt(tuple(body), s.loc)
        out.append(seq if valid is None else IfThenElse(valid, seq, None, s.loc))
    return SeqStmt(tuple(out), s.loc)

