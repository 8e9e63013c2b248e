"""CUDA spellings of Hopper's asynchronous warpgroup tensor-core ops (sm_90a), as inline PTX.

- `IntrinsicCall` of a "wgmma" intrinsic: `wgmma.mma_async.sync.aligned.m64nNkK...` with the
  accumulator as read-write `"+f"` registers, A as a 64-bit matrix descriptor (or four 32-bit
  registers), B as a descriptor, the scale-d predicate (`IntrinsicCall.scale_d`: absent, 1,
  accumulate; a constant 0 or a run-time test such as `k != 0`, set by the lowering on the
  first k step of an accumulator it no longer zeroes with ordinary stores, as a `setp` on an
  extra "r" input), and the transpose immediates of 16-bit types (1 = MN-major).
- a matrix descriptor is built from the operand's `MatrixDesc` (tilecore.ir.intrinsic): bits
  0-13 the start address >> 4 (the only run-time part: the 32-bit shared-window address),
  16-29 the leading byte offset >> 4, 32-45 the stride byte offset >> 4, 49-51 the base offset
  (0: shared buffers are aligned to their swizzle pattern, see `GPURenderer.shared_layout`),
  62-63 the swizzle mode (1: 128B, 2: 64B, 3: 32B).
- `AsyncFence`: `wgmma.fence.sync.aligned` / `fence.proxy.async.shared::cta`;
  `AsyncCommit`/`AsyncWait` of queue "wgmma": `wgmma.commit_group.sync.aligned` /
  `wgmma.wait_group.sync.aligned n` (other queues go to the cp.async spellings).
- register pinning: the compiler sees the accumulator written by the wgmma statement itself,
  not at the wait, and might move ordinary register code across the fences; after
  `wgmma.fence` and after every wgmma wait each register of every wgmma operand array is
  passed through an empty `asm volatile("" : "+f"(r) :: "memory")`, which costs no
  instruction but keeps ordinary reads and writes of them on their side of the fence; which
  arrays each fence/wait pins is `wgmma_pins.wgmma_pin_sets` (only the ones it orders: pinning
  all kept every accumulator live and ptxas serialized FlashAttention's backward).

A mixin of `CudaRenderer`, placed before `AsyncRenderMixin` in its bases.
"""

from __future__ import annotations

from types import SimpleNamespace

from tilecore.errors import TileInternalError
from tilecore.ir.expr import Const, const
from tilecore.ir.intrinsic import MatrixDesc
from tilecore.ir.thread import OperandRef

from .wgmma_pins import wgmma_pin_sets

_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}


def desc_high_bits(d: MatrixDesc) -> int:
    """The descriptor's constant bits: LBO, SBO (both >> 4, 14 bits) and the swizzle mode."""
    lbo, sbo = d.lbo >> 4, d.sbo >> 4
    if lbo >= 1 << 14 or sbo >= 1 << 14:
        raise TileInternalError(f"descriptor offsets {d.lbo}/{d.sbo} bytes do not fit 14 bits")
    return (lbo << 16) | (sbo << 32) | (_SWIZZLE_MODE[d.swizzle] << 62)


