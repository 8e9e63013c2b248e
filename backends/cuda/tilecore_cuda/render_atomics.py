"""Vector atomic adds: runs of float32 `Atomic` adds to consecutive global elements as one
`atomicAdd(float2*/float4*)` on sm_90 (a mixin of `CudaRenderer`).

A tile's `T.atomic_add` lowers to one `Atomic` per element; the mma/wgmma accumulator layout
gives each thread pairs of adjacent columns, so FlashAttention's backward issued 32 scalar
`REDG.E.ADD.F32` per thread per query tile for dQ, each warp instruction touching 8 rows in
half-used 32-byte sectors. Hopper adds 2 or 4 float32 at once (`atomicAdd(float2*, float2)`,
`float4`, global memory only, compute capability 9.x): half or a quarter of the instructions
and whole sectors.

A run qualifies when its statements are consecutive in one statement list, all `add` on the
same float32 global buffer under the same predicate (or none), their offsets are the first
one plus 0, 1, ..., and the first offset is a provable multiple of the width (an affine form
whose coefficients and constant are; the tensor's base is aligned as the vectorized loads
already assume). The source keeps the scalar adds for other architectures (`__CUDA_ARCH__`),
so one rendering serves sm_80 and sm_90 builds. Semantics are unchanged: each element is still
added atomically once (the emulator runs the scalar statements).

float16 / bfloat16 pairs (split-K GEMM epilogues adding into a half-precision C) become one
`atomicAdd(__half2*)` (native since sm_60; a scalar `atomicAdd(half*)` is a compare-and-swap
loop) or `atomicAdd(__nv_bfloat162*)` (native on sm_90): each half still rounds once.
"""

from __future__ import annotations

from tilecore.ir.expr import linear
from tilecore.ir.thread import Atomic

# vector widths, the architecture from which the vector add is native, and the C++ pair type
WIDTHS = {"float32": (4, 2), "float16": (2,), "bfloat16": (2,)}
_PAIRS = {"float16": (700, "__half2", "__halves2half2"),
          "bfloat16": (900, "__nv_bfloat162", "__halves2bfloat162")}


def _scalar(s) -> bool:
    return (isinstance(s, Atomic) and s.op == "add" and s.buffer.scope == "global"
            and s.buffer.dtype.name in WIDTHS and s.prev is None and s.order == "relaxed")


def _multiple(e, k: int) -> bool:
    lin = linear(e)
    return lin is not None and lin[1] % k == 0 and all(c % k == 0 for c in lin[0].values())


def atomic_run(stmts: tuple, i: int) -> int:
    """The width (4 or 2) of the vector atomic starting at stmts[i], or 1."""
    first = stmts[i]
    if not _scalar(first):
        return 1
    for width in WIDTHS[first.buffer.dtype.name]:
        run = stmts[i:i + width]
        if len(run) < width or not _multiple(first.offset, width):
            continue
        ok = True
        for k, s in enumerate(run):
            if not _scalar(s) or s.buffer is not first.buffer or s.pred != first.pred:
                ok = False
                break
            lin = linear(s.offset - first.offset) if k else ({}, 0)
            if lin is None or lin[0] or lin[1] != k:
                ok = False
                break
        if ok:
            return width
    return 1


class VectorAtomicRenderMixin:
    """`stmt_SeqStmt` rendering qualifying runs of scalar atomics as one vector atomic."""

    def stmt_SeqStmt(self, s) -> None:
        """Each statement in order; runs of consecutive float32 atomic adds vectorized."""
        i = 0
        while i < len(s.stmts):
            width = atomic_run(s.stmts, i)
            if width == 1:
                self.stmt(s.stmts[i])
            else:
                self.vector_atomic(s.stmts[i:i + width])
            i += width

    def vector_atomic(self, run: tuple) -> None:
        """One `atomicAdd(floatN*)` under `__CUDA_ARCH__ >= 900` (a half-precision pair: from
        the arch where its vector add is native), the scalar adds otherwise."""
        first, n = run[0], len(run)
        values = ", ".join(self.converted(a.value, a.buffer.dtype) for a in run)
        ref = self.ref(first.buffer, first.offset)
        if first.buffer.dtype.name in _PAIRS:
            arch, pair, make = _PAIRS[first.buffer.dtype.name]
            self.emit(f"#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= {arch}")
            self.guarded(first.pred, f"atomicAdd(reinterpret_cast<{pair}*>(&{ref}), {make}({values}));")
            self.emit("#else")
            for a in run:
                self.stmt(a)
            self.emit("#endif")
            return
        self.emit("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900")
        self.guarded(first.pred, f"atomicAdd(reinterpret_cast<float{n}*>(&{ref}), make_float{n}({values}));")
        self.emit("#else")
        for a in run:
            self.stmt(a)
        self.emit("#endif")
