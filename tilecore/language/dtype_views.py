"""`T.view(buf, shape=..., dtype=...)` with another dtype: a buffer over `buf`'s bytes.

TileLang uses it to reuse on-chip memory under another element type (`sparse_mla_bwd.py`: the
float32 staging tile of a dK/dV atomic update lives in the bytes of a bfloat16 shared tile) and
to read packed bytes as wider integers. Here it makes a new buffer of the view's shape and
dtype, in the scope of `buf`, and emits a `tilecore.ir.aliases.BufferAlias` binding it to the
bytes of `buf`: a write through either is seen through the other, bit for bit. As in TileLang
(v0.1.13's `T.view`), `shape` defaults to the source's and the view covers exactly the
source's bytes (a float32 view of a `(BS, D)` bfloat16 tile is `(BS // 2, D)`). Sub-byte
dtypes (int4, float4_e2m1fn) and bool are refused: their storage is not their bit pattern on
every target. Targets: `tilecore.ir.aliases`.
"""

from __future__ import annotations

import math

from .. import dtypes as dt
from ..errors import TileShapeError, TileSyntaxError, TileTypeError
from ..ir.aliases import BufferAlias
from ..ir.buffer import Buffer
from .builder import current


def _byte_dtype(d, what: str) -> None:
    """Refuse dtypes whose storage is not their bit pattern (sub-byte, bool)."""
    if d in dt.SUB_BYTE or d.is_bool:
        raise TileTypeError(f"T.view {what} dtype {d.name}: reinterpreting storage needs a dtype "
                            "of whole bytes whose storage is its bit pattern",
                            hint="view the bytes as uint8 / int8 or a wider integer and unpack "
                                 "with shifts and masks")


def _fit_hint(nbytes: int, dtype) -> str:
    """What shape would cover `nbytes` bytes with `dtype` elements."""
    if nbytes % dtype.itemsize:
        return f"no {dtype.name} view covers {nbytes} bytes exactly; view them as uint8"
    return (f"as in TileLang, a view covers exactly its base's bytes: a shape of "
            f"{nbytes // dtype.itemsize} {dtype.name} elements")


def reinterpret_view(src, shape, dtype) -> Buffer:
    """The buffer `T.view(src, shape, dtype)` names when `dtype` is not `src`'s (module doc)."""
    from .ops import _shape
    from .views import BufferView

    b = current()
    base = src.base if isinstance(src, BufferView) else src
    if b.kernel is None or b.parallel_depth:
        where = "inside T.Parallel" if b.parallel_depth else "outside `with T.Kernel(...)`"
        raise TileSyntaxError(f"T.view(..., dtype={dtype.name}) {where}", b.loc,
                              hint="call it in the kernel body, before the loops that use the view")
    if base.scope == "global" or base.static_shape is None or base.is_var:
        raise TileTypeError(f"T.view({base.name}, dtype={dtype.name}): only a shared, fragment "
                            "or local buffer's storage can be viewed as another dtype", b.loc,
                            hint="view an on-chip tile; for a tensor, pass it to the kernel "
                                 "with the dtype wanted (torch's tensor.view(dtype))")
    _byte_dtype(base.dtype, f"of {base.name}, whose")
    _byte_dtype(dtype, "as")
    nbytes = base.numel * base.dtype.itemsize
    try:  # TileLang's default: the source's shape (a T.reshape view's, for one)
        shp = _shape(src.shape if shape is None else shape, "T.view")
    except TileShapeError as e:
        raise e.with_loc(b.loc) from None
    need = math.prod(shp) * dtype.itemsize
    if need != nbytes:
        given = "" if shape is not None else " (the shape defaults to the source's)"
        raise TileShapeError(f"T.view({base.name}, shape={shp}, dtype={dtype.name}) covers {need} "
                             f"bytes; {base.name}{tuple(base.shape)} of {base.dtype.name} has "
                             f"{nbytes}{given}", b.loc,
                             hint=_fit_hint(nbytes, dtype))
    name = b.unique_name(b.pending_name() or f"{base.name}_as_{dtype.name}")
    buf = Buffer(name, shp, dtype, base.scope)
    b.emit(BufferAlias(buf, base, b.loc))
    return buf


__all__ = ["reinterpret_view"]
