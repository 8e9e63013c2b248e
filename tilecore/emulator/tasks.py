"""Concurrent thread groups in the emulator: the two sides of a `WarpSpecialized` statement.

A producer that fills pipeline stages and consumers that drain them wait on each other through
mbarriers, so neither side can run to its end first. Each side runs as a task on its own Python
thread, but only one task holds the baton at a time (execution stays deterministic and the
block's state needs no locks). A task that reaches an mbarrier wait whose phase has not
completed blocks with a readiness test and passes the baton to the next task that can run;
when no task can run, the block is deadlocked (a GPU hangs) and the blocked task reports it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class _Abort(Exception):
    """Raised in the other tasks once one task failed: they stop where they are."""


class TaskGroup:
    """Runs callables as baton-passing tasks; `block` is how a task waits."""

    def __init__(self):
        self.cv = threading.Condition()
        self.turn = -1
        self.blocked: dict[int, Callable[[], bool]] = {}
        self.done: set[int] = set()
        self.error: BaseException | None = None
        self.count = 0
        self.index: dict[int, int] = {}  # thread ident -> task
        self._deadlock: BaseException | None = None

    def run(self, fns: list) -> None:
        """Run every callable of `fns` to its end (or the first error, re-raised here)."""
        self.count = len(fns)
        threads = [threading.Thread(target=self._task, args=(i, f), daemon=True) for i, f in enumerate(fns)]
        with self.cv:
            self.turn = 0
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.error is not None:
            raise self.error

    def _task(self, i: int, fn) -> None:
        self.index[threading.get_ident()] = i
        with self.cv:
            self.cv.wait_for(lambda: self.turn == i or self.error is not None)
            if self.error is not None:
                return
        try:
            fn()
        except _Abort:
            pass
        except BaseException as e:  # the first failure ends the group
            with self.cv:
                if self.error is None:
                    self.error = e
                self.cv.notify_all()
        with self.cv:
            self.done.add(i)
            if self.error is None:
                nxt = self._next(i)
                if nxt is not None:
                    self.turn = nxt
                elif len(self.done) < self.count:
                    self.error = self._deadlock
            self.cv.notify_all()

    def _next(self, i: int) -> int | None:
        """The next task after `i` (round robin) that can run now."""
        for k in range(1, self.count + 1):
            j = (i + k) % self.count
            if j in self.done:
                continue
            ready = self.blocked.get(j)
            if ready is None or ready():
                return j
        return None

    def block(self, ready: Callable[[], bool], deadlock: Callable[[], BaseException]) -> None:
        """The calling task waits until `ready()`; `deadlock()` is the error when no task can
        make progress any more."""
        i = self.index[threading.get_ident()]
        with self.cv:
            self.blocked[i] = ready
            self._deadlock = deadlock()
            nxt = self._next(i)
            if nxt == i:  # ready after all
                del self.blocked[i]
                return
            if nxt is None:
                self.error = self._deadlock
                self.cv.notify_all()
                raise _Abort()
            self.turn = nxt
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.turn == i or self.error is not None)
            del self.blocked[i]
            if self.error is not None:
                raise _Abort()
