"""Warp-wide intrinsics executed from their declared lane maps (no vendor knowledge here).

`mma`: gather each operand's lanes into matrices through its map, multiply, scatter D back.
`ldmatrix`: each lane's address supplies one stacked row; every lane then picks its elements
through the destination map. Matrix cells no lane supplies stay NaN, so a wrong table shows.
"""

from __future__ import annotations

import numpy as np

from .. import semantics as S
from ..errors import TileRuntimeError
from ..ir.thread import IntrinsicCall


def _reg_block(blk, ref, elems: int, active: np.ndarray) -> np.ndarray:
    """(T, elems) register values (storage dtype) of one register operand."""
    off = blk.eval(ref.offset, active)
    return blk.read(ref.buffer, off, active, elems)


def run_intrinsic(blk, s: IntrinsicCall, mask: np.ndarray) -> None:
    """Execute `s` for the active warps of block `blk`."""
    intr = s.intrinsic
    W = intr.lanes
    if blk.W != W:
        raise TileRuntimeError(f"{intr.name} needs warps of {W} lanes, the target has {blk.W}", blk.loc,
                               hint="a backend chose an instruction for another warp size: report it")
    warps = np.nonzero(mask.reshape(-1, W).all(axis=1))[0]
    if len(warps) == 0:
        return
    if intr.kind == "mma":
        _mma(blk, s, mask, warps)
    elif intr.kind == "ldmatrix":
        _ldmatrix(blk, s, mask, warps)
    else:
        raise TileRuntimeError(f"emu cannot execute intrinsic kind {intr.kind}", blk.loc,
                           hint="the intrinsic table has a kind the emulator lacks: report it")


def _gather(vals: np.ndarray, lmap, warps, W) -> np.ndarray:
    """(warps, rows, cols) float64 matrices from (T, elems) lane values through `lmap`."""
    rows, cols = lmap.arrays()
    out = np.full((len(warps), lmap.rows, lmap.cols), np.nan)
    v = vals.reshape(-1, W, lmap.elems)[warps].astype(np.float64)
    out[:, rows, cols] = v
    return out


def _mma(blk, s: IntrinsicCall, mask, warps) -> None:
    intr = s.intrinsic
    W = intr.lanes
    d_spec, a_spec, b_spec, c_spec = intr.operands
    d_ref, a_ref, b_ref, c_ref = s.operands
    a = _gather(_reg_block(blk, a_ref, a_spec.elems, mask), a_spec.map, warps, W)
    b = _gather(_reg_block(blk, b_ref, b_spec.elems, mask), b_spec.map, warps, W)
    c = _gather(_reg_block(blk, c_ref, c_spec.elems, mask), c_spec.map, warps, W)
    d = S.round_to(a @ b + c, d_spec.dtype)
    rows, cols = d_spec.map.arrays()
    out = np.zeros((blk.T // W, W, d_spec.elems), dtype=np.float64)
    out[warps] = d[:, rows, cols]
    vals = S.to_storage(out.reshape(blk.T, d_spec.elems), d_spec.dtype)
    blk.write(d_ref.buffer, blk.eval(d_ref.offset, mask), vals, mask, d_spec.elems)


def _ldmatrix(blk, s: IntrinsicCall, mask, warps) -> None:
    intr = s.intrinsic
    W = intr.lanes
    dst_spec, src_spec = intr.operands
    dst_ref, src_ref = s.operands
    count, mrows, mcols = intr.shape
    srow = np.array([src_spec.map.at(lane, 0)[0] for lane in range(W)])
    # the first lane naming each stacked row supplies its address (the others are ignored)
    supplier = np.full(count * mrows, -1)
    for lane in range(W - 1, -1, -1):
        supplier[srow[lane]] = lane
    use = np.zeros(blk.T, dtype=bool)
    for w in warps:
        use[w * W + supplier[supplier >= 0]] = True
    rows_all = blk.read(src_ref.buffer, blk.eval(src_ref.offset, mask), use & mask, mcols)
    stacked = np.full((len(warps), count * mrows, mcols), np.nan)
    for k, w in enumerate(warps):
        for r in range(count * mrows):
            if supplier[r] >= 0:
                stacked[k, r] = rows_all[w * W + supplier[r]]
    rows, cols = dst_spec.map.arrays()
    out = np.zeros((blk.T // W, W, dst_spec.elems), dtype=np.float64)
    out[warps] = stacked[:, rows, cols]
    vals = S.to_storage(out.reshape(blk.T, dst_spec.elems), dst_spec.dtype)
    blk.write(dst_ref.buffer, blk.eval(dst_ref.offset, mask), vals, mask, dst_spec.elems)