class WgmmaRenderMixin:
    """`wgmma_call` (CudaRenderer.stmt_IntrinsicCall sends wgmma here), `stmt_AsyncFence`, and
    the wgmma queue's commit/wait."""

    def wgmma_call(self, s) -> None:
        """An IntrinsicCall of a wgmma intrinsic as one `asm volatile`."""
        intr = s.intrinsic
        d_spec, a_spec, b_spec, _ = intr.operands
        d_ref, a_ref, b_ref, _ = s.operands
        outs = [f'"+f"({w})' for w in self.register_words(d_spec, d_ref)]
        nd = len(outs)
        ins: list[str] = []
        if a_spec.space == "desc":
            ins.append(f'"l"({self.matrix_desc(a_spec.desc, a_ref)})')
            a_text = f"%{nd}"
        else:
            words = self.register_words(a_spec, a_ref)
            ins.extend(f'"r"({w})' for w in words)
            a_text = "{" + ", ".join(f"%{nd + i}" for i in range(len(words))) + "}"
        ins.append(f'"l"({self.matrix_desc(b_spec.desc, b_ref)})')
        b_text = f"%{nd + len(ins) - 1}"
        d_text = "{" + ", ".join(f"%{i}" for i in range(nd)) + "}"
        scale = "1" if s.scale_d is None else self.scale_d_operand(s.scale_d, ins, nd)
        imms = ["p", "1", "1"]  # scale-d (predicate), imm-scale-a, imm-scale-b
        if a_spec.dtype.itemsize == 2:  # transposes exist for 16-bit types only
            if a_spec.space == "desc":
                imms.append("1" if a_spec.desc.major == "MN" else "0")
            imms.append("1" if b_spec.desc.major == "MN" else "0")
        self.emit(f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, {scale}, 0;\\n"')
        self.emit(f'    "{intr.name} {d_text}, {a_text}, {b_text}, {", ".join(imms)};\\n}}\\n"')
        self.emit(f"    : {', '.join(outs)}")
        self.emit(f"    : {', '.join(ins)}")
        self.emit('    : "memory");')

    def scale_d_operand(self, e, ins: list[str], nd: int) -> str:
        """The `setp` source of a wgmma's scale-d: an immediate for a constant, else a 32-bit
        input operand appended to `ins` (numbered after the `nd` outputs)."""
        if isinstance(e, Const):
            return "1" if e.value else "0"
        ins.append(f'"r"((unsigned)({self.expr(e)}))')
        return f"%{nd + len(ins) - 1}"

    def matrix_desc(self, d: MatrixDesc, ref) -> str:
        """The 64-bit descriptor of the matrix starting at `ref` (see the module docstring)."""
        if d is None:
            raise TileInternalError("a wgmma descriptor operand without its MatrixDesc")
        addr = self.shared_operand_address(ref)
        return (f"((unsigned long long)(({addr} & 0x3FFFFu) >> 4) | "
                f"0x{desc_high_bits(d):016x}ull)")

    def stmt_AsyncFence(self, s) -> None:
        """`wgmma.fence.sync.aligned` or `fence.proxy.async.shared::cta`."""
        if s.kind == "wgmma":
            self.pin_wgmma_registers(s)
            self.emit('asm volatile("wgmma.fence.sync.aligned;" ::: "memory");')
            return
        if s.kind != "proxy_async":  # mbarrier_init: render_async.py
            super().stmt_AsyncFence(s)
            return
        self.emit('asm volatile("fence.proxy.async.shared::cta;" ::: "memory");')

    def pin_wgmma_registers(self, stmt) -> None:
        """Empty asm statements reading and writing the registers of the wgmma ops whose
        ordering fence or wait `stmt` provides (see the module docstring), so no ordinary
        access of them moves across it."""
        cache = getattr(self, "_wgmma_regs", None)
        if cache is None or cache[0] is not self.kernel:
            cache = self._wgmma_regs = (self.kernel, *wgmma_pin_sets(self.kernel.body))
        for buf in cache[1].get(id(stmt), cache[2]):
            spec = SimpleNamespace(name=buf.name, dtype=buf.dtype, elems=buf.shape[0], role="out")
            kind = "f" if buf.dtype.name == "float32" else "r"
            for w in self.register_words(spec, OperandRef(buf, const(0))):
                self.emit(f'asm volatile("" : "+{kind}"({w}) :: "memory");')

    def stmt_AsyncCommit(self, s) -> None:
        """`wgmma.commit_group.sync.aligned` for the wgmma queue."""
        if s.queue != "wgmma":
            super().stmt_AsyncCommit(s)
            return
        self.emit('asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");')

    def stmt_AsyncWait(self, s) -> None:
        """`wgmma.wait_group.sync.aligned n` for the wgmma queue; the accumulator registers are
        written underneath, so the compiler must not move their uses above it."""
        if s.queue != "wgmma":
            super().stmt_AsyncWait(s)
            return
        self.emit(f'asm volatile("wgmma.wait_group.sync.aligned {int(s.pending)};" ::: "memory");')
        self.pin_wgmma_registers(s)
