"""Value ranges of integer expressions: when the interpreter may skip C's wrap-around.

Every integer operation of `tilecore.semantics` wraps its result to C's compute width and
truncates division toward zero, which on NumPy arrays costs several passes per operation
(three casts for the wrap, a minimum for the sign test of `//`). Index arithmetic, the bulk of
the interpreter's integer work (`T.im2col`'s `m // (OH * OW)`, a gather's `i * W + j`), almost
never comes near the width's ends and divides non-negative values by positive constants. When
the operands' ranges prove that, the plain NumPy / Python operation is the same value, so
`exprs.py` compiles it without the wrap: results are identical, only the cost changes.

The `safe-memory` pass (tilecore.passes.safe_memory) asks the same question to decide which
bounds of a global access need a guard. Ranges come from the program (the interpreter's
`Slots.ranges`, filled by its runner): block indices of a
constant grid, loop variables of constant bounds, let-bound values. Anything else falls back
to what its dtype guarantees (a load of int32 holds an int32 value; an operation's result lies
in its compute width), so every answer is sound, never a guess.
"""

from __future__ import annotations

from tilecore import dtypes as dt
from tilecore.ir.expr import BinOp, Cast, Const, Load, Select, Unary, Var
from tilecore.ir.thread_level import ThreadIndex
from tilecore.semantics import int_compute_dtype

Interval = tuple[int, int]

#: The dtypes the fast path computes in: their compute width is the dtype itself and their
#: values are signed, so int64 arrays and Python ints hold them exactly.
FAST_DTYPES = ("int32", "int64")


def _dtype_range(d) -> Interval | None:
    """What a stored (or cast) value of integer dtype `d` can be; None for uint64 (its values
    do not all fit the int64 the interpreter computes in) and non-integers."""
    if not d.is_int or (d.kind == "uint" and d.bits >= 64):
        return None
    return int(dt.min_value(d)), int(dt.max_value(d))


def _width_range(d) -> Interval | None:
    """What an operation's result of dtype `d` can be: its C compute width's range."""
    return _dtype_range(int_compute_dtype(d)) if d.is_int else None


def _within(r: Interval, w: Interval | None) -> bool:
    return w is not None and w[0] <= r[0] and r[1] <= w[1]


def _binop(op: str, a: Interval, b: Interval) -> Interval | None:
    """The exact range of `a op b` (C semantics) for the operations index arithmetic uses."""
    (alo, ahi), (blo, bhi) = a, b
    if op == "add":
        return alo + blo, ahi + bhi
    if op == "sub":
        return alo - bhi, ahi - blo
    if op == "mul":
        c = (alo * blo, alo * bhi, ahi * blo, ahi * bhi)
        return min(c), max(c)
    if op in ("div", "floordiv") and alo >= 0 and blo >= 1:
        return alo // bhi, ahi // blo
    if op in ("mod", "floormod") and alo >= 0 and blo >= 1:
        return (alo, ahi) if ahi < blo else (0, bhi - 1)
    if op == "min":
        return min(alo, blo), min(ahi, bhi)
    if op == "max":
        return max(alo, blo), max(ahi, bhi)
    return None


def interval(e, ranges: dict, memo: dict) -> Interval | None:
    """Inclusive [lo, hi] of integer expression `e`, or None when nothing is known (a float,
    a bool, uint64). `ranges`: id(Var) -> interval; `memo`: id(expr) -> answer (the caller
    empties it when a range changes)."""
    got = memo.get(id(e), memo)
    if got is not memo:
        return got
    r = _interval(e, ranges, memo)
    memo[id(e)] = r
    return r


def _interval(e, ranges: dict, memo: dict) -> Interval | None:
    if isinstance(e, Const):
        return (int(e.value), int(e.value)) if e.dtype.is_int else None
    if isinstance(e, Var):
        return ranges.get(id(e)) or _width_range(e.dtype)
    if isinstance(e, ThreadIndex):  # `T.get_thread_binding(d)`: see `thread_key`
        return ranges.get(thread_key(e.dim)) or _width_range(e.dtype)
    if isinstance(e, Load):
        return _dtype_range(e.buffer.dtype)
    if isinstance(e, Cast):
        to = _dtype_range(e.dtype)
        src = interval(e.value, ranges, memo) if e.value.dtype.is_int else None
        return src if src is not None and _within(src, to) else to
    if isinstance(e, Select):
        a, b = interval(e.true_value, ranges, memo), interval(e.false_value, ranges, memo)
        return (min(a[0], b[0]), max(a[1], b[1])) if a and b else _width_range(e.dtype)
    if isinstance(e, Unary) and e.op == "neg" and e.dtype.is_int:
        a = interval(e.a, ranges, memo)
        r = (-a[1], -a[0]) if a else None
        return r if r and _within(r, _width_range(e.dtype)) else _width_range(e.dtype)
    if isinstance(e, BinOp) and e.dtype.is_int and e.a.dtype.is_int:
        r = fast_result(e, ranges, memo)
        return r if r is not None else _width_range(e.dtype)
    return _width_range(e.dtype) if e.dtype.is_int else None


def fast_result(e: BinOp, ranges: dict, memo: dict) -> Interval | None:
    """The range of `e`'s result when computing it without the wrap is exact (its dtype is
    int32/int64, both operands' and the result's ranges lie inside that width, and a division
    or remainder has a non-negative dividend and a divisor >= 1); else None."""
    if e.a.dtype.name not in FAST_DTYPES or e.dtype != e.a.dtype:
        return None
    a, b = interval(e.a, ranges, memo), interval(e.b, ranges, memo)
    if a is None or b is None:
        return None
    r = _binop(e.op, a, b)
    w = _width_range(e.dtype)
    return r if r is not None and _within(a, w) and _within(b, w) and _within(r, w) else None


def thread_key(dim: int) -> tuple:
    """The key under which `ranges` holds the range of the thread index along `dim` (a
    `ThreadIndex` is a value, not a bound variable, so it has no `id(Var)` of its own)."""
    return ("thread", dim)


def bind(ranges: dict, memo: dict, var, r: Interval | None) -> None:
    """Record that `var` takes values in `r` (None: unknown). A variable bound twice (a loop
    body the pipeliner duplicated) gets the union; answers computed before are forgotten.
    `var` may also be a `thread_key`."""
    if r is None:
        return
    key = var if isinstance(var, tuple) else id(var)
    old = ranges.get(key)
    ranges[key] = r if old is None else (min(old[0], r[0]), max(old[1], r[1]))
    memo.clear()
