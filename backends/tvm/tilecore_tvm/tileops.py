"""Tile operations (copy, fill, tile atomic add, gemm, reductions, cumsum) as TIR loops with the
oracle's semantics: global elements outside the tensor read as 0 and writes to them are dropped
(partial tiles); gemm, reductions and cumsum accumulate in `semantics`' accumulator dtypes and
round once into the destination. Each op is emitted by `emit` inside `Lowerer.distributed`, so
on a GPU its element space (`Lowerer.elements`) is split over the block's threads.
"""

from __future__ import annotations

from tvm import tirx as tir
from tvm.script.ir_builder import tirx as T

from tilecore import dtypes as dt
from tilecore import semantics as S
from tilecore.ir.buffer import Region
from tilecore.ir.stmt import AtomicAddRegion, Copy, CumSum, Fill, Gemm, Reduce

from .caps import Unsupported
from .dtypes import compute, storage
from .exprs import (
    as_i32,
    c,
    convert,
    from_storage,
    nan_max,
    nan_min,
    round_to,
    share,
    to_storage,
    ty,
    wrap_arith,
)

TILE_OPS = (Copy, Fill, AtomicAddRegion, Gemm, Reduce, CumSum)


def _int(lw, op: str, a, b, t: str):
    """Wrapping integer `a op b` in TIR dtype `t` (`exprs.wrap_arith`)."""
    return wrap_arith(op, a, b, t, lw.caps.has_64bit)


def emit(lw, s) -> None:
    """Emit tile operation `s` through lowerer `lw` (a `lower.Lowerer`)."""
    {Copy: _copy, Fill: _fill, AtomicAddRegion: _atomic_region, Gemm: _gemm, Reduce: _reduce,
     CumSum: _cumsum}[type(s)](lw, s)


# ---------------------------------------------------------------------- regions


class _Ref:
    """One region of a region op: the TIR buffer, start expressions and, per element, indices."""

    def __init__(self, lw, r: Region):
        self.r = r
        self.lw = lw
        self.private = id(r.buffer) in lw.x.private
        self.buf = lw.x.private[id(r.buffer)] if self.private else lw.x.buffer(r.buffer)
        self.starts = []
        for e in r.starts:
            v = lw.x(e, index=True)
            self.starts.append(v if isinstance(v, (tir.IntImm, tir.Var)) else T.bind(v))
        self.is_global = r.buffer.scope == "global"

    def index(self, idx) -> list:
        """Buffer indices of the element at squeezed position `idx`."""
        if self.private:
            return [self.lw.x.it]
        it = iter(idx)
        out = []
        for st, n in zip(self.starts, self.r.extents):
            out.append(st if n == 1 else (st + next(it)))
        return [as_i32(i) for i in out]

    def inside(self, ix):
        """The condition that indices `ix` lie inside the (global) tensor, or None."""
        if not self.is_global:
            return None
        cond = None
        for d, i in enumerate(ix):
            n = self.buf.shape[d]
            term = tir.And(i >= c(0, "int32"), i < n)
            cond = term if cond is None else tir.And(cond, term)
        return cond

    def load(self, ix):
        """The stored element at `ix` in compute form, 0 outside a global tensor."""
        d = self.r.buffer.dtype
        raw = tir.BufferLoad(self.buf, ix)
        ok = self.inside(ix)
        if ok is not None:  # guard the raw load (decoding a float8 binds its operand)
            raw = tir.if_then_else(ok, raw, tir.const(0, ty(raw)))
        return from_storage(raw, d)

    def store(self, ix, value) -> None:
        """Store a compute value (of the buffer's dtype) at `ix`, dropped outside the tensor."""
        ok = self.inside(ix)
        st = lambda: T.buffer_store(self.buf, to_storage(value, self.r.buffer.dtype), ix)  # noqa: E731
        if ok is None:
            st()
            return
        with T.If(ok):
            with T.Then():
                st()


