"""A stand-in backend for the compile-cache tests: target `memo` builds an artifact that adds a
constant to a vector with NumPy and can be stored in and loaded from the compile cache.

It counts builds and loads (in this process), so a test can tell a hit from a miss; a child
process registers it too (`python -c "import cache_backend; cache_backend.main()"`).
"""

from __future__ import annotations

import json
import sys

import numpy as np

import tilecore
import tilecore.language as T
from tilecore import plugins
from tilecore.hookspec import hookimpl
from tilecore.target import TargetInfo

COUNTS = {"build": 0, "load": 0}


class MemoArtifact:
    """B = A + `add`, the float constant of the kernel's body."""

    array_api = "numpy"

    def __init__(self, source: str, add: float):
        self.source = source
        self.add = add

    def run(self, args, dyn):
        args[1][...] = args[0] + self.add

    def cache_entry(self):
        return {"backend": "memo", "add": self.add}, {"source": self.source.encode()}


class MemoBackend:
    """Hooks of the `memo` target."""

    @hookimpl
    def tile_targets(self):
        return [TargetInfo("memo", "compile-cache test backend", priority=-100, archs=("a", "b"),
                           default_arch="a", available=lambda: (False, "test backend"))]

    @hookimpl
    def tile_cache_token(self, target):
        return "memo-toolchain-1" if target.kind == "memo" else None

    @hookimpl
    def tile_build(self, target, module):
        if target.kind != "memo":
            return None
        COUNTS["build"] += 1
        from tilecore.ir.expr import Const
        from tilecore.ir.visit import walk

        add = next(float(n.value) for n in walk(module.func.body)
                   if isinstance(n, Const) and n.dtype.is_float)
        return MemoArtifact(module.func.script(), add)

    @hookimpl
    def tile_artifact_load(self, target, meta, blobs):
        if target.kind != "memo" or meta.get("backend") != "memo":
            return None
        COUNTS["load"] += 1
        return MemoArtifact(blobs["source"].decode(), float(meta["add"]))


MEMO = MemoBackend()


def ensure_registered() -> None:
    """Register the memo backend once per process."""
    if plugins.manager().get_plugin("memo") is None:
        plugins.register(MEMO, name="memo")


def add_const(n: int = 16, c: float = 1.0):
    """B[i] = A[i] + c."""

    @T.prim_func
    def add(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n) as bx:
            for i in T.Parallel(n):
                B[i] = A[i] + c

    return add


def main() -> None:
    """Child process: compile add_const() for memo, run it, print the counts as JSON (and
    whether the lowering package was imported: a hit must not need it)."""
    ensure_registered()
    k = tilecore.compile(add_const(), out_idx=[-1], target="memo")
    out = k(np.arange(16, dtype=np.float32))
    print(json.dumps({**COUNTS, "ok": bool((out == np.arange(16) + 1).all()),
                      "lowering_imported": "tilecore.lower" in sys.modules}))
    sys.stdout.flush()
