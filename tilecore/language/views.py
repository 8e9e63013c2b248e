"""`T.reshape(buf, shape)` / `T.view(buf, shape=..., dtype=None)`: another shape for the same
elements of a shared or fragment buffer (row-major order).

A view is frontend-only: `view[i, j, k]` is the base element at the same row-major position
(an element access, so it works inside `T.Parallel` on every target), and a view that differs
from its base only by unit dimensions (`(n, 1, h)` over `(n, h)`) also stands for its base in
tile operations (`T.copy`, `T.reduce_*` with the dimension mapped, `T.fill`, ...). A view that
regroups dimensions (`(n, q * h)` seen as `(n, q, h)`) is a tile operand through a staging
tile (`tile_operands`): a source is first copied element by element into a tile of the view's
shape, a destination is computed into such a tile and copied back (`T.fill` fills the base: the
same elements). A view with another dtype (TileLang's `T.view(..., dtype=...)` reinterpreting
storage) is a buffer of its own over the base's bytes: `tilecore.language.dtype_views`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import TileShapeError, TileTypeError
from ..ir.buffer import Buffer
from ..ir.expr import Load, Var, as_expr, binop
from ..ir.stmt import Store
from .builder import builtin, current
from .refs import SliceItem, squeezed


@dataclass(frozen=True, eq=False)
class BufferView:
    """`base` seen with `shape` (same element count, row-major)."""

    base: Buffer
    shape: tuple

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def dtype(self):
        return self.base.dtype

    @property
    def unit_only(self) -> bool:
        """Whether the view only adds or drops size-1 dimensions."""
        return squeezed(self.shape) == squeezed(self.base.shape)

    def base_items(self, items: list) -> tuple:
        """The base indices (or, for a unit-only view, slices) of `view[items]`."""
        if self.unit_only:
            kept = [it for it, n in zip(items, self.shape) if n != 1]
            out, k = [], 0
            for n in self.base.shape:
                if n == 1:
                    out.append(as_expr(0))
                else:
                    out.append(kept[k])
                    k += 1
            return tuple(out)
        if any(isinstance(i, SliceItem) for i in items):
            raise TileShapeError(
                f"a slice of the T.reshape view of {self.base.name} {self.shape}, which regroups "
                f"the dimensions of {tuple(self.base.shape)}",
                hint="index the view element by element (inside T.Parallel), or slice the base "
                     "buffer")
        flat = as_expr(0)
        for it, n in zip(items, self.shape):
            flat = binop("add", binop("mul", flat, as_expr(n)), as_expr(it))
        out = []
        for n in reversed(self.base.shape):
            out.append(binop("mod", flat, as_expr(n)))
            flat = binop("div", flat, as_expr(n))
        return tuple(reversed(out))

    def as_base(self, what: str) -> Buffer:
        """The base buffer, for a tile operation (unit-only views)."""
        if not self.unit_only:
            raise TileShapeError(
                f"{what}: the T.reshape view of {self.base.name} {self.shape} regroups the "
                f"dimensions of {tuple(self.base.shape)}; this operation takes a view only when "
                "it adds or drops size-1 dimensions (T.copy, T.fill, T.reduce_* and T.cumsum "
                "take any view)", hint=f"pass {self.base.name} itself, or T.copy the view into "
                "a tile of its shape first")
        return self.base

    def base_dim(self, dim: int) -> int:
        """The base dimension of the view's (non-unit) dimension `dim`."""
        dim = dim % len(self.shape)
        if self.shape[dim] == 1:
            raise TileShapeError(f"dimension {dim} of the view of {self.base.name} has size 1",
                                 hint="reduce along a dimension with more than one element")
        nth = sum(1 for n in self.shape[:dim] if n != 1)
        return [i for i, n in enumerate(self.base.shape) if n != 1][nth]


def regroups(x) -> bool:
    """Whether `x` is a view that regroups its base's dimensions (not only unit ones)."""
    return isinstance(x, BufferView) and not x.unit_only


def _element_copy(view: BufferView, tmp: Buffer, into_view: bool) -> None:
    """Emit T.Parallel loops copying every element between `view` and `tmp` (its shape)."""
    from .global_views import _parallel

    b = current()
    loop = [Var(b.unique_name(f"v{k}"), dt.int32) for k in range(len(view.shape))]
    base_idx = tuple(as_expr(i) for i in view.base_items(loop))
    if into_view:
        body = Store(view.base, base_idx, Load(tmp, tuple(loop)), b.loc)
    else:
        body = Store(tmp, tuple(loop), Load(view.base, base_idx), b.loc)
    b.emit(_parallel(loop, view.shape, body, b.loc))


