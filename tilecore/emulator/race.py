"""Shared-memory race detection under the asynchronous memory model (docs/architecture.md).

Time is counted in *epochs*: every barrier starts a new one. `SyncClock` remembers, for each pair
of threads, the last epoch in which both passed a barrier together (block barriers set every
pair; named and warpgroup barriers only the pairs taking part). An access made in epoch `t` by
thread `a` is ordered before a later access by `b` when `a == b` or a barrier both took part in
started after `t`. An mbarrier wait orders one way (`acquire`): the arriving threads' earlier
accesses before the waiting threads' later ones.

For every element of a shared buffer the tracker remembers its last writer (and the write's
epoch), its readers since they were last ordered (a thread range and the epoch of the latest
read), and the thread whose asynchronous copy into it has been issued but has not landed. It
raises, naming the buffer and both source lines:

- a read (RAW) of an element another thread wrote, a write (WAR) of an element another
  thread read, or a write (WAW) of an element another thread wrote, with no barrier ordering
  the two (or two threads writing one element in one statement);
- any access to an element whose asynchronous write is still pending (a missing or too weak
  wait), and the issue of an asynchronous copy into an element that another thread read or
  wrote, or that another copy is still filling (a stage buffer reused too early).
"""

from __future__ import annotations

import numpy as np

from ..errors import TileRuntimeError

READER_GROUP = 128  # threads per reader slot (a warpgroup; SharedTracker)
# SyncClock.ordered_range gathers (ranges x widest range) clock entries at once up to this size
_GATHER_LIMIT = 1 << 20
_NO_LO = np.iinfo(np.int64).max  # an empty reader range's low end in the scratch arrays


