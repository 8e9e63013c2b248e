"""A generated conformance case: kernel source text plus what the runner needs to feed and judge it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

KERNEL_NAME = "main"


@dataclass(frozen=True)
class Param:
    """One kernel parameter. Every parameter is filled before the call from the inputs' seed
    (values in offset + [-bound, bound], multiples of 2**-frac; frac >= values.INEXACT_FRAC means any
    value of the dtype); outputs are written (or accumulated into) by the kernel."""

    name: str
    shape: tuple
    dtype: str
    bound: float
    frac: int
    is_output: bool = False
    exact: bool = True  # outputs: every element is computed bit for bit by a conforming target
    scale: float = 1.0  # outputs: magnitude bound of the values that produced them
    dyn: tuple = ()  # (dim index, symbolic name) for T.dynamic dimensions
    offset: float = 0.0  # inputs: the centre of the value range (regression cases use it)


@dataclass(frozen=True)
class Case:
    """A kernel as source text (a module defining `@T.prim_func def main`) and its parameters."""

    source: str
    params: tuple
    features: tuple = field(default=())

    @property
    def key(self) -> str:
        """A content hash naming the case's files and caching its compiled kernels."""
        return hashlib.sha1(self.source.encode()).hexdigest()[:12]

    @property
    def exact(self) -> bool:
        """Whether every output must match the oracle bit for bit."""
        return all(p.exact for p in self.params if p.is_output)

    @property
    def lines(self) -> int:
        """Lines of the kernel function (the measure of a program's size)."""
        return len(kernel_lines(self.source))


def kernel_lines(source: str) -> list[str]:
    """The non-blank lines from `@T.prim_func` to the end of the kernel function."""
    lines = source.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("@T.prim_func")), 0)
    out = []
    for ln in lines[start:]:
        if out and ln and not ln.startswith((" ", "@", "def")):
            break
        if ln.strip():
            out.append(ln)
    return out


class Writer:
    """Builds indented kernel source and hands out fresh names."""

    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0
        self.used: dict[str, int] = {}

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def fresh(self, base: str) -> str:
        n = self.used.get(base, 0)
        self.used[base] = n + 1
        return base if n == 0 else f"{base}{n}"

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
