"""Shared-memory race detection between barriers.

For every element of a shared buffer the tracker remembers which thread wrote it and which
thread(s) read it since the last barrier. A read of an element another thread wrote (RAW), or a
write of an element another thread read (WAR), with no barrier in between, is a data race: the
GPU may order the two accesses either way. The error names the buffer and both source lines.
"""

from __future__ import annotations

import numpy as np

from ..errors import TileRuntimeError

_MANY = -2  # more than one reader


class SharedTracker:
    """Per-element writer/reader thread ids of one shared buffer in the current barrier epoch."""

    def __init__(self, name: str, n: int):
        self.name = name
        self.writer = np.full(n, -1, dtype=np.int64)
        self.reader = np.full(n, -1, dtype=np.int64)
        self.wloc = np.full(n, -1, dtype=np.int64)
        self.rloc = np.full(n, -1, dtype=np.int64)

    def barrier(self) -> None:
        """A barrier: a new epoch begins."""
        self.writer.fill(-1)
        self.reader.fill(-1)

    def read(self, idx: np.ndarray, tid: np.ndarray, loc_id: int, locs: list) -> None:
        """Record reads of elements `idx` by threads `tid`; raise on a read-after-write race."""
        if idx.size == 0:
            return
        w = self.writer[idx]
        bad = (w >= 0) & (w != tid)
        if bad.any():
            k = int(np.argmax(bad))
            raise TileRuntimeError(
                f"data race on shared buffer {self.name}: thread {int(tid[k])} reads element "
                f"{int(idx[k])} written by thread {int(w[k])} (at {_loc(locs, self.wloc[idx[k]])}) "
                f"with no barrier in between", locs[loc_id],
                hint="a barrier is missing between the write and the read (a lowering bug unless "
                     "the kernel writes shared memory inside per-thread code)")
        uniq, inv = np.unique(idx, return_inverse=True)
        lo = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
        hi = np.full(len(uniq), -1, dtype=np.int64)
        np.minimum.at(lo, inv, tid)
        np.maximum.at(hi, inv, tid)
        cur = self.reader[uniq]
        new = np.where(lo != hi, _MANY, lo)
        new = np.where((cur == -1) | (cur == new), new, _MANY)
        self.reader[uniq] = new
        self.rloc[uniq] = loc_id

    def write(self, idx: np.ndarray, tid: np.ndarray, loc_id: int, locs: list) -> None:
        """Record writes; raise on a write-after-read race."""
        if idx.size == 0:
            return
        r = self.reader[idx]
        bad = (r == _MANY) | ((r >= 0) & (r != tid))
        if bad.any():
            k = int(np.argmax(bad))
            who = "other threads" if r[k] == _MANY else f"thread {int(r[k])}"
            raise TileRuntimeError(
                f"data race on shared buffer {self.name}: thread {int(tid[k])} overwrites element "
                f"{int(idx[k])} that {who} read (at {_loc(locs, self.rloc[idx[k]])}) with no barrier "
                f"in between", locs[loc_id],
                hint="a barrier is missing between the read and the write")
        self.writer[idx] = tid
        self.wloc[idx] = loc_id


def _loc(locs: list, i) -> str:
    i = int(i)
    return str(locs[i]) if 0 <= i < len(locs) and locs[i] is not None else "<unknown>"
