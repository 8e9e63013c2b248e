"""Compile scalar expressions to Python closures `fn(env, mask) -> value`.

The same closure serves scalar mode (outside T.Parallel: values are NumPy/Python scalars) and
vector mode (inside T.Parallel: loop variables are broadcastable aranges, values arrays).
`mask` is None or a boolean array of active iterations: loads of inactive lanes are clamped
and never fault, and only the chosen side of a select is evaluated per lane.
"""

from __future__ import annotations

import operator

import numpy as np

from tilecore import dtypes as dt
from tilecore import semantics as S
from tilecore.errors import SourceLoc, TileRuntimeError
from tilecore.ir.expr import BinOp, Cast, Const, Load, Select, Unary, Var

from . import ranges, shadow


class Slots:
    """Maps Vars and Buffers (by identity) to indices of the environment list."""

    def __init__(self):
        self.index: dict[int, int] = {}
        self.keep: list = []  # keeps the keyed objects alive so ids stay unique
        # id(parallel loop Var) -> (array axis, extent, rank of the nest): lets loads and
        # stores indexed directly by the loop variables use slices instead of fancy indexing.
        self.parallel: dict[int, tuple[int, int, int]] = {}
        self.shadow: dict[int, int] = {}  # id(buffer) -> slot of its initialization shadow
        # id(integer Var) -> the (lo, hi) its values lie in, and the interval memo: which
        # integer operations may skip C's wrap-around (ranges.py)
        self.ranges: dict[int, tuple[int, int]] = {}
        self.intervals: dict[int, tuple[int, int] | None] = {}

    def bind_range(self, var, e) -> None:
        """Record that `var` holds the values of integer expression / interval `e`."""
        r = e if isinstance(e, tuple) else ranges.interval(e, self.ranges, self.intervals)
        ranges.bind(self.ranges, self.intervals, var, r)

    def axes_of(self, indices) -> tuple[list[int], list[int], int] | None:
        """(axes, extents, rank) when every index is a distinct parallel loop variable in
        increasing axis order, else None."""
        axes, exts, rank = [], [], None
        for ix in indices:
            info = self.parallel.get(id(ix)) if isinstance(ix, Var) else None
            if info is None:
                return None
            a, n, r = info
            if axes and a <= axes[-1]:
                return None
            axes.append(a)
            exts.append(n)
            rank = r
        return (axes, exts, rank) if axes else None

    def __call__(self, obj) -> int:
        k = id(obj)
        if k not in self.index:
            self.index[k] = len(self.index)
            self.keep.append(obj)
        return self.index[k]

    def __len__(self) -> int:
        return len(self.index)


def oob_error(buf, idx, loc: SourceLoc | None, what: str = "read") -> TileRuntimeError:
    shape = "(" + ", ".join(s.name if isinstance(s, Var) else str(s) for s in buf.shape) + \
        ("," if len(buf.shape) == 1 else "") + ")"
    return TileRuntimeError(
        f"out-of-bounds {what} of {buf.scope} buffer {buf.name}{shape} at index {idx}",
        loc, hint="guard the access with `if` or T.if_then_else, or size the grid to the tensor",
    )


def check_bounds(arr, buf, idx: list, mask, loc, what="read"):
    """Raise when any active index lies outside `arr`; returns indices safe to use (clamped)."""
    out = []
    for ix, n in zip(idx, arr.shape):
        if np.ndim(ix) == 0:
            if not 0 <= ix < n:
                if mask is None or np.any(mask):
                    raise oob_error(buf, tuple(int(i) if np.ndim(i) == 0 else "..." for i in idx), loc, what)
                ix = 0
            out.append(int(ix))
            continue
        bad = (ix < 0) | (ix >= n)
        if mask is not None:
            bad = bad & mask
        if bad.any():
            # one offending element, every index sampled at it (the indices vary along different
            # loop axes, e.g. a transposed store: broadcast them all to one shape first)
            full = np.broadcast_shapes(bad.shape, *[np.shape(i) for i in idx])
            where = tuple(np.argwhere(np.broadcast_to(bad, full))[0])
            sample = tuple(int(np.broadcast_to(i, full)[where]) if np.ndim(i) else int(i) for i in idx)
            raise oob_error(buf, sample, loc, what)
        if mask is not None:
            ix = np.where(mask, ix, 0)
        out.append(ix)
    return out


