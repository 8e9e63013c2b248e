"""`T.dp4a(A, B, C)` and `T.index_to_coordinates(index, shape)`.

- `T.dp4a(A[i], B[j], C[k])`: TileLang's 4-way int8 dot product with accumulation (CUDA's
  `__dp4a`): `C[k] += A[i] * B[j] + A[i+1] * B[j+1] + A[i+2] * B[j+2] + A[i+3] * B[j+3]`, the
  four elements running along each operand's last dimension (a whole buffer starts at its
  first element). A and B hold int8 or uint8, C int32; the products and the sum are exact
  int32 arithmetic, wrapping like every tilecore integer. It is a plain element update, so every
  target runs it (in thread-level code and inside `T.Parallel` alike).
- `T.index_to_coordinates(index, shape)`: the row-major coordinates of flat `index` in `shape`
  (a list of expressions; on a Python int, of ints).
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileShapeError, TileTypeError
from ..ir.buffer import Buffer
from ..ir.expr import Load, as_expr, binop, cast, const_int
from ..ir.stmt import Store
from .builder import builtin, current
from .refs import Ref

_LANES = 4


def _element(x, what: str) -> tuple:
    """(buffer, indices) of an element operand (a whole buffer: its first element)."""
    if isinstance(x, Buffer):
        return x, [as_expr(0) for _ in x.shape]
    if isinstance(x, Ref) and x.is_element:
        return x.buffer, [as_expr(i) for i in x.items]
    raise TileTypeError(f"T.dp4a {what} must be a buffer element like A_local[k], got "
                        f"{type(x).__name__}", hint="pass the first of the four elements")


@builtin
def dp4a(A, B, C) -> None:
    """C += the dot product of four int8 (or uint8) elements of A and of B (see module docstring)."""
    b = current()
    (ab, ai), (bb, bi), (cb, ci) = _element(A, "A"), _element(B, "B"), _element(C, "C")
    for buf, name in ((ab, "A"), (bb, "B")):
        if buf.dtype not in (dt.int8, dt.uint8):
            raise TileTypeError(f"T.dp4a {name} ({buf.name}) is {buf.dtype}; it takes int8 or uint8",
                                hint="pack the operands as int8 elements")
        last, start = buf.shape[-1], const_int((ai if name == "A" else bi)[-1])
        if isinstance(last, int) and start is not None and start + _LANES > last:
            raise TileShapeError(f"T.dp4a reads {name}[..., {start}:{start + _LANES}] of "
                                 f"{buf.name} whose last dimension is {last}",
                                 hint="the four elements must lie inside the last dimension")
    if cb.dtype != dt.int32:
        raise TileTypeError(f"T.dp4a C ({cb.name}) is {cb.dtype}; it accumulates into int32",
                            hint="allocate the accumulator as int32")
    total = Load(cb, tuple(ci))
    for k in range(_LANES):
        a = cast(Load(ab, tuple(ai[:-1] + [binop("add", ai[-1], k)])), dt.int32)
        bv = cast(Load(bb, tuple(bi[:-1] + [binop("add", bi[-1], k)])), dt.int32)
        total = binop("add", total, binop("mul", a, bv))
    b.emit(Store(cb, tuple(ci), total, b.loc))


@builtin
def index_to_coordinates(index, shape) -> list:
    """The row-major coordinates of flat `index` in `shape` (outermost first)."""
    shape = [shape] if isinstance(shape, int) else list(shape)
    if isinstance(index, Ref):
        index = index.as_expr()
    out = []
    for n in reversed(shape):
        if isinstance(index, int) and isinstance(n, int):
            out.append(index % n)
            index //= n
        else:
            out.append(binop("mod", as_expr(index), n))
            index = binop("div", as_expr(index), n)
    return list(reversed(out))


__all__ = ["dp4a", "index_to_coordinates"]
