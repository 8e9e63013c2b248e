"""`T.make_tensor` on the oracle (tilecore.ir.pointers): a NumPy view of host memory at an address.

The address is what the kernel computed (an element of a `T.ptr` table the host filled with
`tensor.data_ptr()`); the view has the buffer's static shape, row-major, and from then on the
block reads and writes the tensor through it like a parameter's array. A null or misaligned
address is a located TileRuntimeError; whether the memory belongs to a live tensor large enough
cannot be known from an address (as on the GPU): the caller guarantees it.
"""

from __future__ import annotations

import ctypes

import numpy as np

from tilecore.errors import TileRuntimeError


def view_at(address: int, shape: tuple, dtype: np.dtype, name: str, loc) -> np.ndarray:
    """The array of `shape` and `dtype` over the host memory at `address`."""
    if address == 0 or address % dtype.itemsize:
        what = ("a null address" if address == 0
                else f"address {address:#x}, not aligned to {dtype.itemsize} bytes")
        raise TileRuntimeError(f"T.make_tensor {name} at {what}", loc,
                               hint="the table entry must be a tensor's data_ptr()")
    n = int(np.prod(shape)) * dtype.itemsize
    raw = (ctypes.c_uint8 * n).from_address(address)
    return np.frombuffer(raw, dtype=np.uint8).view(dtype).reshape(shape)


def compile_bind(s, slots, address_fn):
    """The closure binding `s.buffer`'s slot to the memory at the address, once per execution."""
    slot, b = slots(s.buffer), s.buffer
    np_dtype = b.dtype.np

    def bind(env, mask):
        env[slot] = view_at(int(address_fn(env, None)), b.static_shape, np_dtype, b.name, s.loc)

    return bind