def _copy(lw, s: Copy) -> None:
    sd, dd = s.src.buffer.dtype, s.dst.buffer.dtype
    if s.src.buffer is s.dst.buffer:
        if lw.caps.gpu:
            raise Unsupported("a T.copy between overlapping regions of one buffer is not lowered "
                              "for GPU targets")
        # regions of one buffer may overlap: read all of the source first, as interp does
        tmp = T.alloc_buffer(list(s.src.extents), storage(sd), scope="local")
        src = _Ref(lw, s.src)
        shape = s.src.squeezed_shape

        def save(idx):
            full, it = [], iter(idx)
            for n in s.src.extents:
                full.append(c(0, "int32") if n == 1 else next(it))
            T.buffer_store(tmp, to_storage(src.load(src.index(idx)), sd), full)

        lw.elements(shape, save)
        dst = _Ref(lw, s.dst)

        def put(idx):
            full, it = [], iter(idx)
            for n in s.src.extents:
                full.append(c(0, "int32") if n == 1 else next(it))
            v = from_storage(tir.BufferLoad(tmp, full), sd)
            dst.store(dst.index(idx), convert(v, sd, dd, lw.caps))

        lw.elements(shape, put)
        return
    src, dst = _Ref(lw, s.src), _Ref(lw, s.dst)

    def elem(idx):
        v = src.load(src.index(idx))
        dst.store(dst.index(idx), convert(v, sd, dd, lw.caps))

    lw.elements(s.src.squeezed_shape or (1,), lambda idx: elem(idx if s.src.squeezed_shape else []))


def _fill(lw, s: Fill) -> None:
    d = s.dst.buffer.dtype
    value = T.bind(convert(lw.x(s.value), s.value.dtype, d, lw.caps))
    dst = _Ref(lw, s.dst)
    shape = s.dst.squeezed_shape
    lw.elements(shape or (1,), lambda idx: dst.store(dst.index(idx if shape else []), value))


def _compute_as(x, src, dst, caps):
    """A compute value of `src` in `dst`'s compute type without rounding to `dst`."""
    if dst.is_float and src.is_float:
        return tir.Cast(compute(dst) if dst.bits == 64 else "float32", x)
    return convert(x, src, dst, caps)


def _atomic_region(lw, s: AtomicAddRegion) -> None:
    if lw.caps.gpu and s.dst.buffer.scope == "global":
        raise Unsupported(f"T.atomic_add into global memory is not lowered for tvm:{lw.caps.kind}")
    sd, dd = s.src.buffer.dtype, s.dst.buffer.dtype
    dst, src = _Ref(lw, s.dst), _Ref(lw, s.src)

    def elem(idx):
        v = _compute_as(src.load(src.index(idx)), sd, dd, lw.caps)
        ix = dst.index(idx)
        cur = from_storage(tir.BufferLoad(dst.buf, ix), dd)
        new = _int(lw, "add", cur, v, ty(cur)) if dd.is_int else round_to(cur + v, dd)
        dst.store(ix, new)

    lw.elements(s.dst.squeezed_shape or (1,), lambda idx: elem(idx if s.dst.squeezed_shape else []))


# ---------------------------------------------------------------------- gemm


def _acc_dtype(lw, d):
    """The accumulator dtype for `d`'s reductions (`semantics.accumulator_dtype`); without 64-bit
    types an integer accumulator is the 32-bit integer of `d`'s signedness, which gives the same
    sums modulo 2**32 and the same maxima and minima (and keeps uint32 values >= 2**31 positive)."""
    acc = S.accumulator_dtype(d)
    if not lw.caps.has_64bit and acc.bits == 64:
        if acc.is_float:
            raise Unsupported(f"tvm:{lw.caps.kind} has no float64 accumulator")
        return dt.uint32 if d.kind == "uint" else dt.int32
    return acc


