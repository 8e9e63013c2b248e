"""`T.view(buf, shape=..., dtype=...)` with another dtype: a buffer over another's bytes.

TileLang's `T.view` with a `dtype` reinterprets a buffer's storage: `sparse_mla_bwd.py` reuses
the bytes of a bfloat16 shared tile as a float32 staging tile, dequantization kernels read bytes
as wider integers. `BufferAlias` binds `buffer` (its own shape and dtype, the scope of `base`)
to the bytes of `base` from here on in the block: a write through either is seen by a later
read through the other, bit for bit (the target's byte order, little-endian on every target
tilecore has). The view is no allocation of its own (it is not in the KernelLaunch's
`allocs`); the frontend makes it cover exactly the base's bytes, as TileLang does.

`interp` (a NumPy view of the base array) and `cpu` (the same, in the numba kernel) run it;
the thread lowering (cuda, hip, metal, and the `emu` emulator of them) lays out and allocates
each buffer on its own, so `check_target` refuses it there with the portable rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SourceLoc, TileTargetError
from .buffer import Buffer
from .stmt import Stmt
from .visit import walk

# targets whose backends bind a BufferAlias (tilecore_interp.aliases, tilecore_cpu.codegen)
TARGETS = ("interp", "cpu")


@dataclass(frozen=True)
class BufferAlias(Stmt):
    """`buffer` is the bytes of `base` (same scope), seen with its own shape and dtype."""

    buffer: Buffer
    base: Buffer
    loc: SourceLoc | None = None

    def print_lines(self, printer) -> list[str]:
        """The script line (`tilecore.ir.printer`; the compile cache keys on the script)."""
        b = self.buffer
        return [f"{printer.name(b)} = T.view({printer.name(self.base)}, shape={tuple(b.shape)}, "
                f"dtype=T.{b.dtype.name})"]


def check_target(func, target) -> None:
    """A TileTargetError at the first dtype-changing `T.view` when `target` does not bind one."""
    if target.kind in TARGETS:
        return
    for n in walk(func.body):
        if isinstance(n, BufferAlias):
            b = n.buffer
            raise TileTargetError(
                f"target {target} does not run T.view({n.base.name}, dtype={b.dtype.name}): "
                f"reinterpreting the bytes of {n.base.scope} buffer {n.base.name} "
                f"({n.base.dtype.name}) needs one storage for both, and the thread lowering lays "
                "out and allocates every buffer on its own", n.loc,
                hint=f"allocate {b.name} as its own buffer (T.alloc_{n.base.scope}"
                     f"({tuple(b.shape)}, T.{b.dtype.name})): tilecore's shared-memory planner "
                     "already gives buffers whose live ranges are disjoint the same bytes; or "
                     "run on interp or cpu")
