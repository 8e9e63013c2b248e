"""Warpgroup turns (tilecore.ir.thread.WarpgroupTurn, FlashAttention-3's scheduler barrier)
in the emulator.

The turns order no memory and the emulator runs the consumer warpgroups in lock step, so a
wait cannot be checked against the pass it waits for at the moment it runs (warpgroup 1's
wait in iteration k precedes warpgroup 0's pass of that iteration here, not on a GPU). What
can hang a GPU is a count mismatch: a hardware barrier completes only when 128 threads sync
and 128 arrive, so every barrier must get exactly as many passes as waits over the kernel
(a warpgroup that runs one iteration fewer, a missing first turn or closing wait). The
emulator counts both per barrier and warp-specialized region and reports any difference,
and reports a turn executed by part of a warpgroup or outside a warp-specialized consumer.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..errors import SourceLoc, TileRuntimeError
from ..ir.thread import WarpgroupTurn

WARPGROUP = 128


class TurnCounts:
    """Passes and waits per hardware barrier id of one warp-specialized region."""

    def __init__(self, split: int):
        self.split = split
        self.waits: Counter = Counter()
        self.passes: Counter = Counter()

    def execute(self, s: WarpgroupTurn, mask: np.ndarray, loc: SourceLoc | None) -> None:
        """Count the turn for each warpgroup of `mask` that executes it (all, or `s.only`)."""
        if self.split != WARPGROUP * s.groups:
            raise TileRuntimeError(f"warpgroup turns among {s.groups} warpgroups in a consumer of "
                                   f"{self.split} threads", loc,
                                   hint="a lowering placed turns for the wrong consumer: report it")
        rows = mask[:self.split].reshape(s.groups, WARPGROUP)
        if np.any(mask[self.split:]) or not np.all(rows.all(axis=1) | ~rows.any(axis=1)):
            raise TileRuntimeError("a warpgroup turn executed by part of a warpgroup or by the producer",
                                   loc, hint="keep turns outside branches on thread-varying values")
        for g in np.nonzero(rows.all(axis=1))[0]:
            if s.only >= 0 and g != s.only:
                continue
            if s.kind == "wait":
                self.waits[s.base_id + int(g)] += 1
            else:
                self.passes[s.base_id + (int(g) + 1) % s.groups] += 1

    def check(self, loc: SourceLoc | None) -> None:
        """Every barrier got as many passes as waits (else a GPU hangs at it)."""
        for bar in sorted(set(self.waits) | set(self.passes)):
            if self.waits[bar] != self.passes[bar]:
                raise TileRuntimeError(f"warpgroup turn barrier {bar}: {self.waits[bar]} waits but "
                                       f"{self.passes[bar]} passes (a GPU would hang)", loc,
                                       hint="every warpgroup must take the same number of turns")


def no_region(loc: SourceLoc | None) -> TileRuntimeError:
    """The error for a turn outside a warp-specialized consumer."""
    return TileRuntimeError("a warpgroup turn outside a warp-specialized kernel's consumer", loc,
                            hint="a lowering placed it: report it")
