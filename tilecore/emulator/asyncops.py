"""Asynchronous copies in the emulator: issued now, landed at the wait that retires them.

Each thread has, per queue, a count of the groups it committed; a copy issued while a thread has
committed `g` groups belongs to its group `g` (the open one). `AsyncWait(n)` executed by a thread
lands every pending copy of that thread whose group is older than its `n` most recent committed
groups, as PTX's `cp.async.wait_group n` does. The source is read at issue (global memory is not
written by the kernels whose copies are in flight), the destination written at landing; the race
tracker sees the issue (`async_issue`) and the landing (`land`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TileRuntimeError
from ..ir.buffer import Buffer
from ..ir.thread import ASYNC_QUEUES, AsyncCopy


@dataclass
class PendingCopy:
    """One AsyncCopy statement's writes that have not landed, for the threads that issued it."""

    queue: str
    buffer: Buffer
    tids: np.ndarray  # (n,) issuing threads
    group: np.ndarray  # (n,) each thread's group number
    idx: np.ndarray  # (n, lanes) destination elements
    vals: np.ndarray  # (n, lanes) values in storage dtype
    loc_id: int


class AsyncState:
    """The block's in-flight asynchronous copies and per-thread group counters."""

    def __init__(self, threads: int):
        self.committed = {q: np.zeros(threads, dtype=np.int64) for q in ASYNC_QUEUES}
        self.pending: list[PendingCopy] = []

    def issue(self, blk, s: AsyncCopy, mask: np.ndarray) -> None:
        """Execute the issue of `s` for the threads in `mask` (blk: the emulator's Block)."""
        T = blk.T
        pred = mask if s.pred is None else mask & np.broadcast_to(blk.eval(s.pred, mask), (T,))
        zero = (mask & ~pred) if s.zero_fill else np.zeros(T, dtype=bool)
        lanes = pred | zero
        if not lanes.any():
            return
        dst_off = np.broadcast_to(np.asarray(blk.eval(s.dst_offset, lanes), dtype=np.int64), (T,))
        if np.any(lanes & (dst_off % s.lanes != 0)):
            raise TileRuntimeError(f"misaligned {s.lanes}-element asynchronous copy into {s.dst.name}",
                                   blk.loc, hint=f"make the destination offset a multiple of {s.lanes} "
                                   "elements (the tile's start and row length), or copy narrower")
        vals = np.zeros((T, s.lanes), dtype=s.dst.dtype.np)
        if pred.any():
            src_off = np.broadcast_to(np.asarray(blk.eval(s.src_offset, pred), dtype=np.int64), (T,))
            if np.any(pred & (src_off % s.lanes != 0)):
                raise TileRuntimeError(f"misaligned {s.lanes}-element asynchronous copy from "
                                       f"{s.src.name}", blk.loc, hint=f"make the source offset a "
                                       f"multiple of {s.lanes} elements (the region's start and the "
                                       "tensor's row length), or copy narrower")
            vals = np.where(pred[:, None], blk.read(s.src, src_off, pred, s.lanes), vals)
        blk._check(s.dst, dst_off, lanes, s.dst.shape[0], "asynchronous write", s.lanes)
        tids = blk.tid[lanes]
        idx = dst_off[lanes][:, None] + np.arange(s.lanes)
        blk.trackers[id(s.dst)].async_issue(idx.reshape(-1), np.repeat(tids, s.lanes), blk.loc_id, blk.locs)
        self.pending.append(PendingCopy(s.queue, s.dst, tids, self.committed[s.queue][tids].copy(), idx,
                                        vals[lanes], blk.loc_id))

    def commit(self, queue: str, mask: np.ndarray) -> None:
        """Close the open group of the threads in `mask`."""
        self.committed[queue][mask] += 1

    def wait(self, blk, queue: str, pending: int, mask: np.ndarray) -> None:
        """Land, for the threads in `mask`, every copy older than their `pending` latest groups."""
        limit = self.committed[queue] - pending
        keep: list[PendingCopy] = []
        for p in self.pending:
            if p.queue != queue:
                keep.append(p)
                continue
            done = mask[p.tids] & (p.group < limit[p.tids])
            if done.any():
                idx = p.idx[done]
                blk.shared[id(p.buffer)][idx.reshape(-1)] = p.vals[done].reshape(-1)
                blk.trackers[id(p.buffer)].land(idx.reshape(-1), np.repeat(p.tids[done], idx.shape[1]),
                                                p.loc_id)
            if not done.all():
                rest = ~done
                keep.append(PendingCopy(p.queue, p.buffer, p.tids[rest], p.group[rest], p.idx[rest],
                                        p.vals[rest], p.loc_id))
        self.pending = keep
