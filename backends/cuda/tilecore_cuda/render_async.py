"""CUDA spellings of the asynchronous memory model's nodes (docs/architecture.md): cp.async
copies, group commit and wait, and named / warpgroup barriers, as inline PTX.

A mixin of `CudaRenderer` (it uses the C-style base's `expr`, `ref`, `name_of` and `emit`).
"""

from __future__ import annotations

from tilecore.errors import TileInternalError
from tilecore.ir.thread import OperandRef


class AsyncRenderMixin:
    """`stmt_AsyncCopy`, `stmt_AsyncCommit`, `stmt_AsyncWait` and scoped `stmt_Barrier`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reserve("tc_in")  # the predicate temporary of a zero-filling copy

    def stmt_AsyncCopy(self, s) -> None:
        """`cp.async.{cg,ca}.shared.global [dst], [src], size[, src-size]`.

        16-byte copies bypass L1 (`.cg`, only that size allows it); 4/8-byte ones use `.ca`.
        With a predicate and zero fill, src-size is 0 when it is false (nothing is read, the
        destination is zeroed) and the source address falls back to the tensor's base so no
        out-of-range address is ever formed; without zero fill the copy is skipped."""
        nbytes = s.lanes * s.src.dtype.itemsize
        if s.queue != "cp.async" or s.completion != "group":
            raise TileInternalError(f"CUDA renders cp.async group copies only, not {s.completion}")
        cache = "cg" if nbytes == 16 else "ca"
        # the 32-bit shared-window address (one base per kernel; see shared_operand_address)
        dst = f'"r"({self.shared_operand_address(OperandRef(s.dst, s.dst_offset))})'
        src = f"&{self.ref(s.src, s.src_offset)}"
        if s.pred is None or not s.zero_fill:
            line = (f'asm volatile("cp.async.{cache}.shared.global [%0], [%1], {nbytes};" '
                    f':: {dst}, "l"({src}));')
            self.guarded(s.pred, line)
            return
        pred = self.expr(s.pred)
        self.emit("{")
        self.emit(f"  const bool tc_in = {pred};")
        self.emit(f'  asm volatile("cp.async.{cache}.shared.global [%0], [%1], {nbytes}, %2;" '
                  f':: {dst}, "l"(tc_in ? {src} : {self.name_of(s.src)}), "r"(tc_in ? {nbytes} : 0));')
        self.emit("}")

    def stmt_AsyncCommit(self, s) -> None:
        """`cp.async.commit_group`."""
        self.emit('asm volatile("cp.async.commit_group;" ::: "memory");')

    def stmt_AsyncWait(self, s) -> None:
        """`cp.async.wait_group n`; a memory clobber, since shared memory changes underneath."""
        self.emit(f'asm volatile("cp.async.wait_group {int(s.pending)};" ::: "memory");')

    def stmt_Barrier(self, s) -> None:
        """Block barriers as the base does; `bar.sync id, count` for named and warpgroup ones."""
        if s.scope == "block":
            super().stmt_Barrier(s)
            return
        why = f"  // {s.reason}" if s.reason else ""
        if s.scope == "named":
            self.emit(f'asm volatile("bar.sync {s.barrier_id}, {s.count};" ::: "memory");{why}')
            return
        size = 4 * self.kernel.warp_size if self.kernel is not None else 128
        self.emit(f'asm volatile("bar.sync %0, {size};" :: "r"({s.barrier_id} + (int)threadIdx.x / {size})'
                  f' : "memory");{why}')
