"""Race tracking of shared buffers that share bytes (`tilecore.lower.smem_plan.SharedPlan`).

Buffers the plan gives overlapping bytes keep their own value arrays (their live ranges are
disjoint, so no correct program reads one buffer's values through another), but their accesses
are tracked on one `SharedTracker` of the whole allocation: a thread writing buffer B over bytes
another thread still reads as buffer A, with no barrier in between, is reported as the race it
would be on the hardware. That tracker's element is a *unit* of `u` bytes, the largest size
dividing every aliased buffer's item size and byte offset (4 for float32 buffers at 4-aligned
offsets, 1 at worst): each element then covers whole units, so two accesses overlap in units
exactly when they overlap in bytes, with a u-th of the bookkeeping. Element `i` of a buffer at
byte offset `o` with items of `s` bytes is units `(o + i*s)/u .. (o + i*s + s)/u - 1`.
"""

from __future__ import annotations

import math

import numpy as np

from .race import SharedTracker


class AliasedTracker:
    """A `SharedTracker` view of one buffer inside the byte tracker of the shared allocation.

    `writer` / `pending` are the buffer's own (the uninitialized-read check asks whether *this*
    buffer's element was written, not whether some buffer wrote those bytes)."""

    def __init__(self, storage: SharedTracker, offset: int, itemsize: int, n: int, unit: int = 1):
        self.storage = storage
        # in units of `unit` bytes (see the module docstring)
        self.offset, self.itemsize = offset // unit, itemsize // unit
        self.writer = np.full(n, -1, dtype=np.int64)
        self.pending = np.full(n, -1, dtype=np.int64)

    def _bytes(self, idx: np.ndarray, tid: np.ndarray | None = None):
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        b = (self.offset + idx[:, None] * self.itemsize + np.arange(self.itemsize)).reshape(-1)
        return b if tid is None else (b, np.repeat(np.asarray(tid, dtype=np.int64).reshape(-1),
                                                   self.itemsize))

    def read(self, idx, tid, loc_id: int, locs: list) -> None:
        """Reads of elements `idx` by threads `tid` (SharedTracker.read on their bytes)."""
        self.storage.read(*self._bytes(idx, tid), loc_id, locs)

    def write(self, idx, tid, loc_id: int, locs: list, vals=None) -> None:
        """Writes of elements `idx` by threads `tid` (SharedTracker.write on their bytes; the
        values, when given, byte by byte)."""
        if vals is not None:
            vals = np.ascontiguousarray(vals).reshape(-1).view(np.uint8)
        self.storage.write(*self._bytes(idx, tid), loc_id, locs, vals)
        self.writer[np.asarray(idx, dtype=np.int64).reshape(-1)] = np.asarray(tid).reshape(-1)

    def async_issue(self, idx, tid, loc_id: int, locs: list, kind: str = "group") -> None:
        """Asynchronous copies into `idx` issued by `tid`."""
        self.storage.async_issue(*self._bytes(idx, tid), loc_id, locs, kind=kind)
        self.pending[np.asarray(idx, dtype=np.int64).reshape(-1)] = np.asarray(tid).reshape(-1)

    def land(self, idx, tid, issue_loc_id: int) -> None:
        """Asynchronous writes into `idx` land now."""
        self.storage.land(*self._bytes(idx, tid), issue_loc_id)
        flat = np.asarray(idx, dtype=np.int64).reshape(-1)
        self.pending[flat] = -1
        self.writer[flat] = np.asarray(tid).reshape(-1)

    def async_read(self, idx, loc_id: int) -> None:
        """Asynchronous reads of `idx` start (never planned to share: kept for completeness)."""
        self.storage.async_read(self._bytes(idx), loc_id)

    def async_read_done(self, idx) -> None:
        """Asynchronous reads of `idx` are complete."""
        self.storage.async_read_done(self._bytes(idx))


def trackers(kernel, clock) -> dict[int, object]:
    """id(buffer) -> tracker for every shared buffer of `kernel`: element trackers, and views of
    one unit tracker for the buffers its `shared_plan` lets share bytes."""
    plan = kernel.shared_plan
    aliased = {id(b) for b in plan.aliased} if plan is not None else set()
    out: dict[int, object] = {}
    storage = None
    unit = 1
    if aliased:  # its "elements" are units of the allocation
        unit = math.gcd(*(v for b in plan.aliased for v in (b.dtype.itemsize, plan.offset_of(b))))
        unit = math.gcd(unit, plan.total) or 1
        names = "/".join(b.name for b in plan.aliased)
        what = "byte" if unit == 1 else f"{unit} bytes"
        storage = SharedTracker(f"{names} (one storage; element = {what})", plan.total // unit, clock)
    for b in kernel.shared:
        if id(b) in aliased:
            out[id(b)] = AliasedTracker(storage, plan.offset_of(b), b.dtype.itemsize, b.shape[0], unit)
        else:
            out[id(b)] = SharedTracker(b.name, b.shape[0], clock)
    return out