class SyncClock:
    """Epochs and the per-pair last common barrier of one block's threads."""

    def __init__(self, threads: int):
        self.threads = threads
        self.epoch = 0
        self.block_epoch = 0  # the epoch the last block-wide barrier started
        self.sync: np.ndarray | None = None  # (T, T) last common barrier; None: only block barriers

    def barrier(self, tids: np.ndarray | None = None) -> None:
        """A barrier taken by every thread (`tids` None) or by threads `tids` only."""
        self.epoch += 1
        if tids is None:
            self.block_epoch = self.epoch
            self.sync = None  # every earlier access is ordered before every later one
            return
        if self.sync is None:
            self.sync = np.full((self.threads, self.threads), self.block_epoch, dtype=np.int64)
        self.sync[np.ix_(tids, tids)] = self.epoch

    def acquire(self, src: np.ndarray, epochs: np.ndarray, dst: np.ndarray) -> None:
        """One-way ordering (an mbarrier wait): accesses of thread `src[i]` made before epoch
        `epochs[i]` are ordered before every later access of the threads `dst`."""
        if len(src) == 0 or len(dst) == 0:
            return
        if self.sync is None:
            self.sync = np.full((self.threads, self.threads), self.block_epoch, dtype=np.int64)
        cur = self.sync[np.ix_(src, dst)]
        self.sync[np.ix_(src, dst)] = np.maximum(cur, epochs[:, None])

    def known(self, tids: np.ndarray) -> np.ndarray | None:
        """For every thread x, the epoch before which x's accesses are ordered before some
        thread of `tids` (what those threads have acquired so far), or None when only block
        barriers ordered anything (then everybody knows the same). An arrive carries this along
        (happens-before is transitive: producer -> consumer A -> consumer B)."""
        if self.sync is None or len(tids) == 0:
            return None
        return self.sync[:, tids].max(axis=1)

    def ordered(self, a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Whether accesses by threads `a` in epochs `t` are ordered before accesses by `b` now."""
        if self.sync is None:
            return (a == b) | (self.block_epoch > t)
        return (a == b) | (self.sync[a, b] > t)

    def ordered_range(self, lo: np.ndarray, hi: np.ndarray, t: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether every thread in lo..hi other than `b` is ordered (since epochs `t`) before `b`."""
        if self.sync is None:
            return ((lo == b) & (hi == b)) | (self.block_epoch > t)
        span = int((hi - lo).max()) + 1
        if len(lo) * span <= _GATHER_LIMIT:
            # one gather for all ranges (most are one thread wide: a per-thread read), instead
            # of a Python loop over the distinct ranges; out-of-range columns count as ordered
            cols = lo[:, None] + np.arange(span)[None, :]
            inside = (cols <= hi[:, None]) & (cols != b[:, None])
            got = self.sync[np.minimum(cols, self.threads - 1), b[:, None]]
            return np.where(inside, got > t[:, None], True).all(axis=1)
        out = np.ones(len(lo), dtype=bool)
        for key in set(zip(lo.tolist(), hi.tolist())):
            sel = (lo == key[0]) & (hi == key[1])
            rows = self.sync[key[0]:key[1] + 1][:, b[sel]].T.copy()  # sync[reader, b]
            cols = np.arange(key[0], key[1] + 1)
            rows[cols[None, :] == b[sel][:, None]] = np.iinfo(np.int64).max  # a thread vs itself
            out[sel] = rows.min(axis=1) > t[sel]
        return out


class SharedTracker:
    """Per-element writer, readers and pending asynchronous writes of one shared buffer."""

    def __init__(self, name: str, n: int, clock: SyncClock):
        self.name = name
        self.clock = clock
        self.writer = np.full(n, -1, dtype=np.int64)
        self.wtime = np.zeros(n, dtype=np.int64)
        self.wloc = np.full(n, -1, dtype=np.int64)
        self.wasync = np.zeros(n, dtype=bool)  # the last write was a landed asynchronous copy
        # readers per warpgroup slot (column g: threads 128g..128g+127): a thread range and the
        # epoch of its latest read, so one warpgroup's later reads do not make another's earlier
        # reads look later than the arrive that released them
        g = max(1, -(-clock.threads // READER_GROUP))
        # one row per slot (shape (g, n)): a row is contiguous, and 1-D fancy indexing of a row
        # is several times faster than indexing (elements, slot) pairs
        self.rlo = np.full((g, n), -1, dtype=np.int64)
        self.rhi = np.full((g, n), -1, dtype=np.int64)
        self.rtime = np.zeros((g, n), dtype=np.int64)
        self.rloc = np.full((g, n), -1, dtype=np.int64)
        self._scratch_lo = np.full(n, _NO_LO, dtype=np.int64)  # see _add_readers
        self._scratch_hi = np.full(n, -1, dtype=np.int64)
        # the threads of the last write: a contiguous range that stored one value in one
        # statement (`flag[i // 8] = c` by 8 threads), else the writer alone
        self.wlo = np.full(n, -1, dtype=np.int64)
        self.whi = np.full(n, -1, dtype=np.int64)
        self.pending = np.full(n, -1, dtype=np.int64)  # thread whose async copy has not landed
        self.ploc = np.full(n, -1, dtype=np.int64)
        self.pbar = np.zeros(n, dtype=bool)  # that copy completes on an mbarrier (TMA)
        self.aread = np.zeros(n, dtype=np.int64)  # in-flight asynchronous reads (wgmma operands)
        self.aloc = np.full(n, -1, dtype=np.int64)
        # summaries that let the per-access checks skip their look-ups in the common case
        self.any_pending = False  # some element's asynchronous write has not landed
        self.async_reads = 0  # elements (with multiplicity) asynchronous ops read now

    def _raise(self, msg: str, loc_id: int, locs: list, hint: str):
        raise TileRuntimeError(f"data race on shared buffer {self.name}: {msg}", locs[loc_id], hint=hint)

    def _check_pending(self, idx, tid, verb: str, loc_id: int, locs: list) -> None:
        if not self.any_pending:
            return  # no copy in flight into this buffer: nothing to look up
        p = self.pending[idx]
        bad = p >= 0
        if bad.any():
            k = int(np.argmax(bad))
            self._raise(
                f"thread {int(tid[k])} {verb} element {int(idx[k])} before the asynchronous copy of "
                f"thread {int(p[k])} into it (issued at {_loc(locs, self.ploc[idx[k]])}) has landed",
                loc_id, locs, ("no MbarrierWait (mbarrier.try_wait) on that copy's phase precedes this "
                               "access, or the stage buffer is reused too early") if self.pbar[idx[k]] else
                ("no wait retires that copy here: an AsyncWait (cp.async.wait_group) is "
                 "missing or waits for too few groups, or the stage buffer is reused too early"))

    # --- asynchronous reads (wgmma descriptor operands, tilecore.emulator.wgmma) ---
    def async_read(self, idx: np.ndarray, loc_id: int) -> None:
        """Elements `idx` are read by an asynchronous op from now until `async_read_done`."""
        np.add.at(self.aread, idx, 1)
        self.aloc[idx] = loc_id
        self.async_reads += np.size(idx)

    def async_read_done(self, idx: np.ndarray) -> None:
        """The asynchronous op reading `idx` has been retired by its wait."""
        np.add.at(self.aread, idx, -1)
        self.async_reads -= np.size(idx)

    def _check_async_read(self, idx, tid, verb: str, loc_id: int, locs: list) -> None:
        if not self.async_reads:
            return  # no asynchronous op reads this buffer now
        bad = self.aread[idx] > 0
        if bad.any():
            k = int(np.argmax(bad))
            self._raise(
                f"thread {int(tid[k])} {verb} element {int(idx[k])} while an asynchronous tensor-core "
                f"op (wgmma issued at {_loc(locs, self.aloc[idx[k]])}) still reads it", loc_id, locs,
                "no wgmma wait retires that op before the buffer is written: an AsyncWait('wgmma') "
                "(wgmma.wait_group) is missing or waits for too few groups")
    # --- end asynchronous reads ---

    def _check_war(self, idx, tid, verb: str, loc_id: int, locs: list) -> None:
        for g in range(self.rlo.shape[0]):
            lo, hi = self.rlo[g][idx], self.rhi[g][idx]
            cand = lo >= 0
            if not cand.any():
                continue
            ok = np.ones(len(idx), dtype=bool)
            ok[cand] = self.clock.ordered_range(lo[cand], hi[cand], self.rtime[g][idx][cand], tid[cand])
            bad = ~ok
            if bad.any():
                k = int(np.argmax(bad))
                who = f"thread {int(lo[k])}" if lo[k] == hi[k] else f"threads {int(lo[k])}..{int(hi[k])}"
                self._raise(
                    f"thread {int(tid[k])} {verb} element {int(idx[k])} that {who} read (at "
                    f"{_loc(locs, self.rloc[g][idx[k]])}) with no barrier in between", loc_id, locs,
                    "a barrier is missing between the read and the write")

    def read(self, idx: np.ndarray, tid: np.ndarray, loc_id: int, locs: list) -> None:
        """Record reads of elements `idx` by threads `tid`; raise on a race."""
        if idx.size == 0:
            return
        self._check_pending(idx, tid, "reads", loc_id, locs)
        w = self.writer[idx]
        # a thread that took part in a one-value write reads that value whatever the others did
        cowrote = (self.wlo[idx] <= tid) & (tid <= self.whi[idx])
        bad = (w >= 0) & ~cowrote & ~self.clock.ordered(w, tid, self.wtime[idx])
        if bad.any():
            k = int(np.argmax(bad))
            what = "an asynchronous copy of thread" if self.wasync[idx[k]] else "thread"
            landed = " landed by its wait" if self.wasync[idx[k]] else ""
            self._raise(
                f"thread {int(tid[k])} reads element {int(idx[k])} written by {what} {int(w[k])} "
                f"(at {_loc(locs, self.wloc[idx[k]])}){landed} with no barrier in between", loc_id, locs,
                "a barrier is missing between the write and the read (a wait makes an asynchronous "
                "copy visible to its own thread only)")
        if self.rlo.shape[0] == 1:  # at most one warpgroup: one reader slot, no grouping
            self._add_readers(idx, tid, 0, loc_id)
            return
        grp = tid // READER_GROUP
        g0, g1 = int(grp.min()), int(grp.max())
        if g0 == g1:
            self._add_readers(idx, tid, g0, loc_id)
            return
        for g in range(g0, g1 + 1):
            sel = grp == g
            if sel.any():
                self._add_readers(idx[sel], tid[sel], g, loc_id)

    def _add_readers(self, idx: np.ndarray, tid: np.ndarray, g: int, loc_id: int) -> None:
        """Widen reader slot `g` of elements `idx` by threads `tid` (one read statement).

        The per-element thread range comes from two ufunc.at reductions into scratch arrays
        (reset after), not from np.unique: an element read by several threads gets the same
        range at each of its positions, so the assignments below, duplicates included, store
        one value per element (np.unique per read statement was a third of this function's
        time, and the reads are a fifth of a generated program's emulation)."""
        if idx.size == 1 or (idx[1:] > idx[:-1]).all():
            lo = hi = tid  # each element read by one thread (the common, rising case)
        else:
            lo_s, hi_s = self._scratch_lo, self._scratch_hi
            np.minimum.at(lo_s, idx, tid)
            np.maximum.at(hi_s, idx, tid)
            lo, hi = lo_s[idx], hi_s[idx]
            lo_s[idx] = _NO_LO
            hi_s[idx] = -1
        # readers ordered by a block barrier since are forgotten; others widen the range
        row_lo, row_hi, row_time = self.rlo[g], self.rhi[g], self.rtime[g]
        rlo, rhi = row_lo[idx], row_hi[idx]
        fresh = (rlo < 0) | (row_time[idx] < self.clock.block_epoch)
        row_lo[idx] = np.where(fresh, lo, np.minimum(rlo, lo))
        row_hi[idx] = np.where(fresh, hi, np.maximum(rhi, hi))
        row_time[idx] = self.clock.epoch
        self.rloc[g][idx] = loc_id

    def write(self, idx: np.ndarray, tid: np.ndarray, loc_id: int, locs: list,
              vals: np.ndarray | None = None) -> None:
        """Record synchronous writes (of `vals`, one row per index, when given); raise on a race
        or a pending async write."""
        if idx.size == 0:
            return
        self._check_pending(idx, tid, "overwrites", loc_id, locs)
        self._check_async_read(idx, tid, "overwrites", loc_id, locs)
        self._check_war(idx, tid, "overwrites", loc_id, locs)
        co = self._check_waw(idx, tid, loc_id, locs, vals)
        self._set_writer(idx, tid, loc_id, False)
        if co is not None:
            self.wlo[co[0]], self.whi[co[0]] = co[1], co[2]

    def _check_waw(self, idx, tid, loc_id: int, locs: list, vals=None):
        """A write-write race: two threads write one element, in one instruction or in two not
        ordered by a barrier (which value survives depends on the hardware's schedule). A
        contiguous range of threads storing one bit pattern into an element in one statement
        (`A_s[k] = A[k]` by every thread) is not one: every schedule leaves that value. Returns
        (elements, first thread, last thread) of such writes, or None."""
        co = None
        if idx.size == 1 or (idx[1:] > idx[:-1]).all():
            same = None  # rising offsets: no element written twice (no sort needed)
        else:
            order = np.lexsort((tid, idx))
            si, st = idx[order], tid[order]
            same = (si[1:] == si[:-1]) & (st[1:] != st[:-1])
        if same is not None and vals is not None and same.any():
            bits = np.ascontiguousarray(vals).reshape(len(idx), -1).view(np.uint8)[order]
            uniq, start, count = np.unique(si, return_index=True, return_counts=True)
            first, last = st[start], st[start + count - 1]
            rep_ = np.repeat(start, count)
            equal = np.logical_and.reduceat(np.all(bits == bits[rep_], axis=1), start)
            benign = (count > 1) & (last - first + 1 == count) & equal
            same &= ~np.repeat(benign, count)[1:]
            co = (uniq[benign], first[benign], last[benign]) if benign.any() else None
        if same is not None and same.any():
            k = int(np.argmax(same))
            self._raise(
                f"threads {int(st[k])} and {int(st[k + 1])} both write element {int(si[k])} in one "
                "statement", loc_id, locs,
                "make each element's writer unique (guard the store with `if`, or write a "
                "per-thread part of the tile)")
        w = self.writer[idx]
        bad = (w >= 0) & ~self._writers_ordered(idx, tid)
        if bad.any():
            k = int(np.argmax(bad))
            self._raise(
                f"thread {int(tid[k])} overwrites element {int(idx[k])} written by thread {int(w[k])} "
                f"(at {_loc(locs, self.wloc[idx[k]])}) with no barrier in between", loc_id, locs,
                "a barrier is missing between the two writes, or two threads write one element")
        return co

    def async_issue(self, idx: np.ndarray, tid: np.ndarray, loc_id: int, locs: list,
                    kind: str = "group") -> None:
        """Record the issue of asynchronous copies into `idx`: the write may happen any time from
        now until it lands, so it must already be ordered after other threads' accesses."""
        if idx.size == 0:
            return
        self._check_pending(idx, tid, "issues an asynchronous copy into", loc_id, locs)
        self._check_async_read(idx, tid, "issues an asynchronous copy into", loc_id, locs)
        self._check_war(idx, tid, "issues an asynchronous copy into", loc_id, locs)
        w = self.writer[idx]
        bad = (w >= 0) & ~self._writers_ordered(idx, tid)
        if bad.any():
            k = int(np.argmax(bad))
            self._raise(
                f"thread {int(tid[k])} issues an asynchronous copy into element {int(idx[k])} written "
                f"by thread {int(w[k])} (at {_loc(locs, self.wloc[idx[k]])}) with no barrier in between",
                loc_id, locs, "a barrier is missing before the copy (a stage buffer reused too early)")
        self.pending[idx] = tid
        self.any_pending = True
        self.ploc[idx] = loc_id
        self.pbar[idx] = kind == "mbarrier"
        # every earlier reader is ordered before this copy (checked above), and every later
        # write must be ordered after the copy: the old readers need no more tracking (a
        # stage that two consumer groups read in turn would otherwise widen to both groups)
        self.rlo[:, idx] = -1
        self.rhi[:, idx] = -1

    def land(self, idx: np.ndarray, tid: np.ndarray, issue_loc_id: int) -> None:
        """Asynchronous writes into `idx` land now (their wait): ordinary writes of `tid`."""
        self.pending[idx] = -1
        self.any_pending = bool((self.pending >= 0).any())
        self._set_writer(idx, tid, issue_loc_id, True)

    def _writers_ordered(self, idx, tid) -> np.ndarray:
        """Whether every thread of the last write of each element (all of a one-value write's
        range: any of them may land last) is ordered before thread `tid`'s new write."""
        lo, hi = self.wlo[idx], self.whi[idx]
        out = self.clock.ordered(self.writer[idx], tid, self.wtime[idx])
        multi = (lo >= 0) & (lo != hi)
        if multi.any():
            out[multi] = self.clock.ordered_range(lo[multi], hi[multi], self.wtime[idx][multi], tid[multi])
        return out

    def _set_writer(self, idx, tid, loc_id: int, is_async: bool) -> None:
        self.writer[idx] = tid
        self.wlo[idx] = tid
        self.whi[idx] = tid
        self.wtime[idx] = self.clock.epoch
        self.wloc[idx] = loc_id
        self.wasync[idx] = is_async


def _loc(locs: list, i) -> str:
    i = int(i)
    return str(locs[i]) if 0 <= i < len(locs) and locs[i] is not None else "<unknown>"