def _operand(lw, r: Region, transpose: bool):
    """A function (row, col) -> element of op(r) in compute form."""
    ref = _Ref(lw, r)
    lead = len(r.extents) - 2

    def get(i, j):
        if transpose:
            i, j = j, i
        ix = list(ref.starts[:lead]) + [ref.starts[lead] + i, ref.starts[lead + 1] + j]
        return ref.load([as_i32(x) for x in ix])

    return get, ref


def _gemm(lw, s: Gemm) -> None:
    da, dc = s.a.buffer.dtype, s.c.buffer.dtype
    m, n, k = s.mnk
    acc = _acc_dtype(lw, dc)
    at = compute(acc)
    ga, _ = _operand(lw, s.a, s.transpose_a)
    gb, _ = _operand(lw, s.b, s.transpose_b)
    cref = _Ref(lw, s.c)
    lead = len(s.c.extents) - 2

    def cix(i, j):
        if cref.private:
            return [lw.x.it]
        return list(cref.starts[:lead]) + [cref.starts[lead] + i, cref.starts[lead + 1] + j]

    def term(i, kk, j):
        a = convert(ga(i, kk), da, acc, lw.caps) if da.is_int else tir.Cast(at, ga(i, kk))
        b = convert(gb(kk, j), s.b.buffer.dtype, acc, lw.caps) if da.is_int else tir.Cast(at, gb(kk, j))
        return a, b

    def finish(cur_acc, i, j):
        ix = cix(i, j)
        if s.clear_accum:
            total = cur_acc
        else:
            cur = convert(from_storage(tir.BufferLoad(cref.buf, ix), dc), dc, acc, lw.caps)
            total = _int(lw, "add", cur, cur_acc, at) if acc.is_int else cur + cur_acc
        T.buffer_store(cref.buf, to_storage(convert(total, acc, dc, lw.caps), dc), ix)

    if not lw.caps.gpu:
        # a block-private accumulator tile, k outside j: the j loop runs along rows of B and C
        # (vectorizable); each C element still sums its products in k order, as the GPU form does
        tile = T.alloc_buffer([m, n], at, scope="local")
        with T.serial(0, m) as i:
            with T.serial(0, n) as j:
                T.buffer_store(tile, c(0, at), [i, j])
            with T.serial(0, k) as kk:
                with T.serial(0, n) as j:
                    a, b = term(i, kk, j)
                    prod = _int(lw, "mul", a, b, at) if acc.is_int else a * b
                    cur = tir.BufferLoad(tile, [i, j])
                    new = _int(lw, "add", cur, prod, at) if acc.is_int else cur + prod
                    T.buffer_store(tile, new, [i, j])
            with T.serial(0, n) as j:
                finish(tir.BufferLoad(tile, [i, j]), i, j)
        return

    def elem(idx):
        i, j = idx
        cell = T.alloc_buffer([1], at, scope="local")
        T.buffer_store(cell, c(0, at), [0])
        with T.serial(0, k) as kk:
            a, b = term(i, kk, j)
            prod = _int(lw, "mul", a, b, at) if acc.is_int else a * b
            cur = tir.BufferLoad(cell, [0])
            new = _int(lw, "add", cur, prod, at) if acc.is_int else cur + prod
            T.buffer_store(cell, new, [0])
        finish(tir.BufferLoad(cell, [0]), i, j)

    lw.elements([m, n], elem)


# ---------------------------------------------------------------------- reductions and scans


_BIT_OPS = {"bitand": tir.bitwise_and, "bitor": tir.bitwise_or, "bitxor": tir.bitwise_xor}


