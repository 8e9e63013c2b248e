"""gemm on asynchronous warpgroup tensor cores (an MmaPlan whose intrinsic has kind "wgmma").

The block's warpgroups (intrinsic.lanes threads each) form the plan's (wm, wn) grid; each owns
an (M / wm) x (N / wn) accumulator tile, issued as (m tiles) x (n tiles) instructions per k
step. B, and A unless it is a fragment, are read by the tensor cores straight from shared
memory through matrix descriptors: the descriptor fields come from the operand buffer's
canonical layout (`tilecore.ir.smem_layout.Panelled`, chosen by the smem planner for wgmma
operands) and the start address of each instruction's sub-matrix is that layout's offset of
its first element. Every descriptor is checked here, entry by entry, against the layout's own
offsets of the logical elements, so a layout the descriptor cannot express is an internal
error at compile time rather than wrong numbers.

The asynchronous memory model (docs/architecture.md) fixes the statement order of one gemm:

    fence.proxy.async   shared memory written by ordinary stores and cp.async is read next by
                        the tensor cores (the asynchronous proxy)
    wgmma.fence         the accumulator (and A fragment) registers were written by ordinary
                        instructions (T.clear, an epilogue, the previous gemm's wait); with A
                        in registers, each k step's A moves come first and a fence follows
    wgmma ...           every k step, m tile, n tile: issued into the thread's "wgmma" queue;
                        the first k step's calls carry scale-d 0 (no accumulator read) for
                        clear_accum, or the loop's "not the first iteration" test for an
                        accumulator whose clear before the loop went (tilecore.lower.accum_zero)
    commit_group        one group per gemm
    wait_group 0        the accumulator is complete before anything reads it, and the
                        operand stages are no longer read when the pipeline refills them
"""

from __future__ import annotations

import numpy as np

from ..errors import TileInternalError, TileShapeError
from ..ir.buffer import Buffer
from ..ir.expr import Expr, cast, const
from ..ir.intrinsic import Intrinsic, MatrixDesc, desc_from_layout
from ..ir.stmt import Gemm, SeqStmt, Stmt
from ..ir.thread import (
    AsyncCommit,
    AsyncFence,
    AsyncWait,
    Atomic,
    IntrinsicCall,
    MemLoad,
    MemStore,
    OperandRef,
    VecMove,
)
from ..ir.visit import rewrite, walk
from .accum_zero import wgmma_zeroes_accumulator
from .context import LowerCtx
from .indexing import try_evaluate
from .layout import MmaLayout
from .tensorize import MmaPlan


