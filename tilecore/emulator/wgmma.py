"""Asynchronous warpgroup tensor-core ops (intrinsic kind "wgmma") in the emulator.

PTX lets a `wgmma.mma_async` read its shared-memory matrices and its registers (accumulator, A
fragment) at any time between its issue and the `wgmma.wait_group` that retires its group, and
write the accumulator at any time in that window; touching any of them meanwhile is undefined.
The emulator therefore reads the inputs at issue (through the matrix descriptors: the same
`MatrixDesc.elements` the lowering checked against the shared layout), computes the product,
and *lands* the accumulator at the wait. Between issue and landing:

- the accumulator and A registers of the issuing threads are *pending*: any read or write of
  them by an ordinary instruction is a race (a missing or too weak wgmma wait);
- the shared elements read are *asynchronously read*: a write or an asynchronous copy into them
  is a race (a stage buffer refilled while a wgmma still reads it) — `SharedTracker.async_read`.

A wgmma whose accumulator or A registers were written by ordinary instructions since the
thread's last `AsyncFence("wgmma")`, or that a thread issues before its first fence (PTX asks
for one before a warpgroup's first wgmma), is reported as a missing `wgmma.fence`. Chained wgmmas on
one accumulator (same queue, no wait between) are allowed, as in PTX: the later one accumulates
onto the earlier one's pending result. A wgmma whose `scale_d` evaluates to 0 (the same in
the whole warpgroup, else an error) computes D = A @ B and reads no accumulator register; one
that accumulates reads them, and under TILECORE_CHECK_UNINIT an accumulator or A register that
nothing wrote is reported (registers start as poison either way, so a dropped clear shows);
a landed result counts as written.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import semantics as S
from ..errors import TileRuntimeError
from ..ir.thread import IntrinsicCall
from . import uninit


@dataclass
class PendingMma:
    """One wgmma issued by one warpgroup, not landed yet."""

    tids: np.ndarray  # (G,) issuing threads
    group: int  # the warpgroup's open group number at issue
    dst: int  # id of the accumulator register buffer
    dst_buf: object
    regs: np.ndarray  # (E,) accumulator register offsets
    vals: np.ndarray  # (G, E) results in storage dtype
    held: list  # [(buffer id, (G, n) register offsets)] registers pending until landing
    shared: list  # [(buffer id, element offsets)] shared elements asynchronously read
    loc_id: int


class WgmmaState:
    """The block's in-flight wgmma ops, per-thread group counters and fence state."""

    def __init__(self, threads: int, operand_regs: set):
        self.T = threads
        self.committed = np.zeros(threads, dtype=np.int64)
        self.pending: list[PendingMma] = []
        self.operand_regs = operand_regs  # ids of register buffers some wgmma reads
        self.unfenced: dict[int, np.ndarray] = {}  # buffer id -> (T, n) written since the fence
        self.held: dict[int, np.ndarray] = {}  # buffer id -> (T, n) pending count
        self.fenced = np.zeros(threads, dtype=bool)  # a wgmma.fence since the block started

    # ------------------------------------------------------------- register accesses
    def reg_access(self, blk, buf, tids: np.ndarray, idx: np.ndarray, write: bool) -> None:
        """An ordinary read/write of registers `idx` (per thread, (k, w)) of threads `tids`."""
        key = id(buf)
        h = self.held.get(key)
        if h is not None and tids.size:
            hit = h[tids[:, None], idx] > 0
            if hit.any():
                k, j = np.argwhere(hit)[0]
                op = next((p for p in self.pending if any(b == key for b, _ in p.held)), None)
                where = blk.locs[op.loc_id] if op is not None else None
                raise TileRuntimeError(
                    f"register race: thread {int(tids[k])} {'writes' if write else 'reads'} register "
                    f"{buf.name}[{int(idx[k, j])}] of a wgmma in flight (issued at {where}) before a "
                    f"wgmma wait retires it", blk.loc,
                    hint="an AsyncWait('wgmma') (wgmma.wait_group) is missing or waits for too few "
                         "groups before the accumulator is used")
        if write and key in self.operand_regs:
            u = self.unfenced.get(key)
            if u is None:
                u = self.unfenced[key] = np.zeros((self.T, buf.shape[0]), dtype=bool)
            u[tids[:, None], idx] = True

    def fence(self, mask: np.ndarray) -> None:
        """`wgmma.fence` by the threads in `mask`: their register writes are ordered."""
        for u in self.unfenced.values():
            u[mask] = False
        self.fenced |= mask

    # ------------------------------------------------------------- issue / commit / wait
    def issue(self, blk, s: IntrinsicCall, mask: np.ndarray) -> None:
        """Issue `s` for every warpgroup in `mask` (whole warpgroups; blk: the Block)."""
        intr = s.intrinsic
        G = intr.lanes
        if blk.T % G:
            raise TileRuntimeError(f"{intr.name} needs whole warpgroups of {G} threads", blk.loc,
                                   hint=f"make threads= in T.Kernel a multiple of {G}")
        groups = mask.reshape(-1, G)
        if not np.all(groups.all(axis=1) | ~groups.any(axis=1)):
            raise TileRuntimeError(f"{intr.name} executed by part of a warpgroup (divergent control "
                                   "flow)", blk.loc,
                                   hint="move the gemm out of branches that split a warpgroup")
        for w in np.nonzero(groups.all(axis=1))[0]:
            self._issue_group(blk, s, np.arange(w * G, (w + 1) * G))

    def _reg_offsets(self, blk, ref, elems: int, tids: np.ndarray) -> np.ndarray:
        """(G, elems) register offsets of a register operand."""
        off = np.broadcast_to(np.asarray(blk.eval(ref.offset, None), dtype=np.int64), (blk.T,))[tids]
        return off[:, None] + np.arange(elems)

    def _reg_values(self, blk, ref, elems: int, tids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """((G, elems) values, (G, elems) offsets) of a register operand; a pending earlier wgmma
        on the same registers (a chain) supplies its result. Under TILECORE_CHECK_UNINIT a
        register neither written nor supplied by a chain is reported."""
        idx = self._reg_offsets(blk, ref, elems, tids)
        vals = blk.regs[id(ref.buffer)][tids[:, None], idx].copy()
        chained = np.zeros(idx.shape, dtype=bool)
        for p in self.pending:  # oldest first: the newest pending result wins
            if p.dst == id(ref.buffer) and np.array_equal(p.tids, tids):
                hit = np.isin(idx, p.regs)
                if hit.any():
                    pos = np.searchsorted(p.regs, idx)
                    vals[hit] = p.vals[:, :][np.nonzero(hit)[0], pos[hit]]
                    chained |= hit
        if blk.check_uninit:
            seen = blk.reg_init[id(ref.buffer)][tids[:, None], idx] | chained
            if not seen.all():
                t, k = (int(x) for x in np.argwhere(~seen)[0])
                uninit.report(blk, ref.buffer, int(tids[t]), int(idx[t, k]))
        return vals, idx

    def _fenced(self, blk, ref, idx: np.ndarray, tids: np.ndarray, what: str) -> None:
        u = self.unfenced.get(id(ref.buffer))
        if u is not None and u[tids[:, None], idx].any():
            raise TileRuntimeError(
                f"{what} registers {ref.buffer.name} were written by ordinary instructions after the "
                f"last wgmma fence of thread {int(tids[0])}", blk.loc,
                hint="an AsyncFence('wgmma') (wgmma.fence) is missing before the wgmma")

    def _desc_values(self, blk, spec, ref, tids: np.ndarray, mn: int, k: int) -> tuple:
        """(mn, k) float64 values read through a descriptor operand, and the elements read."""
        st = np.broadcast_to(np.asarray(blk.eval(ref.offset, None), dtype=np.int64), (blk.T,))[tids]
        if np.any(st != st[0]):
            raise TileRuntimeError(f"the threads of a warpgroup give {spec.name} different descriptor "
                                   "start addresses", blk.loc,
                                   hint="a lowering produced this; please report it with the kernel")
        if spec.desc is None:
            raise TileRuntimeError(f"wgmma operand {spec.name} has no descriptor", blk.loc,
                                   hint="a lowering produced this; please report it with the kernel")
        el = spec.desc.elements(int(st[0]), mn, k)
        n = blk.shared[id(ref.buffer)].shape[0]
        if el.min() < 0 or el.max() >= n:
            raise TileRuntimeError(f"out-of-bounds wgmma read of shared buffer {ref.buffer.name}: "
                                   f"elements {int(el.min())}..{int(el.max())} outside 0..{n - 1}", blk.loc,
                                   hint="check the gemm operand's shared tile shape and slice bounds")
        flat = el.reshape(-1)
        blk.trackers[id(ref.buffer)].read(flat, np.full(flat.size, tids[0]), blk.loc_id, blk.locs)
        vals = S.from_storage(blk.shared[id(ref.buffer)][flat], ref.buffer.dtype).astype(np.float64)
        return vals.reshape(mn, k), np.unique(flat)

    def _issue_group(self, blk, s: IntrinsicCall, tids: np.ndarray) -> None:
        intr = s.intrinsic
        m, n, k = intr.shape
        d_spec, a_spec, b_spec, c_spec = intr.operands
        d_ref, a_ref, b_ref, c_ref = s.operands
        held, shared = [], []
        if not self.fenced[tids].all():  # PTX: a fence before a warpgroup's first wgmma
            raise TileRuntimeError(
                f"{intr.name} issued before any wgmma fence of thread {int(tids[~self.fenced[tids]][0])}",
                blk.loc, hint="an AsyncFence('wgmma') (wgmma.fence) is missing before the first wgmma")
        if self._scale_d(blk, s, tids):
            c_vals, c_idx = self._reg_values(blk, c_ref, c_spec.elems, tids)
            c = _gather(S.from_storage(c_vals, c_spec.dtype), c_spec.map, m, n)
        else:  # scale-d 0: D = A @ B, the accumulator registers are not read
            c_idx = self._reg_offsets(blk, c_ref, c_spec.elems, tids)
            c = np.zeros((m, n))
        self._fenced(blk, c_ref, c_idx, tids, "accumulator")
        if a_spec.space == "reg":
            a_vals, a_idx = self._reg_values(blk, a_ref, a_spec.elems, tids)
            self._fenced(blk, a_ref, a_idx, tids, "A fragment")
            a = _gather(S.from_storage(a_vals, a_spec.dtype), a_spec.map, m, k)
            held.append((id(a_ref.buffer), a_idx))
        else:
            a, el = self._desc_values(blk, a_spec, a_ref, tids, m, k)
            shared.append((id(a_ref.buffer), el))
        bt, el = self._desc_values(blk, b_spec, b_ref, tids, n, k)
        shared.append((id(b_ref.buffer), el))
        d = S.round_to(a @ bt.T + c, d_spec.dtype)
        rows, cols = d_spec.map.arrays()
        vals = S.to_storage(d[rows, cols], d_spec.dtype)
        d_off = int(np.broadcast_to(np.asarray(blk.eval(d_ref.offset, None)), (blk.T,))[tids[0]])
        regs = d_off + np.arange(d_spec.elems)
        held.append((id(d_ref.buffer), np.broadcast_to(regs, (len(tids), len(regs)))))
        for key, idx in held:
            h = self.held.get(key)
            if h is None:
                h = self.held[key] = np.zeros((self.T, blk.regs[key].shape[1]), dtype=np.int64)
            np.add.at(h, (np.broadcast_to(tids[:, None], idx.shape), idx), 1)
        for key, el in shared:
            blk.trackers[key].async_read(el, blk.loc_id)
        self.pending.append(PendingMma(tids, int(self.committed[tids[0]]), id(d_ref.buffer), d_ref.buffer,
                                       regs, vals, held, shared, blk.loc_id))

    def _scale_d(self, blk, s: IntrinsicCall, tids: np.ndarray) -> bool:
        """Whether the wgmma accumulates (its scale-d is absent or nonzero); the value must be
        the same in every thread of the warpgroup."""
        if s.scale_d is None:
            return True
        v = np.broadcast_to(np.asarray(blk.eval(s.scale_d, None)), (blk.T,))[tids]
        if np.any(v != v[0]):
            raise TileRuntimeError(f"the threads of a warpgroup give {s.intrinsic.name} different "
                                   "scale-d values", blk.loc,
                                   hint="a lowering produced this; please report it with the kernel")
        return bool(v[0])

    def commit(self, mask: np.ndarray) -> None:
        """`wgmma.commit_group`: close the open group of the threads in `mask`."""
        self.committed[mask] += 1

    def wait(self, blk, pending: int, mask: np.ndarray) -> None:
        """`wgmma.wait_group pending`: land every op of the threads in `mask` older than their
        `pending` most recent groups (whole warpgroups: the instruction is .sync.aligned)."""
        limit = self.committed - pending
        keep = []
        for p in self.pending:
            if not (mask[p.tids].all() and p.group < limit[p.tids[0]]):
                keep.append(p)
                continue
            blk.regs[p.dst][p.tids[:, None], p.regs] = p.vals
            if blk.check_uninit:  # the landed accumulator is written (scale-d 0 needs no clear)
                uninit.mark_write(blk, p.dst_buf, p.tids, np.broadcast_to(p.regs, (len(p.tids), len(p.regs))))
            for key, idx in p.held:
                np.add.at(self.held[key], (np.broadcast_to(p.tids[:, None], idx.shape), idx), -1)
            for key, el in p.shared:
                blk.trackers[key].async_read_done(el)
        self.pending = keep


def _gather(vals: np.ndarray, lmap, rows: int, cols: int) -> np.ndarray:
    """A (rows, cols) float64 matrix from (G, elems) lane values through `lmap` (NaN where no
    lane supplies a cell, so a wrong table shows)."""
    r, c = lmap.arrays()
    out = np.full((rows, cols), np.nan)
    out[r, c] = vals.astype(np.float64)
    return out
