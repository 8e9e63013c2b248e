"""`T.set_max_nreg(count, is_inc)`: a warpgroup's per-thread register budget (PTX `setmaxnreg`).

The node is the same at both IR levels: the tile program holds it where the user wrote it
(typically first in a warp-specialized branch, `if tx < 128: T.set_max_nreg(240, 1)`), and
`lower-threads` keeps it as is on targets with the fact `setmaxnreg` (sm_90a: cuda renders
`setmaxnreg.inc/dec.sync.aligned.u32`, the emulator checks that whole warpgroups execute it).
Elsewhere the `register-budget` pass (tilecore.passes.reg_budget) removes it with a one-time
warning: a register budget changes no value, only how ptxas may allocate.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SourceLoc
from .stmt import Stmt


@dataclass(frozen=True)
class SetMaxNReg(Stmt):
    """The executing warpgroup sets its per-thread register budget to `count` (a multiple of 8
    in 24..256): raised when `inc` (`setmaxnreg.inc`, waiting until the registers are free),
    lowered otherwise (`setmaxnreg.dec`, releasing them). Every thread of a warpgroup that
    executes it must execute it together (`.sync.aligned`)."""

    count: int
    inc: bool
    loc: SourceLoc | None = None

    def __post_init__(self):
        if not 24 <= self.count <= 256 or self.count % 8:
            raise TypeError("setmaxnreg counts are multiples of 8 in 24..256")

    def print_lines(self, p) -> list[str]:
        """The T.* call that re-parses to this node."""
        return [f"T.set_max_nreg({self.count}, {int(self.inc)})"]

    @property
    def ptx(self) -> str:
        """The PTX instruction (sm_90a)."""
        return f"setmaxnreg.{'inc' if self.inc else 'dec'}.sync.aligned.u32 {self.count};"
