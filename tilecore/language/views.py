"""`T.reshape(buf, shape)` / `T.view(buf, shape=..., dtype=None)`: another shape for the same
elements of a shared or fragment buffer (row-major order).

A view is frontend-only: `view[i, j, k]` is the base element at the same row-major position
(an element access, so it works inside `T.Parallel` on every target), and a view that differs
from its base only by unit dimensions (`(n, 1, h)` over `(n, h)`) also stands for its base in
tile operations (`T.copy`, `T.reduce_*` with the dimension mapped, `T.fill`, ...). A view that
regroups dimensions is usable element by element only; a view with another dtype (TileLang's
`T.view(..., dtype=...)` reinterpreting storage) is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import TileShapeError, TileTypeError
from ..ir.buffer import Buffer
from ..ir.expr import as_expr, binop
from .builder import builtin
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
                f"dimensions of {tuple(self.base.shape)}; tile operations take it only when it "
                "adds or drops size-1 dimensions", hint=f"pass {self.base.name} itself, or "
                "compute through the view element by element inside T.Parallel")
        return self.base

    def base_dim(self, dim: int) -> int:
        """The base dimension of the view's (non-unit) dimension `dim`."""
        dim = dim % len(self.shape)
        if self.shape[dim] == 1:
            raise TileShapeError(f"dimension {dim} of the view of {self.base.name} has size 1",
                                 hint="reduce along a dimension with more than one element")
        nth = sum(1 for n in self.shape[:dim] if n != 1)
        return [i for i, n in enumerate(self.base.shape) if n != 1][nth]


def _shape(shape) -> tuple:
    from .ops import _shape as alloc_shape

    return alloc_shape(shape, "T.reshape")


@builtin
def reshape(src, shape) -> BufferView:
    """`src` (a shared or fragment buffer) seen with another shape of the same element count."""
    base = src.base if isinstance(src, BufferView) else src
    if not isinstance(base, Buffer) or base.scope == "global" or base.static_shape is None:
        raise TileTypeError("T.reshape takes a shared, fragment or local buffer",
                            hint="reshape an on-chip tile; views of global tensors are not provided")
    shape = _shape(shape)
    n = math.prod(shape)
    if n != base.numel:
        raise TileShapeError(f"T.reshape of {base.name}{tuple(base.shape)} ({base.numel} elements) "
                             f"to {shape} ({n} elements)",
                             hint="the new shape must hold the same number of elements")
    return BufferView(base, shape)


@builtin
def view(src, shape=None, dtype=None) -> BufferView:
    """TileLang's `T.view(buf, shape=..., dtype=...)`: a `T.reshape` when the dtype is the same;
    reinterpreting storage as another dtype is not provided."""
    from .. import dtypes as dt

    base = src.base if isinstance(src, BufferView) else src
    if dtype is not None and isinstance(base, Buffer) and dt.as_dtype(dtype) != base.dtype:
        raise TileTypeError(f"T.view of {getattr(base, 'name', base)} as {dt.as_dtype(dtype)}: "
                            "viewing a buffer's storage as another dtype is not provided",
                            hint="allocate a buffer of that dtype and copy (T.copy converts)")
    return reshape(src, shape if shape is not None else base.shape)


__all__ = ["BufferView", "reshape", "view"]
