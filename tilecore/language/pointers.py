"""`T.ptr` and `T.make_tensor`: tensors reached through a table of addresses (tilecore.ir.pointers).

    A_ptrs: T.Tensor([groups], T.ptr)              # the host fills it with t.data_ptr()
    ...
    A = T.make_tensor(A_ptrs[g], (max_M, K), T.float16)
    T.copy(A[m0, k0], A_shared)

`T.ptr` is a 64-bit address: tilecore has no handle type, so it is `T.int64` (a torch int64
tensor of `data_ptr()` values is the argument). `T.make_tensor` views the memory at the address
as a row-major global tensor of a static shape; `T.copy` of it is clipped at its edges and an
element access outside it raises, as for a parameter. Only `interp` runs such a kernel
(`tilecore.ir.pointers.check_target`); the address must be that of a live host tensor holding
at least the view.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileShapeError, TileSyntaxError, TileTypeError
from ..ir.buffer import Buffer
from ..ir.expr import as_expr, cast
from ..ir.pointers import PointerTensor
from .builder import builtin, current

ptr = dt.int64  # TileLang's T.ptr: an address, 64 bits


@builtin
def make_tensor(address, shape, dtype) -> Buffer:
    """The global tensor of `shape` and `dtype` at `address` (an integer kernel value, e.g. an
    element of a `T.Tensor([n], T.ptr)` table): TileLang's `T.make_tensor(ptr, shape, dtype)`.
    Inside `with T.Kernel(...)`, outside `T.Parallel`; `shape` is made of Python ints."""
    from .ops import _shape

    b = current()
    if b.kernel is None or b.parallel_depth:
        where = "inside T.Parallel" if b.parallel_depth else "outside `with T.Kernel(...)`"
        raise TileSyntaxError(f"T.make_tensor {where}", b.loc,
                              hint="call it in the kernel body, before the loops that use the tensor")
    a = as_expr(address)
    if not a.dtype.is_int or a.dtype.bits != 64:
        raise TileTypeError(f"T.make_tensor's address is a {a.dtype} value, not a 64-bit address",
                            b.loc, hint="pass an element of a T.Tensor([n], T.ptr) table "
                                        "(int64 values from tensor.data_ptr())")
    try:
        shp = _shape(shape, "T.make_tensor")
    except TileShapeError as e:
        raise e.with_loc(b.loc) from None
    name = b.unique_name(b.pending_name() or "ptr_tensor")
    b.names.add(name)
    buf = Buffer(name, shp, dt.as_dtype(dtype), "global")
    b.emit(PointerTensor(buf, cast(a, dt.int64) if a.dtype != dt.int64 else a, b.loc))
    return buf


__all__ = ["make_tensor", "ptr"]