def write_back(view: BufferView, tmp: Buffer) -> None:
    """Emit the copy of staging tile `tmp` back into the elements of `view`."""
    _element_copy(view, tmp, into_view=True)


def staging_tile(view: BufferView, copy_in: bool) -> Buffer:
    """A tile of `view`'s shape in its base's scope; holding the view's elements when `copy_in`."""
    b = current()
    tmp = b.allocate(Buffer(b.unique_name(f"{view.base.name}_view"), tuple(view.shape),
                            view.dtype, view.base.scope))
    if copy_in:
        _element_copy(view, tmp, into_view=False)
    return tmp


def tile_operands(src, dst, dst_read: bool):
    """(src, dst, finish) for a tile operation whose operands may be regrouping views: each
    such view is replaced by a staging tile (the source's filled now; the destination's filled
    now only when the operation reads it, `dst_read`), and `finish()` copies the destination
    tile back into its view's base after the operation is emitted."""
    if regroups(src):
        src = staging_tile(src, copy_in=True)
    if not regroups(dst):
        return src, dst, lambda: None
    view = dst
    tmp = staging_tile(view, copy_in=dst_read)
    return src, tmp, lambda: write_back(view, tmp)


def _shape(shape) -> tuple:
    from .ops import _shape as alloc_shape

    return alloc_shape(shape, "T.reshape")


@builtin
def reshape(src, shape) -> BufferView:
    """`src` seen with another shape of the same element count: a shared, fragment or local
    buffer, or a global tensor of static shape (then TileLang's `T.Tensor(shape, dtype,
    src.data)`, `tilecore.language.global_views`)."""
    base = src.base if isinstance(src, BufferView) else src
    if isinstance(base, Buffer) and base.scope == "global" and base.static_shape is not None:
        from .global_views import tensor_view

        return tensor_view(shape, base.dtype, base.data)
    if not isinstance(base, Buffer) or base.static_shape is None:
        raise TileTypeError("T.reshape takes a buffer of static shape",
                            hint="reshape an on-chip tile, or a tensor whose shape has no "
                                 "T.dynamic dimension")
    shape = _shape(shape)
    n = math.prod(shape)
    if n != base.numel:
        raise TileShapeError(f"T.reshape of {base.name}{tuple(base.shape)} ({base.numel} elements) "
                             f"to {shape} ({n} elements)",
                             hint="the new shape must hold the same number of elements")
    return BufferView(base, shape)


@builtin
def view(src, shape=None, dtype=None):
    """TileLang's `T.view(buf, shape=..., dtype=...)`: a `T.reshape` when the dtype is the same;
    with another dtype, a buffer over `buf`'s bytes (`tilecore.language.dtype_views`)."""
    from .. import dtypes as dt

    base = src.base if isinstance(src, BufferView) else src
    if dtype is not None and isinstance(base, Buffer) and dt.as_dtype(dtype) != base.dtype:
        from .dtype_views import reinterpret_view

        return reinterpret_view(src, shape, dt.as_dtype(dtype))
    return reshape(src, shape if shape is not None else base.shape)


__all__ = ["BufferView", "regroups", "reshape", "staging_tile", "tile_operands", "view",
           "write_back"]


def is_region(x) -> bool:
    """Whether `x` is a sliced subscript of a buffer (`s[0:4, :]`), not a whole tile."""
    from .refs import Ref

    return isinstance(x, Ref) and not x.is_element


def region_tile(ref, copy_in: bool, what: str):
    """(tile, finish) for a region operand of a tile operation (TileLang takes shared and
    fragment slices there): a tile of the region's extents (unit dimensions kept, so `dim`
    counts as in the region) in its buffer's scope, filled from the region now when `copy_in`;
    `finish()` copies it back into the region (call it after the operation when the region is
    written)."""
    from ..errors import TileTypeError
    from .ops import copy
    from .refs import region_of

    r = region_of(ref, None, what)
    if r.buffer.scope == "global":
        raise TileTypeError(f"{what} {r.buffer.name} is in global memory",
                            hint="copy it into a fragment or shared buffer first")
    b = current()
    tmp = b.allocate(Buffer(b.unique_name(f"{r.buffer.name}_region"), tuple(r.extents), r.buffer.dtype,
                            r.buffer.scope))
    if copy_in:
        copy(ref, tmp)
    return tmp, lambda: copy(tmp, ref)
