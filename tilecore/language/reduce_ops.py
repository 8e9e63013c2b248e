"""The tile reductions: `T.reduce_<kind>` and TileLang's generic `T.reduce(buffer, out, kind, dim,
clear)` (so `getattr(T, "reduce_" + op)` and `T.reduce(..., op, ...)` resolve at build time).

Kinds (`tilecore.ir.stmt.REDUCE_KINDS`): sum, max, min, abssum, absmax and the bit reductions
bitand, bitor, bitxor (integer and bool tiles). Every backend lowers a `Reduce` statement; the
thread lowering's combine and identity are `tilecore.lower.reduce.combine` / `identity`.

TileLang's `batch=` (how many outputs share one AllReduce's barriers in its CUDA lowering) asks
for a schedule, not a value: accepted and warned once. `nan_propagate=True` is what tilecore's
max/min always do (float max/min propagate NaN on every target, tilecore.semantics);
`nan_propagate=False` (TileLang's `__hmax`, which drops a NaN operand) is accepted with a warning
that NaN still propagates.
"""

from __future__ import annotations

from ..errors import TileShapeError, TileTypeError
from ..ir.stmt import BIT_REDUCE_KINDS, REDUCE_KINDS, Reduce
from .builder import builtin, current
from .hints import ignored_hint
from .refs import buffer_of, squeezed


def _reduce(kind, src, dst, dim, clear):
    """Check and emit one Reduce of `kind` (shapes, scopes, dtypes; views resolved)."""
    b = current()
    from .views import BufferView, is_region, region_tile, regroups, tile_operands

    if is_region(src) or is_region(dst):  # shared / fragment slices: through tiles of their extents
        if is_region(src):
            src, _ = region_tile(src, True, f"reduce_{kind} source")
        finish = lambda: None  # noqa: E731
        if is_region(dst):
            dst, finish = region_tile(dst, not clear, f"reduce_{kind} destination")
        _reduce(kind, src, dst, dim, clear)
        finish()
        return

    if regroups(src) or regroups(dst):  # a regrouping T.reshape view: through a staging tile
        src, dst, finish = tile_operands(src, dst, dst_read=not clear)
        _reduce(kind, src, dst, dim, clear)
        finish()
        return
    if isinstance(src, BufferView) and isinstance(dim, int):
        src, dim = src.as_base(f"reduce_{kind} source"), src.base_dim(dim)
    s, d = buffer_of(src, f"reduce_{kind} source"), buffer_of(dst, f"reduce_{kind} destination")
    for x in (s, d):
        if x.scope == "global":
            raise TileTypeError(f"reduce_{kind} operand {x.name} is in global memory",
                                hint="copy it into a fragment or shared buffer first")
    if kind in BIT_REDUCE_KINDS:
        for x in (s, d):
            if not (x.dtype.is_int or x.dtype.is_bool):
                raise TileTypeError(f"reduce_{kind} needs integer or bool tiles; {x.name} is {x.dtype}",
                                    hint=f"allocate {x.name} with an integer dtype (or T.cast into one)")
    rank = len(s.shape)
    if not isinstance(dim, int) or not -rank <= dim < rank:
        raise TileShapeError(f"reduce_{kind} dim={dim!r} is out of range for {s.name} of rank {rank}",
                             hint=f"use a dim in [-{rank}, {rank - 1}]")
    dim = dim % rank
    expect = tuple(x for i, x in enumerate(s.shape) if i != dim) or (1,)
    if squeezed(d.shape) != squeezed(expect):
        raise TileShapeError(
            f"reduce_{kind} of {s.name}{tuple(s.shape)} along dim {dim} gives shape {expect}, "
            f"but {d.name} has shape {tuple(d.shape)}", hint=f"allocate {d.name} with shape {expect}"
        )
    b.emit(Reduce(s, d, kind, dim, bool(clear), b.loc))


def _options(kind: str, batch=1, nan_propagate=None) -> None:
    """Check TileLang's `batch=` / `nan_propagate=` of a reduction (module docstring)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise TileTypeError(f"reduce_{kind}(batch={batch!r}): batch must be a positive int", current().loc,
                            hint="pass batch=1 (the default) or another positive integer")
    if batch > 1:
        ignored_hint(f"T.reduce_{kind}(batch={batch})",
                     "it groups TileLang's CUDA AllReduce barriers; tilecore's reduction lowering "
                     "plans its own shuffles and barriers (values are unchanged)")
    if nan_propagate is None:
        return
    if kind not in ("max", "min", "absmax"):
        raise TileTypeError(f"reduce_{kind} has no nan_propagate (only max, min and absmax do)",
                            current().loc, hint="drop nan_propagate=")
    if not nan_propagate:
        ignored_hint(f"T.reduce_{kind}(nan_propagate=False)",
                     "tilecore's float max/min propagate NaN on every target (the oracle's semantics); "
                     "a NaN in the tile gives NaN")


@builtin
def reduce(buffer, out, reduce_type, dim=-1, clear=True, batch=1, nan_propagate=None):
    """out = the `reduce_type` reduction of buffer along dim: TileLang's generic form of
    `T.reduce_<reduce_type>` (sum, max, min, abssum, absmax, bitand, bitor, bitxor)."""
    if reduce_type not in REDUCE_KINDS:
        raise TileTypeError(f"T.reduce: unknown reduce_type {reduce_type!r}", current().loc,
                            hint=f"use one of {', '.join(REDUCE_KINDS)}")
    _options(reduce_type, batch, nan_propagate)
    _reduce(reduce_type, buffer, out, dim, clear)


@builtin
def reduce_max(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=None):
    """out = max of buffer along dim (combined with out's contents when clear=False)."""
    _options("max", batch, nan_propagate)
    _reduce("max", buffer, out, dim, clear)


@builtin
def reduce_min(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=None):
    """out = min of buffer along dim."""
    _options("min", batch, nan_propagate)
    _reduce("min", buffer, out, dim, clear)


@builtin
def reduce_sum(buffer, out, dim=-1, clear=True, batch=1):
    """out = sum of buffer along dim, accumulated in float32 for narrow floats."""
    _options("sum", batch)
    _reduce("sum", buffer, out, dim, clear)


@builtin
def reduce_abssum(buffer, out, dim=-1, clear=True, batch=1):
    """out = sum of |buffer| along dim."""
    _options("abssum", batch)
    _reduce("abssum", buffer, out, dim, clear)


@builtin
def reduce_absmax(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=None):
    """out = max of |buffer| along dim."""
    _options("absmax", batch, nan_propagate)
    _reduce("absmax", buffer, out, dim, clear)


@builtin
def reduce_bitand(buffer, out, dim=-1, clear=True, batch=1):
    """out = bitwise and of buffer along dim (integer or bool tiles; `&=` into out when clear=False)."""
    _options("bitand", batch)
    _reduce("bitand", buffer, out, dim, clear)


@builtin
def reduce_bitor(buffer, out, dim=-1, clear=True, batch=1):
    """out = bitwise or of buffer along dim (integer or bool tiles)."""
    _options("bitor", batch)
    _reduce("bitor", buffer, out, dim, clear)


@builtin
def reduce_bitxor(buffer, out, dim=-1, clear=True, batch=1):
    """out = bitwise xor of buffer along dim (integer or bool tiles)."""
    _options("bitxor", batch)
    _reduce("bitxor", buffer, out, dim, clear)
