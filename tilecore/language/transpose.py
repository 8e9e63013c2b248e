"""`T.transpose(src, dst)` (TileLang's tile transpose): `dst[..., j, i] = src[..., i, j]` for a
source region of shape (..., M, N) and a destination of shape (..., N, M). It is emitted as a
`T.Parallel` nest of element stores, so every target lowers it like a user's own loop (layout
inference, vector stores and bank-conflict-free layouts come from the thread lowering)."""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileShapeError
from ..ir.expr import Load, Var, binop, cast
from ..ir.stmt import For, SeqStmt, Store
from .builder import builtin, current
from .refs import region_of


def _kept(region) -> list[int]:
    """The region's dimensions of extent > 1 (a squeezed view's axes)."""
    return [d for d, n in enumerate(region.extents) if n != 1]


def _at(region, kept: list[int], loop_vars: list) -> tuple:
    """The element of `region` at squeezed coordinates `loop_vars`."""
    idx = list(region.starts)
    for d, v in zip(kept, loop_vars):
        idx[d] = binop("add", region.starts[d], v)
    return tuple(idx)


@builtin
def transpose(src, dst, annotations=None) -> None:
    """dst[..., j, i] = src[..., i, j]: the last two dimensions of a tile swapped (TileLang's
    shared-memory transpose; any tile scope works). Leading dimensions must match."""
    b = current()
    if annotations:
        from .hints import ignored_hint

        ignored_hint("T.transpose(annotations=...)", "they are TileLang's lowering controls; tilecore "
                     "lowers the transpose as a T.Parallel loop")
    s = region_of(src, None, "transpose source")
    shape = s.squeezed_shape
    if len(shape) < 2:
        raise TileShapeError(f"T.transpose needs a tile of at least 2 dimensions; {s.buffer.name} "
                             f"gives {shape}", b.loc, hint="transpose a 2-D (or batched) tile")
    want = (*shape[:-2], shape[-1], shape[-2])
    d = region_of(dst, want, "transpose destination")
    if tuple(d.squeezed_shape) != tuple(want):
        raise TileShapeError(f"T.transpose of {s.buffer.name}{tuple(shape)} gives shape {want}, but the "
                             f"destination {d.buffer.name} region is {tuple(d.squeezed_shape)}", b.loc,
                             hint=f"make the destination {want}")
    sk, dk = _kept(s), _kept(d)
    loop_vars = [Var(b.unique_name(f"tr{k}"), dt.int32) for k in range(len(want))]
    # destination coordinates (..., j, i) read the source at (..., i, j)
    src_vars = [*loop_vars[:-2], loop_vars[-1], loop_vars[-2]]
    value = cast(Load(s.buffer, _at(s, sk, src_vars)), d.buffer.dtype)
    body = SeqStmt((Store(d.buffer, _at(d, dk, loop_vars), value, b.loc),), b.loc)
    for v, n in reversed(list(zip(loop_vars, want))):
        body = For(v, cast(0, dt.int32), cast(n, dt.int32), 1, "parallel", body, (), b.loc)
    b.emit(body)
