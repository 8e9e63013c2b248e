"""`T.set_max_nreg(count, is_inc)`: a warpgroup's per-thread register budget (PTX `setmaxnreg`).

The node is the same at both IR levels: the tile program holds it where the user wrote it
(typically first in a warp-specialized branch, `if tx < 128: T.set_max_nreg(240, 1)`), and
`lower-threads` keeps it as is on targets with the fact `setmaxnreg` (sm_90a: cuda renders
`setmaxnreg.inc/dec.sync.aligned.u32`, the emulator checks that whole warpgroups execute it).
Elsewhere the `register-budget` pass (tilecore.passes.reg_budget) removes it with a one-time
warning: a register budget changes no value, only how ptxas may allocate.

`RegAllocHint` is TileLang's per-kernel form (`T.annotate_producer_reg_dealloc`,
`T.annotate_consumer_reg_alloc`, `T.no_set_max_nreg`): not a statement that executes, but the
counts (or the absence) of the setmaxnreg that tilecore's own warp specialization emits.
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


_CALLS = {"producer": "T.annotate_producer_reg_dealloc", "consumer": "T.annotate_consumer_reg_alloc"}


@dataclass(frozen=True)
class RegAllocHint(Stmt):
    """One of TileLang's register hints for the automatic warp specialization, where the user
    wrote it (tile IR only: the `register-hints` pass, tilecore.passes.reg_budget, collects
    them into the function's attr "reg_alloc" before any lowering):

    - kind "producer" (`T.annotate_producer_reg_dealloc(count)`): the producer warpgroup's
      budget (`setmaxnreg.dec` to `count`);
    - kind "consumer" (`T.annotate_consumer_reg_alloc(count)`): the consumer warpgroups' budget
      (`setmaxnreg.inc` to `count`);
    - kind "off" (`T.no_set_max_nreg()` / `T.disable_warp_group_reg_alloc()`, the spelling kept
      in `call`): no setmaxnreg in this kernel's warp specialization."""

    kind: str
    count: int = 0
    call: str = ""
    loc: SourceLoc | None = None

    def __post_init__(self):
        if self.kind not in ("producer", "consumer", "off"):
            raise TypeError(f"RegAllocHint.kind is producer, consumer or off, got {self.kind!r}")
        if self.kind != "off" and (not 24 <= self.count <= 256 or self.count % 8):
            raise TypeError("setmaxnreg counts are multiples of 8 in 24..256")

    @property
    def text(self) -> str:
        """The T.* call as the user wrote it (messages, the printer)."""
        if self.kind == "off":
            return f"{self.call or 'T.no_set_max_nreg'}()"
        return f"{_CALLS[self.kind]}({self.count})"

    def print_lines(self, p) -> list[str]:
        """The T.* call that re-parses to this node."""
        return [self.text]


@dataclass(frozen=True)
class RegHints:
    """A kernel's register hints (PrimFunc attr "reg_alloc", set by the `register-hints` pass on
    targets with setmaxnreg): what the warp specialization (tilecore.lower.warp_specialize
    .register_split) reads. Each field is the hint that decided it, or None."""

    producer: RegAllocHint | None = None
    consumer: RegAllocHint | None = None
    off: RegAllocHint | None = None

    @property
    def given(self) -> tuple[RegAllocHint, ...]:
        """The hints, in producer, consumer, off order."""
        return tuple(h for h in (self.producer, self.consumer, self.off) if h is not None)
