"""The frontend's state while a kernel body is being parsed, shared by the parser and T.* ops."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import SourceLoc, TileSyntaxError
from ..ir.buffer import Buffer
from ..ir.names import fresh_name
from ..ir.stmt import TILE_OPS, Stmt


@dataclass
class KernelFrame:
    """The `with T.Kernel(...)` being parsed: it owns the buffers allocated inside it."""

    allocs: list = field(default_factory=list)
    threads: tuple = (128,)
    annotations: list = field(default_factory=list)  # (key, value) pairs for the KernelLaunch
    block_vars: tuple = ()  # the launch's block indices (T.print / T.device_assert name them)


@dataclass(frozen=True)
class PrivateVar:
    """`T.alloc_var` inside `T.Parallel`: a scalar private to each iteration (TileLang gives each
    thread its own). It is stored in a fragment shaped like the enclosing parallel loops and
    read and written, by plain name, at the iteration's own element (`index`)."""

    buffer: Buffer
    index: tuple


@dataclass
class Builder:
    """Statement lists under construction (one per open block) and the current source line."""

    blocks: list = field(default_factory=list)
    loc: SourceLoc | None = None
    kernel: KernelFrame | None = None
    parallel_depth: int = 0
    names: set = field(default_factory=set)
    pending: str | None = None
    scratch: list = field(default_factory=list)  # T.alloc_global buffers (hidden parameters)
    reduce_scope: object = None  # `with T.attr(T.comm_reducer(...), "reduce_scope")` (allreduce.py)
    let_values: dict = field(default_factory=dict)  # id(let Var) -> (Var, value): proves extents
    parallel_loops: list = field(default_factory=list)  # enclosing T.Parallel (vars, extents)
    reducers: dict = field(default_factory=dict)  # id(T.alloc_reducer buffer) -> op (reducers.py)

    def pending_name(self) -> str | None:
        """The name the statement being parsed assigns to (used to name allocated buffers)."""
        return self.pending

    def emit(self, stmt: Stmt) -> None:
        """Append a statement to the innermost open block."""
        if not self.blocks or self.kernel is None:
            raise TileSyntaxError("tile operations must appear inside `with T.Kernel(...)`", self.loc,
                                  hint="indent the statement into the `with T.Kernel(...)` block")
        if self.parallel_depth and isinstance(stmt, TILE_OPS):
            raise TileSyntaxError(
                f"T.{type(stmt).__name__.lower()} cannot be used inside T.Parallel", self.loc,
                hint="tile operations act on whole tiles; call them outside the parallel loop",
            )
        self.blocks[-1].append(stmt)

    def unique_name(self, base: str) -> str:
        """A buffer/variable name not used yet in this kernel (printed IR stays unambiguous)."""
        return fresh_name(base, self.names)

    def allocate(self, buf: Buffer) -> Buffer:
        """Register a shared/fragment/local buffer with the enclosing kernel."""
        if self.kernel is None:
            raise TileSyntaxError(
                f"T.alloc_* for {buf.name} outside `with T.Kernel(...)`", self.loc,
                hint="allocate shared/fragment/local buffers inside the kernel body",
            )
        if self.parallel_depth:
            raise TileSyntaxError("cannot allocate a buffer inside T.Parallel", self.loc,
                                  hint="allocate it before the T.Parallel loop")
        self.kernel.allocs.append(buf)
        return buf


_STACK: list[Builder] = []


def current() -> Builder:
    """The builder of the kernel being parsed; T.* tile ops outside a kernel are an error."""
    if not _STACK:
        raise TileSyntaxError(
            "T.* tile operations can only be used inside a @T.prim_func kernel body",
            hint="decorate the function with @T.prim_func",
        )
    return _STACK[-1]


def push(b: Builder) -> None:
    _STACK.append(b)


def pop() -> None:
    _STACK.pop()


def builtin(fn):
    """Mark `fn` as callable from kernel code (anything else called there is an error)."""
    fn.__tile_builtin__ = True
    return fn
