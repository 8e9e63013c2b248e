"""Debug statements (`T.print`, `T.device_assert`) and the one definition of their output.

Both IR levels use the same two nodes: the tile IR holds them as the user wrote them, the
lowering keeps them with their arguments rewritten into thread-level loads (guarded so that
one thread, thread 0, runs them in block-level code).

**Output format** (identical on interp, cpu and emu; `format_line`): a `Print` writes one line
to `sys.stdout`: `fmt` with each `{}` replaced by one argument, formatted by its dtype:
integers and bools as decimal integers (`True` is `1`), float64 as C's `%.17g`, every other
float (float32, float16, bfloat16, float8) as `%.9g` of its value (exact for all of them);
NaN prints `nan` and infinities `inf` / `-inf`. `T.print` builds `fmt` as
`[block <bx>, <by>] <msg>: <value>` for a value and `[block ...] <msg>: <name>[<i>, <j>] = <v>`
for each element of a buffer, in row-major order.

**Order**: blocks in the oracle's order (bx fastest, then by, then bz), statements in program
order within a block. interp writes each line when it runs, emu too; cpu records the lines in
a buffer while the kernel runs (blocks one at a time when a kernel prints) and writes them
after it returns, as GPU printf does; a device assertion stops the output at the failing
statement on all three. `TILECORE_INTERP_SEED`'s shuffled block order shuffles the lines.
On GPUs, `printf` lines of one thread appear in its program order; lines of different blocks
may interleave in any order (blocks run concurrently), and the printf buffer (1 MB by default
on CUDA) drops lines past its end; NaN may print as `-nan`.

**Assertions**: `DeviceAssert(cond, msg, block)` fails when `cond` is false for any element
(inside T.Parallel: any lane); interp, cpu and emu raise `TileRuntimeError` naming the user's
line, `T.device_assert failed in block (<bx>, ...): <msg>`; GPUs print that line (with the file
and line) and trap, which aborts the kernel (the error surfaces at the next synchronization).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import SourceLoc
from .expr import Expr
from .stmt import Stmt

PRINT_CAPACITY = 1 << 16  # lines a cpu kernel buffers per call (more are dropped, with a note)


def escape(text: str) -> str:
    """`text` as literal format text (braces doubled)."""
    return text.replace("{", "{{").replace("}", "}}")


def pieces(fmt: str) -> list[str]:
    """The literal pieces around the `{}` placeholders of `fmt` (`{{` / `}}` are braces)."""
    out, cur, i = [], [], 0
    while i < len(fmt):
        two = fmt[i:i + 2]
        if two in ("{{", "}}"):
            cur.append(two[0])
            i += 2
        elif two == "{}":
            out.append("".join(cur))
            cur = []
            i += 2
        else:
            cur.append(fmt[i])
            i += 1
    out.append("".join(cur))
    return out


def format_value(v, dtype) -> str:
    """One value as printed (see the module docstring)."""
    if dtype.is_int or dtype.is_bool:
        return str(int(v))
    f = float(v)
    if np.isnan(f):
        return "nan"
    if dtype.name == "float64":
        return format(f, ".17g")  # the same digits as C printf("%.17g")
    return format(float(np.float32(f)), ".9g")


def format_line(fmt: str, values, dtypes) -> str:
    """`fmt` with its placeholders replaced by `values` (of `dtypes`), formatted."""
    parts = pieces(fmt)
    out = [parts[0]]
    for p, v, d in zip(parts[1:], values, dtypes):
        out.append(format_value(v, d))
        out.append(p)
    return "".join(out)


def c_format(fmt: str, dtypes) -> tuple[str, list[str]]:
    """(printf format, per-argument C conversion: 'll' or 'd') for the GPU renderers: integers
    print through `%lld` of a `long long`, floats through `%.9g` / `%.17g` of a `double`."""
    parts = [p.replace("%", "%%") for p in pieces(fmt)]
    out, conv = [parts[0]], []
    for p, d in zip(parts[1:], dtypes):
        if d.is_int or d.is_bool:
            out.append("%lld")
            conv.append("ll")
        else:
            out.append("%.17g" if d.name == "float64" else "%.9g")
            conv.append("d")
        out.append(p)
    return "".join(out), conv


def assert_text(msg: str, block_values) -> str:
    """The failure message of a device assertion in the given block."""
    return f"T.device_assert failed in block ({', '.join(str(int(b)) for b in block_values)}): {msg}"


def emit(line: str) -> None:
    """Write one printed line to Python's stdout (pytest's capsys captures it)."""
    import sys

    sys.stdout.write(line + "\n")


@dataclass(frozen=True)
class Print(Stmt):
    """`T.print(...)`: write `fmt` with its `{}` placeholders replaced by `args` (one line)."""

    fmt: str
    args: tuple
    loc: SourceLoc | None = None

    def __post_init__(self):
        n = len(pieces(self.fmt)) - 1
        if n != len(self.args) or not all(isinstance(a, Expr) for a in self.args):
            raise TypeError(f"Print format has {n} placeholders for {len(self.args)} expressions")

    def print_lines(self, printer):
        """Tile source for the printer: the format form, which re-parses to this node."""
        args = "".join(f", {printer.expr(a)}" for a in self.args)
        return [f"T.print_format({self.fmt!r}{args})"]


@dataclass(frozen=True)
class DeviceAssert(Stmt):
    """`T.device_assert(cond, msg)`: stop with `msg` when `cond` is false; `block` are the
    launch's block indices (named in the failure message)."""

    cond: Expr
    msg: str
    block: tuple
    loc: SourceLoc | None = None

    def __post_init__(self):
        if not isinstance(self.cond, Expr) or not self.cond.dtype.is_bool:
            raise TypeError("DeviceAssert needs a bool condition")

    def print_lines(self, printer):
        """Tile source for the printer (the block indices come back from the launch). The
        line is printed as a comment: GPU code embeds it in the failure message, so printed IR
        (and a compile-cache key made from it) must differ when only the line does."""
        where = f"  # {self.loc.file}:{self.loc.line}" if self.loc is not None else ""
        return [f"T.device_assert({printer.expr(self.cond)}, {self.msg!r}){where}"]


DEBUG_STMTS = (Print, DeviceAssert)
