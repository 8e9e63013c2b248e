"""64-bit element offsets for global buffers that can hold 2^31 elements or more.

Thread IR addresses memory by flat element offsets, built from the user's indices in `int32`
arithmetic. For a tensor of 2^31 elements or more that arithmetic wraps (`row * N + col` past
2^31), and a GPU would read or write the wrong memory without a word. The decision is made per
buffer, from its shape: a constant shape whose element count reaches 2^31, or any symbolic
(`T.dynamic`) dimension, which is assumed large. Such a buffer's offsets are rebuilt in `int64`
(every integer leaf widened before it is combined, so no intermediate product wraps); other
buffers keep the cheaper 32-bit arithmetic. Widening afterwards cannot undo int32 constant
folding (`A[65536, j]` with 32768 columns folds `65536 * 32768` to -2^31), so lowering's
`flat_offset` builds an offset whose constants leave the int32 range in int64 from the start.
TileLang's `tl.config_index_bitwidth` moves the line (`offsets_are_wide`): 64 widens every
global buffer, 32 none (the wrapping arithmetic the emulator then catches).

The change is made on the IR, not in a renderer, so the generated CUDA/HIP/Metal and the
emulator compute the same offsets at the same width: the emulator evaluates `int32` arithmetic
with C's wrapping (`tilecore.semantics`), so an offset that would overflow on the device is a
reported out-of-bounds access there too. Launch-time checks (`tilecore.ir.static_checks.
check_call`) make sure each symbolic size itself fits the dtype it is passed as.
"""

from __future__ import annotations

import dataclasses

from .. import dtypes as dt
from ..ir.buffer import Buffer
from ..ir.expr import BinOp, Cast, Const, Expr, Select, Var, binop, bitwise, cast, const_int
from ..ir.module import Module
from ..ir.stmt import For
from ..ir.thread import AsyncCopy, Atomic, MemLoad, MemStore, OperandRef, ThreadKernel, VecMove
from ..ir.visit import rewrite, walk
from ..target import TargetDesc

#: Element counts from here on need 64-bit offsets.
WIDE_ELEMENTS = 2 ** 31
_BITS = ("shl", "shr", "bitand", "bitor", "bitxor")
_ARITH = ("add", "sub", "mul", "div", "mod", "floordiv", "floormod", "min", "max") + _BITS


def needs_wide_offsets(buf: Buffer) -> bool:
    """Whether offsets into global `buf` may reach 2^31 (symbolic dimensions count as large)."""
    if buf.scope != "global":
        return False
    n = buf.numel
    return n is None or n >= WIDE_ELEMENTS


def offsets_are_wide(buf: Buffer, options) -> bool:
    """Whether lowering computes offsets into `buf` in int64 under `options` (an `Options`):
    `index_bitwidth` 32 (TileLang's `tl.config_index_bitwidth`) never, the int32 arithmetic
    that wraps for tensors of 2^31 elements or more (the emulator then reports such an access
    as out of bounds); 64 for every global buffer; otherwise `needs_wide_offsets`."""
    bits = getattr(options, "index_bitwidth", 0)
    if bits == 32:
        return False
    if bits == 64:
        return buf.scope == "global"
    return needs_wide_offsets(buf)


def widen(e: Expr, small: frozenset = frozenset()) -> Expr:
    """`e` (an integer offset expression) computed in int64 with the same value wherever the
    int32 computation does not overflow. A subexpression whose variables are all in `small`
    (ids of the thread index and constant-range loop counters: tile-sized values) stays in
    int32 and is converted once, so `tx / 16` does not become a 64-bit division."""
    if not isinstance(e, Expr) or not e.dtype.is_int or e.dtype.bits >= 64:
        return e
    if _all_small(e, small):
        return Const(int(e.value), dt.int64) if isinstance(e, Const) else cast(e, dt.int64)
    if isinstance(e, Const):
        return Const(int(e.value), dt.int64)
    if isinstance(e, BinOp) and e.op in _ARITH and e.a.dtype.is_int and e.b.dtype.is_int:
        a, b = widen(e.a, small), widen(e.b, small)
        if e.op in _BITS:
            return bitwise(e.op, a, b)
        return binop(e.op, a, b)
    if isinstance(e, Select):
        return Select(e.cond, widen(e.true_value, small), widen(e.false_value, small), dt.int64)
    if isinstance(e, Cast) and e.value.dtype.is_int and e.value.dtype.bits < 64:
        return widen(e.value, small)
    return cast(e, dt.int64)  # a variable, a load, a lane table: widened where it enters


def _all_small(e: Expr, small: frozenset) -> bool:
    """Whether `e` is built only from constants and `small` variables by arithmetic (no load,
    no block index, no symbolic size)."""
    if isinstance(e, Const):
        return True
    if isinstance(e, Var):
        return id(e) in small
    if isinstance(e, BinOp):
        return _all_small(e.a, small) and _all_small(e.b, small)
    if isinstance(e, Cast):
        return e.value.dtype.is_int and _all_small(e.value, small)
    return False


def _small_vars(tk: ThreadKernel) -> frozenset:
    """ids of the kernel's tile-sized variables: the thread index and counters of loops with
    constant bounds."""
    out = {id(tk.thread_var)}
    for n in walk(tk.body):
        if isinstance(n, For) and const_int(n.start) is not None and const_int(n.stop) is not None:
            out.add(id(n.var))
    return frozenset(out)


def _wide_node(n, small: frozenset, options):
    """The access node with its global offset widened, or None when nothing changes."""
    def wide(buf):
        return offsets_are_wide(buf, options)

    if isinstance(n, (MemLoad, MemStore, Atomic)) and wide(n.buffer):
        w = widen(n.offset, small)
        return None if w is n.offset else dataclasses.replace(n, offset=w)
    if isinstance(n, (VecMove, AsyncCopy)):
        changes = {}
        if wide(n.src):
            changes["src_offset"] = widen(n.src_offset, small)
        if wide(n.dst):
            changes["dst_offset"] = widen(n.dst_offset, small)
        changes = {k: v for k, v in changes.items() if v is not getattr(n, k)}
        return dataclasses.replace(n, **changes) if changes else None
    if isinstance(n, OperandRef) and isinstance(n.buffer, Buffer) and wide(n.buffer):
        w = widen(n.offset, small)
        return None if w is n.offset else dataclasses.replace(n, offset=w)
    return None


def wide_offsets(module: Module, desc: TargetDesc) -> Module:
    """Invariant: every access to a global buffer that may hold 2^31 elements or more computes
    its flat offset in int64 (see the module docstring); other offsets are unchanged.
    `index_bitwidth` (`offsets_are_wide`) changes which buffers count."""
    options = desc.options

    def fn(n):
        if isinstance(n, ThreadKernel):
            if not any(isinstance(m, Buffer) and offsets_are_wide(m, options) for m in walk(n)):
                return n  # no access to widen: the rewrite would change nothing
            small = _small_vars(n)
            return rewrite(n, lambda m: _wide_node(m, small, options))
        return None

    # kernels are found without entering them (each is rewritten once, by fn)
    body = rewrite(module.func.body, fn, stop=(ThreadKernel,))
    return module.with_func(module.func.with_body(body))
