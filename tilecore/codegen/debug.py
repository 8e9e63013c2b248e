"""C spellings of T.print / T.device_assert, shared by every C-style dialect (a mixin of
`CStyleRenderer`): `printf` with the format of `tilecore.ir.debug.c_format`, so a GPU prints
the same text as interp, cpu and emu (integers through `long long`, floats through `double`).
A failed assertion prints `file:line: T.device_assert failed in block (...): msg` and traps.

Dialect hooks: `printf_call(fmt_literal, args)` (default `printf(...)`), `printf_decl()`
(its declaration, emitted once with the helpers; default none), `trap_text()`
(default `__builtin_trap();`; None when the dialect cannot abort a kernel), and
`printf_unsupported()` (None, or why the dialect cannot print). A T.print the dialect cannot
print, or a T.device_assert it can neither print nor trap for, is a TileTargetError naming
the user's line; an assertion without printf traps without its message.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileTargetError
from ..ir.debug import c_format, escape
from ..ir.expr import Cast


def c_string(text: str) -> str:
    """`text` as a C string literal (ASCII; everything else as octal escapes)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.extend(f"\\{b:03o}" for b in ch.encode())
    return '"' + "".join(out) + '"'


class DebugRenderMixin:
    """`stmt_Print` / `stmt_DeviceAssert` for CStyleRenderer subclasses."""

    def printf_unsupported(self) -> str | None:
        """None when the dialect can print, else the reason it cannot."""
        return None

    def printf_call(self, fmt_literal: str, args: list[str]) -> str:
        """A call printing `fmt_literal` (a C string literal) with `args` (long long / double)."""
        return f"printf({', '.join([fmt_literal] + args)})"

    def printf_decl(self) -> str:
        """A declaration of the print function the kernel needs ('' when the headers have one)."""
        return ""

    def trap_text(self) -> str | None:
        """The statement that aborts the kernel after a failed assertion (None: there is none)."""
        return "__builtin_trap();"

    def _printf(self, fmt: str, args, loc) -> str:
        why = self.printf_unsupported()
        if why is not None:
            raise TileTargetError(f"T.print cannot be rendered for this target: {why}", loc,
                                  hint="look at the values on interp, cpu or emu:<arch> instead")
        decl = self.printf_decl()
        if decl:
            self.helpers.setdefault("printf", decl)
        text, conv = c_format(fmt, [a.dtype for a in args])
        codes = []
        for a, c in zip(args, conv):
            if c == "ll":
                codes.append(f"(long long)({self.expr(a)})")
            else:
                v = Cast(a, dt.float32) if a.dtype.is_narrow_float else a
                codes.append(f"(double)({self.expr(v)})")
        return self.printf_call(c_string(text + "\n"), codes)

    def stmt_Print(self, s) -> None:
        """One printf of the line."""
        self.emit(self._printf(s.fmt, s.args, s.loc) + ";")

    def stmt_DeviceAssert(self, s) -> None:
        """`if (!cond) { printf(failure); trap; }`."""
        where = f"{s.loc.file}:{s.loc.line}: " if s.loc is not None else ""
        fmt = (escape(where) + "T.device_assert failed in block (" + ", ".join("{}" for _ in s.block)
               + "): " + escape(s.msg))
        trap, can_print = self.trap_text(), self.printf_unsupported() is None
        if trap is None:
            raise TileTargetError("T.device_assert cannot be rendered for this target: it has no "
                                  "way to abort a kernel", s.loc,
                                  hint="check the condition on interp, cpu or emu:<arch> instead")
        self.emit(f"if (!({self.expr(s.cond)})) {{")
        self.depth += 1
        if can_print:
            self.emit(self._printf(fmt, s.block, s.loc) + ";")
        self.emit(trap)
        self.depth -= 1
        self.emit("}")