def lower_wgmma(ctx: LowerCtx, g: Gemm, plan: MmaPlan, clay: MmaLayout) -> Stmt:
    """T.gemm(A, B, C) as wgmma instructions (module docstring)."""
    from .gemm import _load_operand, _Operand, operand_index  # gemm.py dispatches here

    intr: Intrinsic = plan.mma
    im, in_, ik = intr.shape
    M, N, K = g.mnk
    wm, wn = plan.warps
    WM, WN = M // wm, N // wn
    mt, nt = WM // im, WN // in_
    G = intr.lanes
    if ctx.threads % G:
        raise TileInternalError(f"{intr.name} needs whole groups of {G} threads", g.loc)
    cregs = ctx.regs(g.c.buffer)
    lane = ctx.simp(ctx.tx % G)
    wg_m = ctx.simp(ctx.tx // (G * wn)) if wm > 1 else const(0)
    wg_n = ctx.simp((ctx.tx // G) % wn) if wn > 1 else const(0)
    out: list[Stmt] = []
    # the first k step's scale-d: 0 (D = A @ B, D not read) replaces zeroing stores for
    # clear_accum, and the loop's first iteration for a clear dropped before the loop
    # (accum_zero.py); None accumulates
    first_scale: Expr | None = ctx.first_step_scale.get(id(g))
    if g.clear_accum:
        if not getattr(ctx.options, "disable_wgmma_scale_d", False) and wgmma_zeroes_accumulator(ctx, g):
            first_scale = const(False)
        else:
            zero = cast(0, cregs.dtype)
            out.extend(MemStore(cregs, const(r), zero, None, g.loc) for r in range(clay.nregs))
    a_spec = intr.operand("A")
    descs: dict[str, MatrixDesc] = {}
    mem: dict[str, Buffer] = {}
    for name, region, k_major in (("A", g.a, not g.transpose_a), ("B", g.b, g.transpose_b)):
        if name == "A" and a_spec.space == "reg":
            continue
        buf = region.buffer
        if buf.scope != "shared":
            raise TileShapeError(f"wgmma reads operand {name} ({buf.name}) from shared memory", g.loc,
                                 hint="T.copy it into a T.alloc_shared buffer first")
        mem[name] = ctx.shared(buf)
        try:
            descs[name] = desc_from_layout(mem[name].layout, buf.dtype.itemsize, "K" if k_major else "MN")
        except TypeError as e:
            raise TileInternalError(f"wgmma operand {buf.name}: {e}", g.loc) from None
    final = intr.with_descs(**descs)
    pre: list[Stmt] = []
    aop = _Operand(ctx, g, "A", plan, pre) if a_spec.space == "reg" else None
    # one register slice per k step: a wgmma reads its A registers until the wait, so a later
    # step must not overwrite them (the emulator reports that as a register race)
    steps = K // ik
    aregs = ctx.new_regs("A_frag", steps * mt * a_spec.elems, a_spec.dtype) if aop is not None else None

    def start(name: str, mn0: Expr, k0: Expr) -> OperandRef:
        """The descriptor operand of the sub-matrix whose first element is (mn0, k0) in (mn, k)."""
        region = g.a if name == "A" else g.b
        trans = g.transpose_a if name == "A" else g.transpose_b
        row, col = (mn0, k0) if name == "A" else (k0, mn0)
        idx = operand_index(region, trans, row, col)
        ref = OperandRef(mem[name], ctx.offset(region.buffer, idx))
        _check_desc(ctx, g, name, final.operand(name), ref, region, trans)
        return ref

    calls: list[Stmt] = []
    a_moves: list[Stmt] = []
    for kk in range(steps):
        k0 = const(kk * ik)
        if aop is not None:
            # every step's A fragment registers are written before the one fence: a fence per
            # step made each step its own wgmma group in SASS (an ARRIVE and a gsb0 per HGMMA),
            # and ptxas then retired the whole product at a `wait_group 1` meant for an
            # earlier group (the FlashAttention-3 overlap of wgmma_async)
            for mi in range(mt):
                a_moves.extend(_load_operand(ctx, aop, aregs, (kk * mt + mi) * a_spec.elems, lane,
                                             wg_m * WM + mi * im, k0))
        for mi in range(mt):
            m0 = ctx.simp(wg_m * WM + mi * im)
            a_ref = (OperandRef(aregs, const((kk * mt + mi) * a_spec.elems)) if aop is not None
                     else start("A", m0, k0))
            for ni in range(nt):
                n0 = ctx.simp(wg_n * WN + ni * in_)
                base = const(clay.reg(mi, ni, 0))
                calls.append(IntrinsicCall(final, (OperandRef(cregs, base), a_ref, start("B", n0, k0),
                                                   OperandRef(cregs, base)), g.loc,
                                           first_scale if kk == 0 else None))
    fences: list[Stmt] = [AsyncFence("proxy_async", g.loc)] if mem else []
    # an asynchronous gemm's wait is marked deferrable: lower/wgmma_async.py moves it to the
    # first statement that needs the product (in place it is the synchronous gemm)
    tail = [AsyncCommit("wgmma", g.loc), AsyncWait("wgmma", 0, g.loc, deferred=g.asynchronous)]
    if aop is None:
        return SeqStmt(tuple(out + pre + fences + [AsyncFence("wgmma", g.loc)] + calls + tail), g.loc)
    # the A loads of every k step come first, then the fence
    return SeqStmt(tuple(out + pre + fences + a_moves + [AsyncFence("wgmma", g.loc)] + calls + tail), g.loc)


def _check_desc(ctx: LowerCtx, g: Gemm, name: str, spec, ref: OperandRef, region, trans: bool) -> None:
    """The elements the descriptor reads (for every thread) are exactly the layout's offsets of
    the logical sub-matrix; checked whenever the start is a number at compile time."""
    env = {id(ctx.tx): np.arange(ctx.threads, dtype=np.int64)}
    st = try_evaluate(ref.offset, env)
    if st is None:
        return  # depends on a loop counter or block index: the emulator checks it
    st = np.broadcast_to(np.asarray(st, dtype=np.int64), (ctx.threads,))
    # what is compared depends on each thread's start alone, and the start is usually the same
    # for a whole warpgroup: each distinct start is checked once (the full per-thread check
    # only runs to name the first failing thread)
    uniq = np.unique(st)
    if len(uniq) < len(st):
        pair = _desc_elements(name, spec, ref, trans, uniq)
        if pair is not None and np.array_equal(*pair):
            return
    pair = _desc_elements(name, spec, ref, trans, st)
    if pair is None:
        raise TileInternalError(f"wgmma {name} start offset is not an element of its layout", g.loc)
    got, want = pair
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)[0]
        raise TileInternalError(
            f"the wgmma descriptor of {region.buffer.name} ({spec.desc}) does not reproduce its shared "
            f"layout {ref.buffer.layout.describe()}: thread {bad[0]} element {tuple(bad[1:])}", g.loc)


def _desc_elements(name: str, spec, ref: OperandRef, trans: bool, starts: np.ndarray):
    """(offsets the descriptor reads, the layout's offsets of the logical sub-matrix), each
    (len(starts), mn, k), for the start offsets `starts`; None when a start is not an element."""
    rows, cols = spec.dims
    mn, k = (rows, cols) if name == "A" else (cols, rows)
    lay = ref.buffer.layout
    # the logical elements: start of the sub-matrix found back from the start offset
    first = _first_element(lay, starts)
    if first is None:
        return None
    r0, c0 = first
    dr, dc = np.meshgrid(np.arange(mn), np.arange(k), indexing="ij")
    if name == "A":
        i, j = (dc, dr) if trans else (dr, dc)
    else:
        i, j = (dr, dc) if trans else (dc, dr)
    return spec.desc.elements(starts, mn, k), lay.offset_np(r0[:, None, None] + i, c0[:, None, None] + j)


_INVERSE: dict = {}  # shared layout -> element number of each storage offset (-1: none)


def _inverse(lay) -> np.ndarray:
    """The element number (row * cols + col) stored at each offset of `lay`, -1 where none;
    one table per layout (every wgmma of a kernel checks its descriptors against the same few
    layouts). The layouts are frozen values, so equal layouts share the table."""
    inv = _INVERSE.get(lay)
    if inv is None:
        r, c = np.meshgrid(np.arange(lay.rows), np.arange(lay.cols), indexing="ij")
        off = lay.offset_np(r, c).ravel()
        inv = np.full(lay.size, -1, dtype=np.int64)
        inv[off] = np.arange(off.size)
        inv.setflags(write=False)
        if len(_INVERSE) > 64:
            _INVERSE.clear()
        _INVERSE[lay] = inv
    return inv


def _first_element(lay, st: np.ndarray):
    """(row, col) arrays of the tile elements whose layout offsets are `st`, or None."""
    inv = _inverse(lay)
    if np.any((st < 0) | (st >= lay.size)) or np.any(inv[st] < 0):
        return None
    flat = inv[st]
    return flat // lay.cols, flat % lay.cols


def relax_wgmma_wait(body: list) -> list | None:
    """For the cp.async pipeline (`tilecore.lower.async_pipeline`): the loop body with its one
    wgmma wait relaxed from `wait_group 0` to `wait_group 1`, or None when that is not safe.

    Relaxed, a tile's wgmma group stays in flight while the next iteration waits for its copy,
    passes the barrier and issues its own group, so the tensor cores do not drain every
    iteration. The pipeline then issues copies one tile less far ahead (s - 2 with s stages), so
    the stage it refills at iteration k + 1 was read by the group of iteration k - 1, which the
    wait of iteration k retired before the barrier that precedes the refill; it puts a
    `wait_group 0` after the loop. Safe when the wait is the body's last statement, it is the
    body's only wgmma wait, every wgmma reads A and B through descriptors (no A registers to be
    rewritten while read), and no other statement of the body touches the accumulators."""

    waits = [n for s in body for n in walk(s) if isinstance(n, AsyncWait) and n.queue == "wgmma"]
    if len(waits) != 1 or waits[0].pending != 0 or not body:
        return None
    last = body[-1]
    while isinstance(last, SeqStmt) and last.stmts:
        last = last.stmts[-1]
    if last is not waits[0]:
        return None
    calls = [n for s in body for n in walk(s) if isinstance(n, IntrinsicCall) and n.intrinsic.kind == "wgmma"]
    if not calls or any(c.intrinsic.operand("A").space != "desc" for c in calls):
        return None
    acc = {id(c.operands[0].buffer) for c in calls}
    for s in body:
        for n in walk(s):
            if isinstance(n, IntrinsicCall):
                if n.intrinsic.kind != "wgmma" and any(id(r.buffer) in acc for r in n.operands):
                    return None
            elif isinstance(n, (MemLoad, MemStore, Atomic)) and id(n.buffer) in acc:
                return None
            elif isinstance(n, VecMove) and (id(n.src) in acc or id(n.dst) in acc):
                return None

    def fn(n):
        return AsyncWait("wgmma", 1, n.loc) if n is waits[0] else None

    return [rewrite(s, fn) for s in body]
