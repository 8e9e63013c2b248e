"""mbarriers and TMA bulk tensor copies in the emulator (docs/architecture.md, "Hopper: TMA,
mbarrier, warp specialization").

An mbarrier (one element of a shared buffer) counts, per phase, its missing arrivals and its
outstanding transaction bytes; the phase completes when both reach zero, and the next phase
begins. A `TmaLoad` reads its box at issue (elements outside the tensor are zeros), counts its
bytes as completed on its mbarrier's current phase at once, and keeps its values pending: they
land at the first `MbarrierWait` that observes that phase complete, as writes of the issuing
thread. A wait orders, for the waiting threads, every arriving thread's accesses before its
arrive, and the landed copies (`SyncClock.acquire`). Threads run in lock step, so a wait whose
phase is not complete when every thread of the block reaches it can never complete: that is a
deadlock (a GPU hangs), reported with the wait's line and what the phase still misses.
`TmaStore` reads its box at issue and writes (`reduce="add"`: adds into) the tensor, clipped
to its bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import TileRuntimeError
from ..ir.thread import MbarrierArrive, MbarrierInit, MbarrierWait, TmaLoad, TmaStore


@dataclass
class _Phase:
    """What one phase of an mbarrier collected: arrivals (thread -> epoch of its arrive) and
    the TMA copies completing on it, landed or not."""

    arrivals: dict = field(default_factory=dict)
    copies: list = field(default_factory=list)  # [(buffer, idx, vals, tid, loc_id)]
    landed: bool = False
    land_epoch: int = 0
    known: np.ndarray | None = None  # what the arriving threads had acquired (SyncClock.known)


@dataclass
class _Mbarrier:
    count: int
    pending: int
    tx: int = 0
    phase: int = 0  # phases completed so far
    current: _Phase = field(default_factory=_Phase)
    done: dict = field(default_factory=dict)  # completed phase number -> _Phase (the last few)


class MbarrierState:
    """The block's mbarriers, keyed by (buffer id, element)."""

    def __init__(self):
        self.bars: dict[tuple, _Mbarrier] = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _inside(blk, buf, idx: np.ndarray, what: str) -> None:
        bad = (idx < 0) | (idx >= buf.shape[0])
        if bad.any():
            raise TileRuntimeError(f"out-of-bounds {what} of shared buffer {buf.name}: element "
                                   f"{int(idx[np.argmax(bad)])}, outside 0..{buf.shape[0] - 1}", blk.loc,
                                   hint="index the barrier buffer within its size (check the stage index)")

    @staticmethod
    def _offsets(blk, e, mask) -> np.ndarray:
        return np.broadcast_to(np.asarray(blk.eval(e, mask), dtype=np.int64), (blk.T,))

    def _get(self, blk, buf, off: int) -> _Mbarrier:
        m = self.bars.get((id(buf), off))
        if m is None:
            raise TileRuntimeError(f"mbarrier {buf.name}[{off}] used before MbarrierInit", blk.loc,
                                   hint="initialize it (one thread), then a block barrier, before use")
        return m

    def _touch(self, blk, buf, off: np.ndarray, mask: np.ndarray, write: bool) -> None:
        """The race tracker sees mbarrier operations as reads (init: a write) of the element."""
        blk._check(buf, off, mask, buf.shape[0], "mbarrier access")
        tr = blk.trackers[id(buf)]
        (tr.write if write else tr.read)(off[mask], blk.tid[mask], blk.loc_id, blk.locs)

    def _complete(self, blk, m: _Mbarrier) -> None:
        if m.pending == 0 and m.tx == 0:
            m.done[m.phase] = m.current
            m.done.pop(m.phase - 4, None)
            m.phase += 1
            m.pending, m.tx, m.current = m.count, 0, _Phase()

    # ------------------------------------------------------------------ statements
    def execute(self, blk, s, mask: np.ndarray) -> None:
        """Run one mbarrier or TMA statement for the threads in `mask`."""
        if isinstance(s, MbarrierInit):
            self.init(blk, s, mask)
        elif isinstance(s, MbarrierArrive):
            self.arrive(blk, s, mask)
        elif isinstance(s, MbarrierWait):
            self.wait(blk, s, mask)
        elif isinstance(s, TmaLoad):
            self.tma_load(blk, s, mask)
        elif isinstance(s, TmaStore):
            self.tma_store(blk, s, mask)

    def init(self, blk, s: MbarrierInit, mask: np.ndarray) -> None:
        """`mbarrier.init` by every thread in `mask` (normally one)."""
        off = self._offsets(blk, s.offset, mask)
        self._touch(blk, s.bar, off, mask, True)
        for o in np.unique(off[mask]):
            self.bars[(id(s.bar), int(o))] = _Mbarrier(s.count, s.count)

    def arrive(self, blk, s: MbarrierArrive, mask: np.ndarray) -> None:
        """Each thread in `mask` adds `expect_tx` bytes and arrives once."""
        off = self._offsets(blk, s.offset, mask)
        self._touch(blk, s.bar, off, mask, False)
        blk.clock.epoch += 1  # accesses before the arrive are older than this epoch
        for t in np.nonzero(mask)[0]:
            m = self._get(blk, s.bar, int(off[t]))
            k = blk.clock.known(np.array([t], dtype=np.int64))
            if k is not None:
                ph = m.current
                ph.known = k if ph.known is None else np.maximum(ph.known, k)
            m.tx += s.expect_tx
            m.pending -= 1
            if m.pending < 0:
                raise TileRuntimeError(f"mbarrier {s.bar.name}[{int(off[t])}] gets more than its {m.count} "
                                       f"arrivals in phase {m.phase}", blk.loc,
                                       hint="arrive once per expected thread and phase")
            m.current.arrivals[int(t)] = blk.clock.epoch
            self._complete(blk, m)

    def wait(self, blk, s: MbarrierWait, mask: np.ndarray) -> None:
        """The threads in `mask` wait for the phase of parity `s.phase`; its copies land."""
        off = self._offsets(blk, s.offset, mask)
        par = np.broadcast_to(np.asarray(blk.eval(s.phase, mask), dtype=np.int64), (blk.T,))
        self._touch(blk, s.bar, off, mask, False)
        keys = {(int(off[t]), int(par[t]) & 1) for t in np.nonzero(mask)[0]}
        for o, p in sorted(keys):
            m = self._get(blk, s.bar, o)
            if m.phase % 2 == p and blk.tasks is not None:  # another thread group may complete it
                loc_id, env = blk.loc_id, blk.env  # the task's own (divergence.py)
                blk.tasks.block(lambda m=m, p=p: m.phase % 2 != p,
                                lambda m=m, o=o, p=p: self._deadlock_error(blk, s, m, o, p))
                blk.loc_id, blk.env = loc_id, env
            if m.phase % 2 == p:  # the phase of that parity is the one in progress
                raise self._deadlock_error(blk, s, m, o, p)
            waiters = blk.tid[mask & (off == o) & ((par & 1) == p)]
            for n in sorted(k for k in m.done if k % 2 == p and k <= m.phase - 1):
                self._observe(blk, m.done[n], waiters)

    def check_end(self, blk) -> None:
        """At the end of a block no mbarrier may hold a phase that some threads arrived at and
        that never completed: its arrival count (T.alloc_barrier) does not match the threads
        that arrive, or an arrive is missing (a GPU leaves the phase pending silently)."""
        for (_, off), m in self.bars.items():
            if m.current.arrivals and m.pending:
                buf = next((b for b in blk.k.shared if (id(b), off) in self.bars and
                            self.bars[(id(b), off)] is m), None)
                name = f"{buf.name}[{off}]" if buf is not None else f"an mbarrier [{off}]"
                raise TileRuntimeError(
                    f"mbarrier {name} ends the block with phase {m.phase} incomplete: "
                    f"{len(m.current.arrivals)} threads arrived, {m.pending} of its {m.count} "
                    "expected arrivals are missing", blk.k.loc,
                    hint="make the arrival count of T.alloc_barrier equal the number of threads "
                         "that call T.barrier_arrive in each phase")

    @staticmethod
    def _deadlock_error(blk, s, m, o: int, p: int) -> TileRuntimeError:
        """The report of a wait on mbarrier `o` (state `m`) for parity `p` that never returns."""
        who = "every thread" if blk.tasks is None else "every thread group"
        return TileRuntimeError(
            f"deadlock: {who} waits, this one on mbarrier {s.bar.name}[{o}] phase {m.phase} (parity {p}), "
            f"which can never complete: {m.pending} of {m.count} arrivals are missing and {m.tx} "
            "transaction bytes are outstanding", blk.loc,
            hint="a GPU would hang here: an arrive or expect-tx is missing, its byte count differs from "
                 "what the TMA copies complete, or the wait's phase parity is wrong")

    def _observe(self, blk, ph: _Phase, waiters: np.ndarray) -> None:
        """`waiters` observe completed phase `ph`: its copies land (the first time), and every
        arrival and copy is ordered before their later accesses."""
        if not ph.landed:
            for buf, idx, vals, tid, loc_id in ph.copies:
                blk.shared[id(buf)][idx] = vals
                blk.trackers[id(buf)].land(idx, np.full(len(idx), tid, dtype=np.int64), loc_id)
            blk.clock.epoch += 1
            ph.landed, ph.land_epoch = True, blk.clock.epoch
        src = dict(ph.arrivals)
        for _, _, _, tid, _ in ph.copies:
            src[tid] = max(src.get(tid, 0), ph.land_epoch)
        if ph.known is not None:  # transitively: what the arrivers had acquired themselves
            blk.clock.acquire(np.arange(blk.T, dtype=np.int64), ph.known, waiters)
        if src:
            blk.clock.acquire(np.array(list(src), dtype=np.int64),
                              np.array(list(src.values()), dtype=np.int64), waiters)

    def _box(self, blk, s, t: int):
        """(row-major flat tensor offsets, in-bounds mask) of the box elements for thread `t`,
        and the box's (rows, cols) coordinates."""
        dims = [int(np.asarray(blk.eval(n, None))) if not isinstance(n, int) else n for n in s.tensor.shape]
        coords = [int(np.broadcast_to(np.asarray(blk.eval(c, None), dtype=np.int64), (blk.T,))[t])
                  for c in s.coords]
        grids = np.meshgrid(*[np.arange(n) for n in s.box], indexing="ij")
        flat = np.zeros(grids[0].shape, dtype=np.int64)
        inside = np.ones(grids[0].shape, dtype=bool)
        for g, c, n in zip(grids, coords, dims):
            pos = g + c
            inside &= (pos >= 0) & (pos < n)
            flat = flat * n + np.where(inside, pos, 0)
        cols = s.box[-1]
        lin = np.arange(flat.size, dtype=np.int64)
        return flat.reshape(-1), inside.reshape(-1), lin // cols, lin % cols

    def tma_load(self, blk, s: TmaLoad, mask: np.ndarray) -> None:
        """Each thread in `mask` issues the copy: read now, pending until its phase is waited."""
        dst = self._offsets(blk, s.dst_offset, mask)
        bar = self._offsets(blk, s.bar_offset, mask)
        self._touch(blk, s.bar, bar, mask, False)
        src = blk.mem[id(s.tensor)]
        for t in np.nonzero(mask)[0]:
            flat, inside, rows, cols = self._box(blk, s, int(t))
            vals = np.where(inside, src[np.where(inside, flat, 0)], np.zeros((), dtype=src.dtype))
            idx = int(dst[t]) + s.layout.offset_np(rows, cols)
            self._inside(blk, s.dst, idx, "TMA write")
            tids = np.full(len(idx), t, dtype=np.int64)
            blk.trackers[id(s.dst)].async_issue(idx, tids, blk.loc_id, blk.locs, kind="mbarrier")
            m = self._get(blk, s.bar, int(bar[t]))
            m.current.copies.append((s.dst, idx, vals.astype(s.dst.dtype.np), int(t), blk.loc_id))
            m.tx -= s.nbytes
            self._complete(blk, m)

    def tma_store(self, blk, s: TmaStore, mask: np.ndarray) -> None:
        """Each thread in `mask` stores the box now, skipping elements outside the tensor."""
        off = self._offsets(blk, s.src_offset, mask)
        out = blk.mem[id(s.tensor)]
        for t in np.nonzero(mask)[0]:
            flat, inside, rows, cols = self._box(blk, s, int(t))
            idx = int(off[t]) + s.layout.offset_np(rows, cols)
            self._inside(blk, s.src, idx, "TMA read")
            blk.trackers[id(s.src)].read(idx, np.full(len(idx), t, dtype=np.int64), blk.loc_id, blk.locs)
            vals = blk.shared[id(s.src)][idx]
            if s.reduce:  # float32 only (tilecore.lower.tma_reduce): storage is the value
                np.add.at(out, flat[inside], vals[inside])
            else:
                out[flat[inside]] = vals[inside]
