"""What the frontend makes of `buffer[...]` in kernel code: an element or a region."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TileShapeError, TileTypeError
from ..ir.buffer import Buffer, Region
from ..ir.expr import Expr, Load, as_expr, binop, const_int


@dataclass(frozen=True)
class SliceItem:
    """`start:stop` inside a subscript (either side may be None)."""

    start: object
    stop: object


@dataclass(frozen=True, eq=False)
class Ref:
    """`buffer[items]`: a Load when every item is a scalar, a Region when slices appear or when
    a tile op takes it as the start corner of a tile."""

    buffer: Buffer
    items: tuple

    @property
    def is_element(self) -> bool:
        return all(not isinstance(i, SliceItem) for i in self.items)

    def as_expr(self) -> Expr:
        """The element value; slices are not values."""
        if not self.is_element:
            raise TileTypeError(
                f"{self.buffer.name}[...] with a slice is a region, not a value",
                hint="index with scalars inside T.Parallel, or pass the region to T.copy",
            )
        return Load(self.buffer, tuple(as_expr(i) for i in self.items))

    def astype(self, dtype) -> Expr:
        """TVM's `buf[i].astype(dtype)`: the element read and cast."""
        return self.as_expr().astype(dtype)

    # Arithmetic on an element reference reads it.
    def __add__(self, o):
        return binop("add", self.as_expr(), o)

    def __radd__(self, o):
        return binop("add", o, self.as_expr())

    def __sub__(self, o):
        return binop("sub", self.as_expr(), o)

    def __rsub__(self, o):
        return binop("sub", o, self.as_expr())

    def __mul__(self, o):
        return binop("mul", self.as_expr(), o)

    def __rmul__(self, o):
        return binop("mul", o, self.as_expr())

    def __truediv__(self, o):
        return binop("div", self.as_expr(), o)

    def __rtruediv__(self, o):
        return binop("div", o, self.as_expr())

    def __neg__(self):
        return -self.as_expr()


def squeezed(shape) -> tuple:
    return tuple(e for e in shape if e != 1)


def region_of(x, other_shape: tuple | None = None, what: str = "operand") -> Region:
    """A Region from a Buffer, a sliced Ref, or a start-corner Ref whose extents come from
    `other_shape` (the other operand's squeezed shape, aligned to trailing dimensions). A
    `T.alloc_var` read by name (`T.clear(v)`) is its one-element buffer."""
    if isinstance(x, Load) and x.buffer.is_var:
        x = x.buffer
    if isinstance(x, Ref) and getattr(x, "view", None) is not None and not x.is_element:
        raise TileShapeError(  # a ViewRef region (tilecore.language.global_views)
            f"{what}: a region of the view of {x.buffer.name} that regroups its dimensions",
            hint="T.copy it into an on-chip tile first; other tile operations take such a view "
                 "element by element")
    if isinstance(x, Ref) and getattr(x, "view", None) is not None and other_shape is not None:
        raise TileShapeError(
            f"{what}: a tile of the view of {x.buffer.name} that regroups its dimensions",
            hint="T.copy it into an on-chip tile first; other tile operations take such a view "
                 "element by element")
    if _is_view(x):
        x = x.as_base(what)
    if isinstance(x, Buffer):
        if x.static_shape is None:
            raise TileShapeError(
                f"{what} {x.name} has a symbolic shape; a tile op needs a constant-shaped region",
                hint=f"pass a slice or start corner such as {x.name}[i * 128, 0]",
            )
        return Region.full(x)
    if not isinstance(x, Ref):
        raise TileTypeError(f"{what} must be a buffer or a buffer region, got {type(x).__name__}",
                            hint="pass a buffer, A[i, j] (a tile starting there) or A[i:i+m, j:j+n]")
    buf = x.buffer
    if len(x.items) != len(buf.shape):
        raise TileShapeError(
            f"{buf.name} has {len(buf.shape)} dimensions but is indexed with {len(x.items)}",
            hint=f"give one index or slice per dimension of {buf.name}",
        )
    if x.is_element:
        if other_shape is None:
            raise TileShapeError(
                f"cannot tell the extent of {what} {buf.name}[...] from a start corner alone",
                hint="give one side of T.copy as a whole buffer or with explicit slices",
            )
        rank = len(buf.shape)
        if len(other_shape) > rank:
            raise TileShapeError(
                f"the tile has shape {tuple(other_shape)} but {buf.name} has only {rank} dimensions",
                hint="make the two sides of the copy the same rank (or slice explicitly)",
            )
        extents = (1,) * (rank - len(other_shape)) + tuple(other_shape)
        return Region(buf, tuple(as_expr(i) for i in x.items), extents)
    starts, extents = [], []
    for dim, item in enumerate(x.items):
        if isinstance(item, SliceItem):
            start = as_expr(0 if item.start is None else item.start)
            stop = buf.shape[dim] if item.stop is None else item.stop
            n = const_int(binop("sub", as_expr(stop), start))
            if n is None:
                n = _extent_through_lets(as_expr(stop), start)
            if n is None:
                raise TileShapeError(
                    f"the extent of slice {dim} of {buf.name} is not a compile-time constant",
                    hint="tile shapes must be constants: write A[i * 64:(i + 1) * 64]",
                )
            if n < 1:
                raise TileShapeError(f"slice {dim} of {buf.name} is empty ({n} elements)",
                                     hint="a slice needs stop > start")
            starts.append(start)
            extents.append(n)
        else:
            starts.append(as_expr(item))
            extents.append(1)
    return Region(buf, tuple(starts), tuple(extents))


def _extent_through_lets(stop, start) -> int | None:
    """`stop - start` once the kernel's `x = ...` names are replaced by their definitions
    (`H1 = H0 + 64; Q[b, H0:H1]` has extent 64), or None when it is still not a constant."""
    from ..ir.visit import substitute
    from .builder import current

    try:
        lets = current().let_values
    except Exception:  # noqa: BLE001 - no kernel being built: nothing to expand
        return None
    if not lets:
        return None
    mapping = {v: val for v, val in lets.values()}
    diff = binop("sub", stop, start)
    for _ in range(8):  # definitions may refer to earlier names
        diff = substitute(diff, mapping)
        n = const_int(diff)
        if n is not None:
            return n
    return None


def shape_of(x) -> tuple | None:
    """The squeezed shape of a Buffer or sliced Ref, or None for a start corner."""
    if _is_view(x):
        x = x.as_base("T.copy")
    if isinstance(x, Buffer):
        return squeezed(x.static_shape) if x.static_shape is not None else None
    if isinstance(x, Ref) and not x.is_element:
        return squeezed(region_of(x).extents)
    return None


def buffer_of(x, what: str) -> Buffer:
    """The buffer behind `x` (Buffer, whole-buffer Ref, or a T.reshape view adding or dropping
    unit dimensions)."""
    if _is_view(x):
        return x.as_base(what)
    if isinstance(x, Buffer):
        return x
    if isinstance(x, Ref):
        r = region_of(x)
        if r.is_full:
            return x.buffer
    raise TileTypeError(f"{what} must be a whole buffer",
                        hint="pass the buffer itself (no indices or slices)")


def _is_view(x) -> bool:
    from .views import BufferView

    return isinstance(x, BufferView)