def compile_expr(e, slots: Slots, loc: SourceLoc | None):
    """A closure evaluating `e`; `loc` names the statement for runtime faults."""
    if isinstance(e, Const):
        if e.dtype.is_int:
            v = int(e.value)
        elif e.dtype.is_bool:
            v = bool(e.value)
        else:
            v = S.round_to(e.value, e.dtype)
        return lambda env, mask: v
    if isinstance(e, Var):
        s = slots(e)
        return lambda env, mask: env[s]
    if isinstance(e, Load):
        return _compile_load(e, slots, loc)
    if isinstance(e, Cast):
        f = compile_expr(e.value, slots, loc)
        src, dst = e.value.dtype, e.dtype
        return lambda env, mask: S.cast_value(f(env, mask), src, dst)
    if isinstance(e, BinOp):
        return _compile_binop(e, slots, loc)
    if isinstance(e, Unary):
        return _compile_unary(e, slots, loc)
    if isinstance(e, Select):
        return _compile_select(e, slots, loc)
    raise TypeError(f"interp cannot evaluate {type(e).__name__}")


def _compile_load(e: Load, slots, loc):
    buf = e.buffer
    s = slots(buf)
    idx_fns = [compile_expr(i, slots, loc) for i in e.indices]
    d = buf.dtype
    sh = slots.shadow.get(id(buf))
    fast = slots.axes_of(e.indices)
    if fast is not None:
        return _fast_load(buf, s, idx_fns, fast, d, loc, sh)

    inside = proven_shape(buf, e.indices, slots)

    def load(env, mask):
        arr = env[s]
        if arr.shape == inside:  # every lane's index is provably in bounds: nothing to check
            idx = tuple([f(env, mask) for f in idx_fns])
        else:
            idx = tuple(check_bounds(arr, buf, [f(env, mask) for f in idx_fns], mask, loc))
        if sh is not None:
            shadow.check_index(env[sh], idx, buf, loc, mask)
        return S.from_storage(arr[idx], d)

    return load


def proven_shape(buf, indices, slots: Slots) -> tuple[int, ...] | None:
    """`buf`'s constant shape when the ranges of `indices` (ranges.py) lie inside it for every
    lane, masked or not; None otherwise. Callers compare it with the bound array's shape, so
    a buffer bound to another shape still takes the checked path."""
    shape = buf.static_shape
    if shape is None or len(shape) != len(indices):
        return None
    for ix, n in zip(indices, shape):
        r = ranges.interval(ix, slots.ranges, slots.intervals)
        if r is None or r[0] < 0 or r[1] >= n:
            return None
    return tuple(shape)


def _fast_load(buf, s, idx_fns, fast, d, loc, sh=None):
    """Load indexed exactly by T.Parallel loop variables: a strided view, reshaped onto the
    nest's axes (same values as the general path, without fancy indexing)."""
    axes, exts, rank = fast
    out_shape = [1] * rank
    for a, n in zip(axes, exts):
        out_shape[a] = n

    def load(env, mask):
        arr = env[s]
        sl = []
        for f, n, size in zip(idx_fns, exts, arr.shape):
            lo = int(f(env, None).flat[0])
            if lo < 0 or lo + n > size:
                return _slow(env, mask)
            sl.append(slice(lo, lo + n))
        if sh is not None and not shadow.box_ok(env[sh], tuple(sl), out_shape, mask):
            return _slow(env, mask)  # names the uninitialized element
        return S.from_storage(arr[tuple(sl)].reshape(out_shape), d)

    def _slow(env, mask):
        arr = env[s]
        idx = tuple(check_bounds(arr, buf, [f(env, mask) for f in idx_fns], mask, loc))
        if sh is not None:
            shadow.check_index(env[sh], idx, buf, loc, mask)
        return S.from_storage(arr[idx], d)

    return load


