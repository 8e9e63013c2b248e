"""Reducer buffers (TileLang's `T.alloc_reducer` / `T.finalize_reducer`).

A reducer is a fragment buffer whose elements accumulate contributions from many iterations of
a `T.Parallel` loop (`r[i] += a[i, j]` over `(i, j)`, which would be a write-write race on an
ordinary fragment). `ReducerUpdate` is one such contribution: the element becomes
`op(element, value)` for `op` in sum/max/min, and all iterations' contributions are combined
(in some order: sums of floats may round differently from a sequential loop, as on a GPU).
`FinalizeReducer` marks the point after which the reducer holds its final values; between the
first update and it, the reducer may be neither read nor written otherwise (on a GPU the
values are per-thread partials then), which `check` enforces.

The values are those of the *logical* reduction: `init op c_1 op c_2 ...` per element, where
`init` is what `T.fill` / `T.clear` stored (TileLang asks for 0 for sum, a clamp value for
max/min). `interp` (the oracle) and `cpu` run reducers as they are; on the thread-lowered
targets (cuda, hip, metal, emu) the `reducer-partials` pass (`tilecore.lower.reducers`) turns
them into per-iteration partial fragments reduced at the finalize; other targets (tvm) raise
a located TileTargetError naming the fix (`check`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SourceLoc, TileSyntaxError, TileTargetError
from .buffer import Buffer
from .expr import Expr
from .loops import While
from .stmt import For, IfThenElse, KernelLaunch, SeqStmt, Stmt
from .visit import walk

OPS = ("sum", "max", "min")
# the binary operation (tilecore.ir.expr.binop name) each reducer op combines with
BINOP = {"sum": "add", "max": "max", "min": "min"}
# targets whose lowering runs ReducerUpdate (interp: the oracle; cpu: blocks run their
# T.Parallel iterations in sequence, so an update is a read-modify-write)
TARGETS = ("interp", "cpu")


@dataclass(frozen=True)
class ReducerUpdate(Stmt):
    """`buffer[indices] = op(buffer[indices], value)`, combined over every iteration that runs it."""

    buffer: Buffer
    indices: tuple
    value: Expr
    op: str
    loc: SourceLoc | None = None

    def print_lines(self, p) -> list[str]:
        """The script line (`tilecore.ir.printer`; the compile cache keys on the script)."""
        idx = ", ".join(p.expr(i) for i in self.indices)
        return [f"T.reducer_update({p.name(self.buffer)}[{idx}], {p.expr(self.value)}, "
                f"op={self.op!r})"]


@dataclass(frozen=True)
class FinalizeReducer(Stmt):
    """`T.finalize_reducer(buffer)`: the reducer's contributions are complete from here on."""

    buffer: Buffer
    op: str
    loc: SourceLoc | None = None

    def print_lines(self, p) -> list[str]:
        """The script line (`tilecore.ir.printer`)."""
        return [f"T.finalize_reducer({p.name(self.buffer)})  # op={self.op!r}"]


def check(func, target, lowers_to_threads=lambda: False) -> None:
    """Raise when a reducer is used between an update and its `T.finalize_reducer` (a
    TileSyntaxError at that statement), or when `target` does not run reducers (a
    TileTargetError at the first update). `lowers_to_threads()` says whether the target's
    facts lower to threads (where the reducer-partials pass runs); asked only when the kernel
    has reducers."""
    updates = [n for n in walk(func.body) if isinstance(n, ReducerUpdate)]
    if not updates:
        return
    _Order().stmt(func.body)
    if target.kind not in TARGETS and not lowers_to_threads():
        u = updates[0]
        raise TileTargetError(
            f"target {target} does not run T.alloc_reducer ({u.buffer.name}): its contributions "
            "from many T.Parallel iterations need a per-thread-replica lowering that "
            f"{target.kind} does not have", u.loc,
            hint="run on interp or cpu, or accumulate explicitly: store each iteration's value "
                 "into a fragment shaped like the T.Parallel loop, then T.reduce_sum / "
                 "T.reduce_max it into the result")


class _Order:
    """Walks statements in program order (loop bodies twice: a later iteration follows an
    earlier one's updates) tracking which reducers are open (updated, not yet finalized)."""

    def __init__(self):
        self.open: dict[int, Buffer] = {}

    def stmt(self, s) -> None:
        """Visit `s`: recurse into structured statements, check every other one."""
        if isinstance(s, SeqStmt):
            for t in s.stmts:
                self.stmt(t)
        elif isinstance(s, KernelLaunch):
            self.stmt(s.body)
        elif isinstance(s, (For, While)):
            self.stmt(s.body)
            self.stmt(s.body)
        elif isinstance(s, IfThenElse):
            self.stmt(s.then_body)
            if s.else_body is not None:
                self.stmt(s.else_body)
        elif isinstance(s, ReducerUpdate):
            self.open[id(s.buffer)] = s.buffer
        elif isinstance(s, FinalizeReducer):
            self.open.pop(id(s.buffer), None)
        elif self.open:
            for n in walk(s):
                if isinstance(n, Buffer) and id(n) in self.open:
                    raise TileSyntaxError(
                        f"reducer {n.name} is used before T.finalize_reducer({n.name}): until "
                        "then it holds per-thread partial results", getattr(s, "loc", None),
                        hint=f"call T.finalize_reducer({n.name}) after the last update and "
                             "before reading, copying or refilling it")
