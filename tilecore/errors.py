"""User-facing errors: every mistake in a kernel is a `TileError` naming the user's file:line."""

from __future__ import annotations

import linecache
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLoc:
    """A position in the user's source file."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def source_line(self) -> str:
        """The text of the line, stripped, or '' when the file is not readable."""
        return linecache.getline(self.file, self.line).strip()


class TileError(Exception):
    """Base class of every error caused by the user's kernel or call.

    The message reads ``file:line: what is wrong`` followed by the offending source line and,
    where one exists, a hint on how to fix it.
    """

    def __init__(self, message: str, loc: SourceLoc | None = None, hint: str | None = None):
        self.message = message
        self.loc = loc
        self.hint = hint
        super().__init__(message)

    def with_loc(self, loc: SourceLoc | None) -> TileError:
        """Attach `loc` when this error does not carry one yet; returns self for `raise`."""
        if self.loc is None and loc is not None:
            self.loc = loc
        return self

    def __str__(self) -> str:
        parts = []
        head = f"{self.loc}: {self.message}" if self.loc else self.message
        parts.append(head)
        if self.loc is not None:
            text = self.loc.source_line()
            if text:
                parts.append(f"    {text}")
        if self.hint:
            parts.append(f"  hint: {self.hint}")
        return "\n".join(parts)


class TileSyntaxError(TileError):
    """A Python construct the kernel frontend does not support (while, arbitrary calls, ...)."""


class TileNameError(TileError):
    """An unknown name: a T.* attribute, a dtype, or an undefined variable."""


class TileTypeError(TileError):
    """Operand dtypes that do not fit an operation."""


class TileShapeError(TileError):
    """Shapes or extents that do not fit (copy, gemm, reduce, non-constant tile shapes)."""


class TileLayoutError(TileError):
    """A layout that cannot be used: an index map that is not injective, a `T.Fragment` that
    conflicts with what a gemm needs, a shared layout an instruction cannot read."""


class TileBindingError(TileError):
    """`Kernel(...) as (...)` binding the wrong number of names, or a misused variable."""


class TileCallError(TileError):
    """A compiled kernel called with the wrong number, shape or dtype of arguments."""


class TileTargetError(TileError):
    """An unknown target, or one whose backend cannot handle the program."""


class TileRuntimeError(TileError):
    """A fault while running a kernel: an out-of-bounds access, a data race."""


class TileInternalError(Exception):
    """A bug in tilecore itself (never the user's fault)."""


class TileWarning(UserWarning):
    """Base class of tilecore's warnings (the program compiles and is correct)."""


class TilePerformanceWarning(TileWarning):
    """The program runs slower than it could, and why (e.g. a gemm without tensor cores)."""


class TileConfigWarning(TileWarning):
    """A configuration key tilecore knows but does not apply (e.g. a TileLang pass config)."""


_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def caller_loc() -> SourceLoc | None:
    """The innermost stack frame outside tilecore and its backends: where the user called us."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        fname = os.path.abspath(frame.f_code.co_filename)
        internal = fname.startswith(_PKG_DIR) or f"{os.sep}tilecore_" in fname or "pluggy" in fname
        if not internal:
            return SourceLoc(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None
