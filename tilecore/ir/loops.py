"""Loops without a bound: `while cond:` in a kernel (TileLang's `while` over kernel scalars).

Kept apart from `stmt.py` so the node has one home at both IR levels: the tile program holds it
as the user wrote it, and the thread program keeps it with per-thread meaning (the condition is
re-evaluated before every iteration, as in C). On thread-lowered targets a `While` whose body
holds a barrier, a shuffle or a warp-wide instruction needs a condition that is uniform over the
block: lowering checks it where it inserts barriers, and the emulator checks it as it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SourceLoc
from .expr import Expr
from .stmt import Stmt


@dataclass(frozen=True)
class While(Stmt):
    """`while cond: body` — `cond` (bool) is evaluated before each iteration."""

    cond: Expr
    body: Stmt
    loc: SourceLoc | None = None

    def __post_init__(self):
        if not isinstance(self.cond, Expr) or not self.cond.dtype.is_bool:
            raise TypeError("a while condition must be a bool expression")
        if not isinstance(self.body, Stmt):
            raise TypeError("a while body must be a statement")
