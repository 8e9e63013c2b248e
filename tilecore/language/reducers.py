"""`T.alloc_reducer(shape, dtype, op="sum", replication=None)` and `T.finalize_reducer(r)`.

TileLang's reducer buffers: a fragment whose elements many `T.Parallel` iterations accumulate
into, race-free (`o[i] += a[i, j] * x[j]` over `(i, j)`). The update forms TileLang defines are
the ones accepted: `r[...] += v` for `op="sum"`, `r[...] = T.max(r[...], v)` for `"max"`,
`r[...] = T.min(r[...], v)` for `"min"`; each becomes a `tilecore.ir.reducers.ReducerUpdate`.
Initialize it with `T.fill` / `T.clear` first, read it only after `T.finalize_reducer`
(`tilecore.ir.reducers.check`). `replication=` ("all" / "none") chooses how TileLang's GPU
lowering stores the per-thread partials; it does not change values. interp/cpu keep one copy;
the thread-lowered targets always keep per-iteration partials (`tilecore.lower.reducers`), the
`"all"` form, so `"none"` warns once (TileConfigWarning) that it is not applied.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileSyntaxError, TileTypeError
from ..ir.buffer import Buffer
from ..ir.expr import BinOp, Cast, Expr, Load, as_expr, cast
from ..ir.reducers import BINOP, OPS, FinalizeReducer, ReducerUpdate
from .builder import builtin, current
from .ops import _alloc

_REPLICATION = (None, "all", "none")


@builtin
def alloc_reducer(shape, dtype, op: str = "sum", replication=None) -> Buffer:
    """A fragment that `T.Parallel` iterations accumulate into with `op` (sum, max or min)."""
    b = current()
    if op not in OPS:
        raise TileTypeError(f"T.alloc_reducer op={op!r} is not a reducer operation",
                            hint=f"use one of {', '.join(map(repr, OPS))}")
    if replication not in _REPLICATION:
        raise TileTypeError(f"T.alloc_reducer replication={replication!r}",
                            hint="use 'all', 'none' or leave it out")
    if replication == "none":  # a storage choice TileLang offers and tilecore does not make
        from .hints import ignored_hint

        ignored_hint('T.alloc_reducer(replication="none")',
                     "thread-lowered targets keep per-iteration partials (registers on cuda) "
                     "reduced at T.finalize_reducer, as for replication=\"all\"; values are the same")
    buf = _alloc(shape, dt.as_dtype(dtype), "fragment", "T.alloc_reducer")
    b.reducers[id(buf)] = op
    return buf


@builtin
def finalize_reducer(reducer) -> None:
    """From here on `reducer` holds the combined result of every update."""
    b = current()
    op = b.reducers.get(id(reducer)) if isinstance(reducer, Buffer) else None
    if op is None:
        raise TileTypeError(f"T.finalize_reducer takes a buffer made by T.alloc_reducer, got "
                            f"{getattr(reducer, 'name', type(reducer).__name__)}",
                            hint="allocate the accumulator with T.alloc_reducer(shape, dtype, op=...)")
    if b.parallel_depth:
        raise TileSyntaxError("T.finalize_reducer inside T.Parallel", b.loc,
                              hint="call it after the loop that updates the reducer")
    b.emit(FinalizeReducer(reducer, op, b.loc))


def _strip(e):
    """`e` without the casts dtype promotion wrapped around it."""
    while isinstance(e, Cast):
        e = e.value
    return e


def store(b, buf: Buffer, indices: tuple, value) -> None:
    """Emit the assignment `buf[indices] = value` to reducer `buf` as its update, or raise when
    it is not one of the update forms of the reducer's op."""
    op = b.reducers[id(buf)]
    want = BINOP[op]
    idx = tuple(as_expr(i) for i in indices)
    v = _strip(value) if isinstance(value, Expr) else value
    contrib = None
    if isinstance(v, BinOp) and v.op == want:
        for own, other in ((v.a, v.b), (v.b, v.a)):
            own = _strip(own)
            if isinstance(own, Load) and own.buffer is buf and tuple(own.indices) == idx:
                contrib = other
                break
    form = {"sum": f"{buf.name}[...] += value",
            "max": f"{buf.name}[...] = T.max({buf.name}[...], value)",
            "min": f"{buf.name}[...] = T.min({buf.name}[...], value)"}[op]
    if contrib is None:
        raise TileSyntaxError(f"reducer {buf.name} (op={op!r}) is updated only as `{form}`, "
                              "with the same indices on both sides", b.loc,
                              hint="initialize it with T.fill/T.clear before the loop; other "
                                   "writes go to an ordinary T.alloc_fragment buffer")
    from ..ir.visit import walk

    if any(isinstance(n, Buffer) and n is buf for n in walk(contrib)):
        raise TileSyntaxError(f"the contribution to reducer {buf.name} reads {buf.name}", b.loc,
                              hint="a reducer is read only after T.finalize_reducer")
    b.emit(ReducerUpdate(buf, idx, cast(as_expr(contrib, buf.dtype), buf.dtype), op, b.loc))


__all__ = ["alloc_reducer", "finalize_reducer"]
