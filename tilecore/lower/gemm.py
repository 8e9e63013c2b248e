"""gemm: tensorized with the backend's mma intrinsic, or SIMT multiply-adds (asynchronous
warpgroup instructions, intrinsic kind "wgmma", in `tilecore.lower.wgmma`).

Tensorized: warps form the plan's (wm, wn) grid; for every 16-deep k step each warp loads its
A and B operand tiles into registers and issues one mma per (m tile, n tile) into the
accumulator fragment, whose layout (`MmaLayout`) was fixed by layout inference from the same
intrinsic's C lane map. Operands are loaded with a loader intrinsic (ldmatrix) when one of the
plan's loaders, placed on the operand tile, reproduces the mma operand's lane map exactly
(checked entry by entry on the tables); otherwise element by element from shared memory.
An A operand held in a fragment is used from registers when its layout already puts every
needed element in the right thread, else it is staged through shared memory.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..errors import TileShapeError
from ..ir.buffer import Buffer, Region
from ..ir.expr import Expr, binop, cast, const, linear
from ..ir.intrinsic import Intrinsic, LaneMap
from ..ir.stmt import For, Gemm, IfThenElse, SeqStmt, Stmt
from ..ir.thread import IntrinsicCall, MemLoad, MemStore, OperandRef
from ..semantics import gemm_accumulator
from .body import stage_fragment
from .context import LowerCtx
from .indexing import NotNumeric, evaluate
from .layout import MmaLayout
from .tensorize import MmaPlan


def operand_index(region: Region, transposed: bool, row: Expr, col: Expr) -> tuple[Expr, ...]:
    """Buffer indices of element (row, col) of op(X) for an operand region."""
    i, j = (col, row) if transposed else (row, col)
    dims = [d for d, n in enumerate(region.extents)]
    while len(dims) > 2 and region.extents[dims[0]] == 1:
        dims = dims[1:]
    d0, d1 = dims[-2], dims[-1]
    idx = list(region.starts)
    idx[d0] = idx[d0] + i
    idx[d1] = idx[d1] + j
    return tuple(idx)


def lower_gemm(ctx: LowerCtx, g: Gemm) -> Stmt:
    """T.gemm(A, B, C)."""
    c = g.c.buffer
    if c.scope != "fragment" or not g.c.is_full:
        raise TileShapeError(f"gemm accumulates into a whole fragment; {c.name} is a {c.scope} "
                             f"buffer or a part of one", g.loc, hint="allocate C with T.alloc_fragment")
    plan: MmaPlan | None = ctx.plans.get(id(g))
    lay = ctx.layout(c)
    if plan is not None and isinstance(lay, MmaLayout) and lay.warps == tuple(plan.warps):
        if plan.mma.kind == "wgmma":
            from .wgmma import lower_wgmma

            return lower_wgmma(ctx, g, plan, lay)
        return _mma_gemm(ctx, g, plan, lay)
    return _simt_gemm(ctx, g)


def wgmma_plan(ctx: LowerCtx, g: Gemm) -> tuple[MmaPlan, MmaLayout] | None:
    """(plan, accumulator layout) when `lower_gemm` lowers `g` to wgmma, else None."""
    plan: MmaPlan | None = ctx.plans.get(id(g))
    if plan is None or plan.mma.kind != "wgmma" or g.c.buffer.scope != "fragment" or not g.c.is_full:
        return None
    lay = ctx.layout(g.c.buffer)
    if not isinstance(lay, MmaLayout) or lay.warps != tuple(plan.warps):
        return None
    return plan, lay


def _memory(ctx: LowerCtx, buf: Buffer, loc, pre: list) -> Buffer:
    """The shared storage holding operand `buf` row-major (staging fragments)."""
    if buf.scope == "shared":
        return ctx.shared(buf)
    if buf.scope == "fragment":
        scratch, stores = stage_fragment(ctx, buf, loc)
        pre.extend(stores)
        return scratch
    raise TileShapeError(f"gemm operand {buf.name} must be in shared or fragment memory, not {buf.scope}",
                         loc, hint="T.copy it into a T.alloc_shared buffer first")


def _simt_gemm(ctx: LowerCtx, g: Gemm) -> Stmt:
    c = g.c.buffer
    lay = ctx.layout(c)
    cregs = ctx.regs(c)
    cd = c.dtype
    pre: list[Stmt] = []
    amem = _memory(ctx, g.a.buffer, g.loc, pre)
    bmem = _memory(ctx, g.b.buffer, g.loc, pre)
    _, _, kdim = g.mnk
    out: list[Stmt] = list(pre)
    accd = gemm_accumulator(cd)
    # A narrow float C (fp16, bf16, ...) sums its products in the semantics' gemm accumulator
    # (float32) and is rounded once per T.gemm, as the oracle does; rounding every multiply-add
    # into C differed from interp by an ulp (amplified by an fp8 output: --tile-long, shard 324).
    wide = cd.is_float and accd != cd
    acc = ctx.new_regs(f"{c.name}_acc", lay.nregs, accd) if wide else cregs
    if g.clear_accum or wide:
        out.extend(MemStore(acc, const(r), cast(0, acc.dtype), None, g.loc) for r in range(lay.nregs))
    k = ctx.fresh_var("k")
    body = []
    for r in range(lay.nregs):
        i, j = lay.coords(ctx.tx, r)
        a = MemLoad(amem, ctx.offset(g.a.buffer, operand_index(g.a, g.transpose_a, i, k)))
        b = MemLoad(bmem, ctx.offset(g.b.buffer, operand_index(g.b, g.transpose_b, k, j)))
        ad = acc.dtype
        v = binop("add", MemLoad(acc, const(r)), binop("mul", cast(a, ad), cast(b, ad)))
        st: Stmt = MemStore(acc, const(r), cast(v, ad), None, g.loc)
        valid = lay.valid(ctx.tx, r)
        body.append(st if valid is None else IfThenElse(valid, st, None, g.loc))
    out.append(For(k, const(0), const(kdim), 1, "serial", SeqStmt(tuple(body), g.loc), (), g.loc))
    if wide:  # C = round(C + sum), once
        for r in range(lay.nregs):
            total = MemLoad(acc, const(r)) if g.clear_accum else \
                binop("add", cast(MemLoad(cregs, const(r)), accd), MemLoad(acc, const(r)))
            st = MemStore(cregs, const(r), cast(total, cd), None, g.loc)
            valid = lay.valid(ctx.tx, r)
            out.append(st if valid is None else IfThenElse(valid, st, None, g.loc))
    return SeqStmt(tuple(out), g.loc)


# --------------------------------------------------------------------------- tensor cores


def loader_block(ld: Intrinsic, contiguous_axis: int) -> tuple[int, int]:
    """(op rows, op cols) one matrix of loader `ld` covers: its `rows x cols` memory matrix
    (from the intrinsic's declared shape), transposed when memory rows run along op columns."""
    _, mrows, mcols = ld.shape
    return (mrows, mcols) if contiguous_axis == 1 else (mcols, mrows)


def find_loader(loaders, opmap: LaneMap, contiguous_axis: int):
    """(loader, placement) whose lane map, with matrix q placed at op-tile block placement[q] and
    its rows running along the non-contiguous axis, equals `opmap`; None when none does. The
    block geometry is the loader's own (its declared matrix shape), never assumed."""
    want_r, want_c = opmap.arrays()
    for ld in loaders:
        dst = ld.operands[0].map
        count, mrows, _ = ld.shape
        brows, bcols = loader_block(ld, contiguous_axis)
        if dst.elems != opmap.elems or dst.lanes != opmap.lanes or opmap.rows % brows \
                or opmap.cols % bcols:
            continue
        blocks = [(br, bc) for br in range(0, opmap.rows, brows) for bc in range(0, opmap.cols, bcols)]
        srow, scol = dst.arrays()
        q, rr = srow // mrows, srow % mrows
        for placement in itertools.permutations(blocks, count):
            br = np.array([p[0] for p in placement])[q]
            bc = np.array([p[1] for p in placement])[q]
            if contiguous_axis == 1:
                got_r, got_c = br + rr, bc + scol
            else:
                got_r, got_c = br + scol, bc + rr
            if np.array_equal(got_r, want_r) and np.array_equal(got_c, want_c):
                return ld, placement
    return None


def loader_rows(ld: Intrinsic, placement, contiguous_axis: int, rows: int, cols: int) -> LaneMap:
    """Per lane, the op-tile (row, col) where the memory row that lane addresses starts."""
    src = ld.operands[1].map
    mrows = ld.shape[1]

    def fn(lane, _e):
        sr = src.at(lane, 0)[0]
        br, bc = placement[sr // mrows]
        return (br + sr % mrows, bc) if contiguous_axis == 1 else (br, bc + sr % mrows)

    return LaneMap.from_fn(rows, cols, src.lanes, 1, fn)


def _aligned(e: Expr, n: int) -> bool:
    lin = linear(e)
    return lin is not None and lin[1] % n == 0 and all(c % n == 0 for c in lin[0].values())


class _Operand:
    """How one mma operand (A or B) reaches its registers: from a fragment's own registers, or
    from shared memory (staged when it is a fragment) with a loader intrinsic or element loads."""

    def __init__(self, ctx: LowerCtx, g: Gemm, name: str, plan: MmaPlan, pre: list):
        self.ctx, self.g, self.name = ctx, g, name
        self.spec = plan.mma.operand(name)
        self.region = g.a if name == "A" else g.b
        self.trans = g.transpose_a if name == "A" else g.transpose_b
        self.buf = self.region.buffer
        # memory rows run along the op's rows (contiguous along its columns) unless transposed
        self.contig = 0 if self.trans else 1
        self.regs_frag = self.buf if self.buf.scope == "fragment" else None
        self.loaders = plan.loaders
        self.mem: Buffer | None = None
        self.loader = None
        self.pair_map: LaneMap | None = None
        self.pair_loader = None
        self._pre = pre

    def ensure_memory(self) -> None:
        """Put the operand in shared memory (once) and pick the loaders that reproduce its map."""
        if self.mem is None:
            self.mem = _memory(self.ctx, self.buf, self.g.loc, self._pre)
            self.loader = find_loader(self.loaders, self.spec.map, self.contig)
            if self.name == "B":
                self.pair_map = pair_map(self.spec.map)
                self.pair_loader = find_loader(self.loaders, self.pair_map, self.contig)


def _mma_gemm(ctx: LowerCtx, g: Gemm, plan: MmaPlan, clay: MmaLayout) -> Stmt:
    mma = plan.mma
    im, in_, ik = mma.shape
    M, N, K = g.mnk
    wm, wn = plan.warps
    WM, WN = M // wm, N // wn
    mt, nt = WM // im, WN // in_
    cregs = ctx.regs(g.c.buffer)
    lane = ctx.lane()
    W = ctx.warp_size
    warp_m = ctx.simp(ctx.tx // (W * wn)) if wm > 1 else const(0)
    warp_n = ctx.simp((ctx.tx // W) % wn) if wn > 1 else const(0)
    pre: list[Stmt] = []
    out: list[Stmt] = []
    if g.clear_accum:
        out.extend(MemStore(cregs, const(r), cast(0, cregs.dtype), None, g.loc) for r in range(clay.nregs))
    A, B = _Operand(ctx, g, "A", plan, pre), _Operand(ctx, g, "B", plan, pre)
    aregs = ctx.new_regs("A_frag", mt * A.spec.elems, A.spec.dtype)
    bregs = ctx.new_regs("B_frag", nt * B.spec.elems, B.spec.dtype)

    def mmas(tiles, by_tile: bool) -> list[Stmt]:
        """The mmas of n tiles `tiles`: n-major when `by_tile` (right after their B load)."""
        order = ([(mi, ni) for ni in tiles for mi in range(mt)] if by_tile
                 else [(mi, ni) for mi in range(mt) for ni in tiles])
        return [IntrinsicCall(mma, (OperandRef(cregs, const(clay.reg(mi, ni, 0))),
                                    OperandRef(aregs, const(mi * A.spec.elems)),
                                    OperandRef(bregs, const(ni * B.spec.elems)),
                                    OperandRef(cregs, const(clay.reg(mi, ni, 0)))), g.loc)
                for mi, ni in order]

    for kk in range(K // ik):
        for mi in range(mt):
            out.extend(_load_operand(ctx, A, aregs, mi * A.spec.elems, lane,
                                     warp_m * WM + mi * im, const(kk * ik)))
        # A read from the accumulator-shaped fragment it already lives in (FlashAttention's
        # P V: P in registers): the whole tile's accumulators and P are live here, so each B
        # load is followed by the mmas that read it instead of all of a k step's B fragments
        # first (32 registers at 128x64 d=128, 128 threads, 64 once ptxas hoisted the next
        # step's; causal on sm_90a's ptxas: an 88-byte spill -> none). The mma order only changes which
        # independent accumulator tiles go first: each tile's k order is the same.
        interleave = A.mem is None and A.regs_frag is not None
        groups: list[tuple[list[Stmt], list[int]]] = []
        ni = 0
        while ni < nt:
            col0 = warp_n * WN + ni * in_
            if ni + 1 < nt and B.regs_frag is None:
                B.ensure_memory()
                if B.pair_loader is not None:  # two n tiles with one loader (ldmatrix x4)
                    pair = _with_loader(ctx, B, B.pair_loader, B.pair_map, bregs, ni * B.spec.elems,
                                        lane, const(kk * ik), col0)
                    if pair is not None:
                        groups.append((pair, [ni, ni + 1]))
                        ni += 2
                        continue
            groups.append((_load_operand(ctx, B, bregs, ni * B.spec.elems, lane, const(kk * ik), col0), [ni]))
            ni += 1
        if interleave:
            for loads, tiles in groups:
                out.extend(loads)
                out.extend(mmas(tiles, True))
        else:
            for loads, _ in groups:
                out.extend(loads)
            out.extend(mmas(range(nt), False))
    return SeqStmt(tuple(pre + out), g.loc)


def _load_operand(ctx: LowerCtx, op: _Operand, regs: Buffer, base: int, lane: Expr,
                  row0: Expr, col0: Expr) -> list[Stmt]:
    """Statements filling regs[base : base + elems] with this warp's operand tile at (row0, col0)."""
    spec, loc = op.spec, op.g.loc
    if op.regs_frag is not None and op.mem is None:
        moves = _from_registers(ctx, op, regs, base, lane, row0, col0)
        if moves is not None:
            return moves
    op.ensure_memory()
    if op.loader is not None:
        done = _with_loader(ctx, op, op.loader, spec.map, regs, base, lane, row0, col0)
        if done is not None:
            return done
    out: list[Stmt] = []
    for e in range(spec.elems):
        r = row0 + spec.map.coord(lane, e, 0)
        c = col0 + spec.map.coord(lane, e, 1)
        off = ctx.offset(op.buf, operand_index(op.region, op.trans, r, c))
        out.append(MemStore(regs, const(base + e), MemLoad(op.mem, off), None, loc))
    return out


def _with_loader(ctx: LowerCtx, op: _Operand, found, opmap: LaneMap, regs: Buffer, base: int,
                 lane: Expr, row0: Expr, col0: Expr) -> list[Stmt] | None:
    """One loader intrinsic filling regs[base:] with the operand tile at (row0, col0), or None
    when a row address would not be 16-byte aligned."""
    ld, placement = found
    starts = loader_rows(ld, placement, op.contig, opmap.rows, opmap.cols)
    r = row0 + starts.coord(lane, 0, 0)
    c = col0 + starts.coord(lane, 0, 1)
    idx = operand_index(op.region, op.trans, r, c)
    # each lane's memory row is ld.shape[-1] contiguous elements: provably aligned in the tile
    # (last index) and kept contiguous by the buffer's shared layout
    width = ld.shape[-1]
    if not _aligned(ctx.simp(idx[-1]), width) or not ctx.vector_ok(op.buf, width):
        return None
    addr = ctx.offset(op.buf, idx)
    return [IntrinsicCall(ld, (OperandRef(regs, const(base)), OperandRef(op.mem, addr)), op.g.loc)]


def pair_map(m: LaneMap) -> LaneMap:
    """Two copies of an operand map side by side along columns (elements e and e + elems)."""
    return LaneMap.from_fn(m.rows, 2 * m.cols, m.lanes, 2 * m.elems,
                           lambda lane, e: (m.at(lane, e % m.elems)[0],
                                            m.at(lane, e % m.elems)[1] + m.cols * (e // m.elems)))


def _from_registers(ctx: LowerCtx, op: _Operand, regs: Buffer, base: int, lane: Expr,
                    row0: Expr, col0: Expr) -> list[Stmt] | None:
    """Register moves when the fragment's layout already holds each needed element locally."""
    lay = ctx.layout(op.buf)
    env = {id(ctx.tx): np.arange(ctx.threads, dtype=np.int64)}
    out: list[Stmt] = []
    src = ctx.regs(op.buf)
    for e in range(op.spec.elems):
        r = row0 + op.spec.map.coord(lane, e, 0)
        c = col0 + op.spec.map.coord(lane, e, 1)
        idx = operand_index(op.region, op.trans, r, c)
        try:
            want = np.stack([np.broadcast_to(np.asarray(evaluate(ctx.simp(i), env)), (ctx.threads,))
                             for i in idx], axis=-1)
        except NotNumeric:
            return None
        reg = lay.find_reg(want)
        if reg is None:
            return None
        out.append(MemStore(regs, const(base + e), MemLoad(src, const(reg)), None, op.g.loc))
    return out

