"""Divergent branches that synchronize through mbarriers run concurrently in the emulator.

Threads otherwise run in lock step: an `if` executes its then-side for the lanes that take it,
then its else-side. That is faithful until one side waits on an mbarrier that the other side
arrives at (a producer warpgroup and its consumers written as `if tx < 128: ... else: ...`, or
the role split of `T.ws` regions): on a GPU the warps of each side progress independently, in
lock step the first side would wait forever. So an `if` / `elif` chain whose sides split the
active threads and contain an `MbarrierWait` runs each side as a task (`tasks.TaskGroup`, the
baton-passing scheduler of warp specialization): a task blocks at a wait whose phase is
incomplete and another runs; when none can run, the block is deadlocked and reported.

Each task gets its own copy of the variable environment (loop counters and lets of one side
must not leak into the other while it is blocked); `MbarrierState.wait` restores the task's
environment when it resumes.
"""

from __future__ import annotations

import numpy as np

from ..errors import TileRuntimeError
from ..ir.stmt import IfThenElse, Stmt
from ..ir.thread import MbarrierWait
from ..ir.visit import walk
from .tasks import TaskGroup

_WAITS: dict[int, bool] = {}


def _waits(body: Stmt) -> bool:
    """Whether `body` contains an mbarrier wait (cached per node)."""
    key = id(body)
    if key not in _WAITS:
        _WAITS[key] = any(isinstance(n, MbarrierWait) for n in walk(body))
    return _WAITS[key]


def arms(blk, s: IfThenElse, mask: np.ndarray) -> list | None:
    """The (lanes, body) sides of the `if`/`elif` chain `s` when two or more of them are taken
    by some of the active threads and one of them waits on an mbarrier; else None."""
    out = []
    rest = mask
    node: Stmt | None = s
    while isinstance(node, IfThenElse):
        c = np.broadcast_to(blk.eval(node.cond, rest), (blk.T,))
        out.append((rest & c, node.then_body))
        rest = rest & ~c
        node = node.else_body
    if node is not None:
        out.append((rest, node))
    live = [(m, b) for m, b in out if m.any()]
    if len(live) < 2 or not any(_waits(b) for _, b in live):
        return None
    return live


def run_if_divergent(blk, s: IfThenElse, mask: np.ndarray) -> bool:
    """Run `s` concurrently (its sides as tasks) when `arms` says so; False: run it in lock step."""
    sides = arms(blk, s, mask)
    if sides is None:
        return False
    run_concurrently(blk, sides)
    return True


def run_concurrently(blk, sides: list) -> None:
    """Run each (lanes, body) side as a task until all finish (or one fails / all block)."""
    if blk.tasks is not None:
        raise TileRuntimeError("branches that wait on mbarriers are nested inside other such "
                               "branches (or a warp-specialized region)", blk.loc,
                               hint="split the roles once, at one `if`/`elif` chain on the thread "
                                    "index (or one set of T.ws regions)")
    saved = blk.env
    blk.tasks = TaskGroup()

    def task(lanes, body, env):
        def run():
            blk.env = env
            blk.exec(body, lanes)
        return run

    try:
        blk.tasks.run([task(m, b, dict(saved)) for m, b in sides])
    finally:
        blk.tasks = None
        blk.env = saved