def _compile_binop(e: BinOp, slots, loc):
    fa = compile_expr(e.a, slots, loc)
    fb = compile_expr(e.b, slots, loc)
    t, op = e.a.dtype, e.op
    if op in S.COMPARE or op in ("and", "or") or t.is_narrow_float:
        return lambda env, mask: S.binop(op, fa(env, mask), fb(env, mask), t)
    if t.is_float:  # float32 / float64 results need no rounding (Program.run ignores FP errors)
        f = S.FLOAT_BINARY[op]
        return lambda env, mask: f(fa(env, mask), fb(env, mask))
    fast = _FAST.get(op) if not t.is_bool else None
    if fast is not None and ranges.fast_result(e, slots.ranges, slots.intervals) is not None:
        # proven in range (ranges.py): the unwrapped operation is the same value
        if isinstance(e.b, Const):
            c = int(e.b.value)
            return lambda env, mask: fast(fa(env, mask), c)
        return lambda env, mask: fast(fa(env, mask), fb(env, mask))
    run = S.int_operation(op, dt.int32 if t.is_bool else t)  # bound once: index arithmetic
    width = S.int_compute_dtype(t).bits
    # a lane masked off by a condition is not executed: only active lanes' divisors and shift
    # counts may fault (the semantics' `active_divisor` / `active_shift_count`)
    guard = (S.active_divisor if op in S.DIVISIONS
             else (lambda b, mask: S.active_shift_count(b, mask, width)) if op in S.SHIFT_OPS
             else None)
    if isinstance(e.b, Const) and (int(e.b.value) != 0 if op in S.DIVISIONS
                                   else 0 <= int(e.b.value) < width):
        guard = None  # a constant divisor or count: the same, valid, in every lane

    def int_op(env, mask):
        try:
            if guard is not None and mask is not None:
                return run(fa(env, mask), guard(fb(env, mask), mask))
            return run(fa(env, mask), fb(env, mask))
        except ZeroDivisionError:
            raise TileRuntimeError("integer division by zero", loc,
                                   hint="guard the division (`if d != 0:`) or check the divisor") from None
        except S.ShiftCountError as e:  # undefined in C: the oracle reports it
            raise TileRuntimeError(f"{e} in `{op}` on {t}", loc,
                                   hint="shift by a count in [0, bit width)") from None

    return int_op


# The operations `ranges.fast_result` may prove: on Python ints and int64 arrays alike, with a
# non-negative dividend and a positive divisor (floor is truncation there).
_FAST = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
         "div": operator.floordiv, "floordiv": operator.floordiv,
         "mod": operator.mod, "floormod": operator.mod}


def _compile_unary(e: Unary, slots, loc):
    fa = compile_expr(e.a, slots, loc)
    t, op = e.dtype, e.op
    return lambda env, mask: S.unary(op, fa(env, mask), t)


def _compile_select(e: Select, slots, loc):
    fc = compile_expr(e.cond, slots, loc)
    ft = compile_expr(e.true_value, slots, loc)
    ff = compile_expr(e.false_value, slots, loc)

    def sel(env, mask):
        c = fc(env, mask)
        if np.ndim(c) == 0:
            return ft(env, mask) if c else ff(env, mask)
        mt = c if mask is None else (c & mask)
        mf = ~c if mask is None else (~c & mask)
        a = ft(env, mt) if mt.any() else None
        b = ff(env, mf) if mf.any() else None
        if a is None:
            return b if b is not None else ft(env, mt)
        if b is None:
            return a
        return np.where(c, a, b)

    return sel
