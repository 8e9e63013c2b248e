"""Expression evaluation for the emulator: each IR expression node compiled once to a closure.

`Block.eval(e, mask)` used to walk the expression tree on every evaluation, dispatching on the
node's class and re-deciding each operation's semantics (dtype, op table, wrap width) at every
node, every time; an emulated program evaluates millions of nodes, mostly the same few hundred
in loops. Here each node is translated on first use into a closure `f(mask) -> value` that
calls its children's closures directly, with the operation (`tilecore.semantics`) and its
constants bound in. Values and errors are exactly those of the tree walk.

*Block-invariant* subexpressions (built from constants, the thread index, the block indices
and dynamic sizes only: no memory, no loop or let variables) are also computed once per block
for all threads and reused: index arithmetic such as `tx // 4 * 4 + tx % 4` inside a loop.
One that raises for some thread when computed for all (a division by zero in a lane the
program masks off) is evaluated under its mask each time instead, as before.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import dtypes as dt
from .. import semantics as S
from ..errors import TileRuntimeError
from ..ir.expr import BinOp, Cast, Const, Expr, Select, Unary, Var
from ..ir.thread import LaneTable, MemLoad, Shuffle

_MISSING = object()
_VARYING = object()  # a block-invariant node whose all-threads evaluation raised


class Evaluator:
    """Compiled closures for the expressions of one block's kernel (`blk`: the Block)."""

    def __init__(self, blk, invariant_vars: set[int]):
        self.blk = blk
        self.fns: dict[int, Callable] = {}
        self.invariant: dict[int, bool] = {}  # id(node) -> block-invariant
        self.invariant_vars = invariant_vars  # ids of the thread, block and dynamic variables
        self.values: dict[int, object] = {}  # this block's block-invariant values

    def new_block(self) -> None:
        """Forget the block-invariant values (the block indices changed)."""
        self.values = {}

    def fn(self, e: Expr) -> Callable:
        """The closure evaluating `e` (compiled on first use)."""
        f = self.fns.get(id(e))
        if f is None:
            f = self._compile(e)
            if self.invariant[id(e)] and not isinstance(e, (Const, Var)):
                f = self._cached(id(e), f)
            self.fns[id(e)] = f
        return f

    def _cached(self, key: int, inner: Callable) -> Callable:
        def f(mask):
            v = self.values.get(key, _MISSING)
            if v is _MISSING:
                try:
                    v = inner(None)
                except TileRuntimeError:
                    v = _VARYING  # some thread would raise: evaluate under the mask each time
                if isinstance(v, np.ndarray):
                    v.flags.writeable = False  # shared by every later use in the block
                self.values[key] = v
            return inner(mask) if v is _VARYING else v
        return f

    def _compile(self, e: Expr) -> Callable:
        blk = self.blk
        inv = self.invariant
        if isinstance(e, Const):
            inv[id(e)] = True
            if e.dtype.is_int:
                v = np.int64(e.value)
            elif e.dtype.is_bool:
                v = np.bool_(e.value)
            else:
                v = S.round_to(e.value, e.dtype)
            return lambda mask: v
        if isinstance(e, Var):
            key = id(e)
            inv[key] = key in self.invariant_vars

            def var(mask):
                try:
                    return blk.env[key]  # not bound early: concurrent tasks swap `env`
                except KeyError:
                    raise TileRuntimeError(f"variable {e.name} used before it is bound", blk.loc,
                                           hint="define the name before this statement") from None
            return var
        if isinstance(e, MemLoad):
            inv[id(e)] = False
            return self._memload(e)
        if isinstance(e, BinOp):
            f = self._binop(e)
            inv[id(e)] = inv[id(e.a)] and inv[id(e.b)]
            return f
        if isinstance(e, Unary):
            fa = self.fn(e.a)
            inv[id(e)] = inv[id(e.a)]
            op, d = e.op, e.dtype
            if op == "not":
                return lambda mask: np.logical_not(fa(mask))
            if d.is_int:
                return lambda mask: S.int_unary(op, fa(mask), d)
            return lambda mask: S.float_unary(op, fa(mask), d)
        if isinstance(e, Cast):
            fv = self.fn(e.value)
            inv[id(e)] = inv[id(e.value)]
            src, dst = e.value.dtype, e.dtype
            return lambda mask: S.cast_value(fv(mask), src, dst)
        if isinstance(e, Select):
            return self._select(e)
        if isinstance(e, Shuffle):
            inv[id(e)] = False
            return self._shuffle(e)
        if isinstance(e, LaneTable):
            fi = self.fn(e.index)
            inv[id(e)] = inv[id(e.index)]
            table = np.asarray(e.values, dtype=np.int64)
            top = len(table) - 1
            return lambda mask: table[np.clip(np.asarray(fi(mask), dtype=np.int64), 0, top)]
        inv[id(e)] = False

        def unknown(mask):
            raise TileRuntimeError(f"emu cannot evaluate {type(e).__name__}", blk.loc,
                                   hint="a lowering produced a node the emulator lacks: report it")
        return unknown

    def _memload(self, e: MemLoad) -> Callable:
        blk = self.blk
        buf, d = e.buffer, e.buffer.dtype
        fpred = self.fn(e.pred) if e.pred is not None else None
        foff = self.fn(e.offset)
        T = blk.T

        def load(mask):
            lanes = blk.all_lanes if mask is None else mask
            if fpred is not None:
                lanes = lanes & lanes_of(fpred(lanes), T)
            if e.indices:
                blk._check_indices(buf, e.indices, lanes, "read")
            return S.from_storage(blk.read1(buf, foff(lanes), lanes), d)
        return load

    def _select(self, e: Select) -> Callable:
        blk = self.blk
        fc, ft, ff = self.fn(e.cond), self.fn(e.true_value), self.fn(e.false_value)
        inv = self.invariant
        inv[id(e)] = inv[id(e.cond)] and inv[id(e.true_value)] and inv[id(e.false_value)]
        T = blk.T

        def select(mask):
            c = lanes_of(fc(mask), T)
            m = blk.all_lanes if mask is None else mask
            mt, mf = m & c, m & ~c
            a = ft(mt) if mt.any() else None
            b = ff(mf) if mf.any() else None
            if a is None:
                return b if b is not None else ft(mt)
            if b is None:
                return a
            return np.where(c, a, b)
        return select

    def _binop(self, e: BinOp) -> Callable:
        blk = self.blk
        fa, fb = self.fn(e.a), self.fn(e.b)
        op, t = e.op, e.a.dtype
        if op in S.COMPARE:
            cmp = S.COMPARE[op]
            return lambda mask: cmp(fa(mask), fb(mask))
        if op == "and":
            return lambda mask: np.logical_and(fa(mask), fb(mask))
        if op == "or":
            return lambda mask: np.logical_or(fa(mask), fb(mask))
        if not (t.is_int or t.is_bool):
            return lambda mask: S.float_binop(op, fa(mask), fb(mask), t)
        run = S.int_operation(op, dt.int32 if t.is_bool else t)
        if op in S.DIVISIONS:
            def divide(mask):
                a, b = fa(mask), fb(mask)
                try:  # inactive lanes may divide by zero (the semantics' masked lanes)
                    return run(a, S.active_divisor(b, mask))
                except ZeroDivisionError:
                    raise TileRuntimeError("integer division by zero", blk.loc,
                                           hint="guard the division (`if d != 0:`) or check "
                                           "the divisor") from None
            return divide
        if op in S.SHIFT_OPS:
            width = S.int_compute_dtype(t).bits

            def shift(mask):
                return run(fa(mask), shift_count(blk, fb(mask), t, width, mask))
            return shift
        return lambda mask: run(fa(mask), fb(mask))

    def _shuffle(self, e: Shuffle) -> Callable:
        blk = self.blk
        fv, farg = self.fn(e.value), self.fn(e.arg)
        width, xor = e.width, e.mode == "xor"
        T = blk.T

        def shuffle(mask):
            blk._whole_warps(mask, "a warp shuffle")
            v = lanes_of(fv(mask), T)
            arg = lanes_of(np.asarray(farg(mask), dtype=np.int64), T)
            lane = blk.tid % width
            src = (lane ^ arg) if xor else arg
            src = blk.tid - lane + (src % width)
            return v[src]
        return shuffle


def lanes_of(x, T: int) -> np.ndarray:
    """`x` (a scalar or a (T,) array) as a (T,) array: `np.broadcast_to`, without its
    Python-level overhead for the common case of an array that already has the shape."""
    if type(x) is np.ndarray and x.shape == (T,):
        return x
    return np.broadcast_to(x, (T,))


def shift_count(blk, b, t, width: int, mask):
    """Shift counts with inactive lanes' made valid (`semantics.active_shift_count`); an active
    lane's count outside [0, compute width) is a TileRuntimeError (undefined in C)."""
    try:
        return S.active_shift_count(b, mask, width)
    except S.ShiftCountError as e:
        raise TileRuntimeError(f"{e} for {t}", blk.loc,
                               hint="shift by a count in [0, bit width)") from None
