"""`T.make_tensor(address, shape, dtype)`: a global tensor at a run-time address.

TileLang kernels take tables of tensor addresses (`T.Tensor([n], T.ptr)`, filled on the host
with `tensor.data_ptr()`) and view the memory at one of them as a tensor
(`grouped_gemm/example_grouped_gemm_fwd_ptr.py`: one table entry per group of a grouped GEMM).
`PointerTensor` binds `buffer` (scope global, static shape, row-major) to the memory at
`address` for the rest of the block; later statements use `buffer` as any global tensor.
Only `interp` runs it (`check_target`); the memory is
the host process's, so the address must be that of a live host tensor of at least the view's
size, as a device pointer must be on the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SourceLoc, TileTargetError
from .buffer import Buffer
from .expr import Expr
from .stmt import Stmt
from .visit import walk


@dataclass(frozen=True)
class PointerTensor(Stmt):
    """`buffer` is the memory at `address` (an int64 value) from here on in this block."""

    buffer: Buffer
    address: Expr
    loc: SourceLoc | None = None

    def print_lines(self, printer) -> list[str]:
        """The script line (`tilecore.ir.printer`; the compile cache keys on the script)."""
        b = self.buffer
        return [f"{printer.name(b)} = T.make_tensor({printer.expr(self.address)}, {tuple(b.shape)}, "
                f"T.{b.dtype.name})"]


def check_target(func, target) -> None:
    """A TileTargetError naming the first `T.make_tensor` when `target` is not `interp`: the
    thread lowering passes every global tensor as a kernel parameter, and no backend takes one
    whose address is computed in the kernel yet."""
    if target.kind == "interp":
        return
    for n in walk(func.body):
        if isinstance(n, PointerTensor):
            raise TileTargetError(f"target {target} does not run T.make_tensor ({n.buffer.name}): "
                                  "only interp views memory at a run-time address", n.loc,
                                  hint="pass the tensors as kernel parameters (one launch per "
                                       "group, or a concatenated tensor and offsets), or run on interp")
