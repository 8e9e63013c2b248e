"""`T.view(buf, shape=..., dtype=...)` with another dtype: a buffer over `buf`'s bytes.

TileLang uses it to reuse on-chip memory under another element type (`sparse_mla_bwd.py`: the
float32 staging tile of a dK/dV atomic update lives in the bytes of a bfloat16 shared tile) and
to read packed bytes as wider integers. Here it makes a new buffer of the view's shape and
dtype, in the scope of `buf`, and emits a `tilecore.ir.aliases.BufferAlias` binding it to the
leading bytes of `buf`: a write through either is seen through the other, bit for bit. The
view must fit in `buf`'s bytes; `shape` defaults to the same byte count (`(n,)` of uint8 seen
as float32 is `(n // 4,)`). Sub-byte dtypes (int4, float4_e2m1fn) and bool are refused: their
storage is not their bit pattern on every target. Targets: `tilecore.ir.aliases`.
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
    if shape is None:
        if nbytes % dtype.itemsize:
            raise TileShapeError(f"T.view({base.name}, dtype={dtype.name}): {nbytes} bytes are no "
                                 f"whole number of {dtype.name} elements", b.loc,
                                 hint="give the view's shape")
        shape = (nbytes // dtype.itemsize,)
    try:
        shp = _shape(shape, "T.view")
    except TileShapeError as e:
        raise e.with_loc(b.loc) from None
    need = math.prod(shp) * dtype.itemsize
    if need > nbytes:
        raise TileShapeError(f"T.view({base.name}, shape={shp}, dtype={dtype.name}) needs {need} "
                             f"bytes; {base.name}{tuple(base.shape)} of {base.dtype.name} has "
                             f"{nbytes}", b.loc,
                             hint="a view covers part or all of its base's bytes, never more")
    name = b.unique_name(b.pending_name() or f"{base.name}_as_{dtype.name}")
    buf = Buffer(name, shp, dtype, base.scope)
    b.emit(BufferAlias(buf, base, b.loc))
    return buf


__all__ = ["reinterpret_view"]
