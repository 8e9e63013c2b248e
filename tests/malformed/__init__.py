"""The catalogue of malformed kernels and calls that tests/test_errors.py generates its suite from.

Each `Mistake` is the body of a function `case(target)` that builds a kernel, compiles it for
`target` and/or calls it, with the line the error must point to marked `# <- here`. The suite
writes every case into one generated module (so the frontend can read their source), runs each
on every installed CPU-runnable target and on cuda source generation, and checks that it raises
the expected TileError subclass at the marked line, with a hint. Kinds say how much work a case
costs and where it can be detected:

- ``parse``: the frontend refuses it; target-independent, so it is built once and the outcome
  is shared by every target;
- ``compile``: the compiler (static checks, jit arguments) refuses it before any code
  generation: no numba or clang build happens;
- ``call``: the Kernel's call checks refuse the arguments before running; cases share one
  compiled kernel per target (`good(target)`, `inplace(target)`, `scalar(target)` in the
  generated module's preamble);
- ``run``: a fault inside the running kernel; only targets that check it at run time are
  listed in `targets` (races and uninitialized reads: the oracle and the emulator).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The targets a `run` case checks by default: those that execute the program with checks.
CHECKED_RUN = ("interp", "emu", "toy:w4")
#: Where a case that needs a kernel of its own is built: the check it exercises is the core's
#: (Kernel.__call__, the same for every target), so it runs where building costs no numba or
#: clang compile.
CHEAP_BUILD = ("interp", "emu", "cuda", "toy:w4")


@dataclass(frozen=True)
class Mistake:
    """One kind of user mistake: a case body, the error it must raise, and where."""

    name: str
    kind: str
    error: str  # the TileError subclass's name (tilecore.errors)
    body: str
    match: str = ""
    targets: tuple | None = None  # None: every target of the suite
    excludes: tuple = ()  # targets that cannot build the case's kernel at all

    def __post_init__(self):
        if self.kind not in ("parse", "compile", "call", "run"):
            raise ValueError(f"unknown mistake kind {self.kind!r}")
        if "# <- here" not in self.body:
            raise ValueError(f"mistake {self.name} has no `# <- here` marker")


def catalogue() -> list[Mistake]:
    """Every mistake, in a stable order."""
    from . import calls, compile_time, frontend, runtime

    out = frontend.MISTAKES + compile_time.MISTAKES + calls.MISTAKES + runtime.MISTAKES
    names = [m.name for m in out]
    if len(names) != len(set(names)):
        raise ValueError("duplicate mistake names")
    return out


PREAMBLE = '''
import numpy as np

import tilecore
import tilecore.language as T

_KERNELS = {}
n = T.dynamic("n")


def _add():
    @T.prim_func
    def add(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 16), threads=16) as bx:
            for i in T.Parallel(16):
                if bx * 16 + i < n:
                    B[bx * 16 + i] = A[bx * 16 + i] + 1.0
    return add


def _inplace():
    @T.prim_func
    def inc(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                A[i] = A[i] + 1.0
    return inc


def _scalar():
    @T.prim_func
    def shift(A: T.Tensor((16,), "int32"), s: T.int32, B: T.Tensor((16,), "int32")):
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                B[i] = A[i] + s
    return shift


def _cached(name, make, target, out_idx):
    key = (name, target)
    if key not in _KERNELS:
        _KERNELS[key] = tilecore.jit(make(), out_idx=out_idx, target=target)
    return _KERNELS[key]


def good(target):
    """add(A) -> B = A + 1 over a symbolic n: one compiled kernel per target, shared."""
    return _cached("add", _add, target, [-1])


def inplace(target):
    """inc(A): A += 1 in place (16 elements)."""
    return _cached("inc", _inplace, target, None)


def scalar(target):
    """shift(A, s) -> B = A + s with a scalar parameter s: T.int32."""
    return _cached("shift", _scalar, target, [-1])


def f32(*shape):
    return np.zeros(shape, np.float32)
'''