def _reduce(lw, s: Reduce) -> None:
    src, dst = s.src, s.dst
    sd, dd = src.dtype, dst.dtype
    shape = src.static_shape
    kept = [d for d in range(len(shape)) if d != s.dim]
    acc = _acc_dtype(lw, sd)
    at = compute(acc)
    tsrc = lw.x.buffer(src)
    tdst = lw.x.private[id(dst)] if id(dst) in lw.x.private else lw.x.buffer(dst)
    red = s.kind.replace("abs", "")

    def value(ix):
        v = convert(from_storage(tir.BufferLoad(tsrc, ix), sd), sd, acc, lw.caps) if sd.is_int \
            else tir.Cast(at, from_storage(tir.BufferLoad(tsrc, ix), sd))
        if s.kind.startswith("abs"):
            if acc.is_int:
                v = share(v, lambda y: tir.Select(y < c(0, at), _int(lw, "sub", c(0, at), y, at), y))
            else:
                v = tir.abs(v)
        return v

    def combine(a, b, t, is_int):
        if s.kind in _BIT_OPS:  # integer / bool tiles (accumulated in a 32/64-bit integer)
            return _BIT_OPS[s.kind](a, b)
        if red == "sum":
            return _int(lw, "add", a, b, t) if is_int else a + b
        if is_int:
            return tir.max(a, b) if red == "max" else tir.min(a, b)
        return nan_max(a, b) if red == "max" else nan_min(a, b)

    def elem(idx):
        kidx = dict(zip(kept, idx))

        def at_r(r):
            return [r if d == s.dim else kidx[d] for d in range(len(shape))]

        cell = T.alloc_buffer([1], at, scope="local")
        # start from the first element, as NumPy's reduction does (a lone -0.0 stays -0.0)
        T.buffer_store(cell, value(at_r(c(0, "int32"))), [0])
        with T.serial(1, shape[s.dim]) as r:
            T.buffer_store(cell, combine(tir.BufferLoad(cell, [0]), value(at_r(r)), at, acc.is_int), [0])
        out = convert(tir.BufferLoad(cell, [0]), acc, dd, lw.caps)
        it = iter(i for i, d in zip(idx, kept) if shape[d] != 1)
        dix = [c(0, "int32") if nd == 1 else next(it, c(0, "int32")) for nd in dst.static_shape]
        if id(dst) in lw.x.private:
            dix = [lw.x.it]
        if not s.clear:
            cur = from_storage(tir.BufferLoad(tdst, dix), dd)
            out = combine(cur, out, compute(dd), dd.is_int)
            out = convert(out, dd, dd, lw.caps) if dd.is_int else round_to(out, dd)
        T.buffer_store(tdst, to_storage(out, dd), dix)

    lw.elements([shape[d] for d in kept] or [1], lambda idx: elem(idx if kept else []))


def _cumsum(lw, s: CumSum) -> None:
    src, dst = s.src, s.dst
    sd, dd = src.dtype, dst.dtype
    shape = src.static_shape
    kept = [d for d in range(len(shape)) if d != s.dim]
    acc = _acc_dtype(lw, sd)
    at = compute(acc)
    tsrc, tdst = lw.x.buffer(src), lw.x.buffer(dst)
    n = shape[s.dim]

    def elem(idx):
        kidx = dict(zip(kept, idx))
        cell = T.alloc_buffer([1], at, scope="local")
        T.buffer_store(cell, c(0, at), [0])
        with T.serial(0, n) as r0:
            r = c(n - 1, "int32") - r0 if s.reverse else r0
            ix = [r if d == s.dim else kidx[d] for d in range(len(shape))]
            v = from_storage(tir.BufferLoad(tsrc, ix), sd)
            v = convert(v, sd, acc, lw.caps) if sd.is_int else tir.Cast(at, v)
            cur = tir.BufferLoad(cell, [0])
            T.buffer_store(cell, _int(lw, "add", cur, v, at) if acc.is_int else cur + v, [0])
            T.buffer_store(tdst, to_storage(convert(tir.BufferLoad(cell, [0]), acc, dd, lw.caps), dd), ix)

    lw.elements([shape[d] for d in kept] or [1], lambda idx: elem(idx if kept else []))
