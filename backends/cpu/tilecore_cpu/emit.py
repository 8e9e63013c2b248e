"""Source-building helpers: an indented line buffer, unique Python names for IR objects, and the
table of runtime fault sites the generated code reports through its `err` array."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from tilecore.errors import SourceLoc

# Names the generated module defines or imports; IR names never take them.
_NARROW = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
RESERVED = {
    "np", "math", "njit", "prange", "block", "launch", "launch_serial", "err", "cdiv", "cmod", "fmax",
    "cfloordiv", "cfloormod", "cshl", "cshr",
    "fmin", "oob", "f2i", "exp_f32", "exp2_f32", "range", "min", "max", "abs", "True", "False", "None",
    "load_masked1", "load_masked2", "store_masked1", "store_masked2", "copy1", "copy2", "fill1",
    "fill2", "acc2", *(f"dec2_{n}" for n in _NARROW),
    "int", "float", "bool", *(f"{p}_{n}" for p in ("enc", "dec", "rnd") for n in _NARROW),
    "_blk", "_b", "_g0", "_g1", "_g2",  # the launchers' block loop (the serial one inlines the body)
}


class Lines:
    """An indented list of source lines."""

    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0

    def add(self, text: str) -> None:
        """Append one line at the current indentation."""
        self.lines.append("    " * self.depth + text)

    def indent(self) -> _Indent:
        """`with lines.indent():` emits the enclosed lines one level deeper."""
        return _Indent(self)

    def body(self, emit) -> None:
        """Run `emit()` one level deeper; a block that emitted nothing gets `pass`."""
        n = len(self.lines)
        with self.indent():
            emit()
            if len(self.lines) == n:
                self.add("pass")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class _Indent:
    def __init__(self, lines: Lines):
        self.l = lines

    def __enter__(self):
        self.l.depth += 1

    def __exit__(self, *exc):
        self.l.depth -= 1


class Names:
    """Unique, readable Python identifiers for IR objects compared by identity (Var, Buffer)."""

    def __init__(self):
        self.by_id: dict[int, str] = {}
        self.used: set[str] = set(RESERVED)
        self.keep: list = []  # keeps keyed objects alive so their ids stay unique

    def fresh(self, hint: str) -> str:
        """A new identifier starting with `hint`."""
        base = re.sub(r"\W", "_", hint) or "v"
        if base[0].isdigit() or keyword.iskeyword(base):
            base = "_" + base
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name

    def of(self, obj) -> str:
        """The identifier of `obj` (a Var or Buffer), made on first use."""
        key = id(obj)
        if key not in self.by_id:
            self.by_id[key] = self.fresh(obj.name)
            self.keep.append(obj)
        return self.by_id[key]


@dataclass(frozen=True)
class Fault:
    """One place the generated code may report a fault: what, where, and the indices' meaning."""

    kind: str  # "read", "write", "region", "divzero", "shift", "assert"
    buffer: object  # the Buffer involved (None for division by zero; text for shift / assert)
    loc: SourceLoc | None
    rank: int = 0


class Faults:
    """Fault sites numbered from 1; the kernel writes the number into err[0] on a fault."""

    def __init__(self):
        self.sites: list[Fault] = []

    def add(self, fault: Fault) -> int:
        self.sites.append(fault)
        return len(self.sites)
