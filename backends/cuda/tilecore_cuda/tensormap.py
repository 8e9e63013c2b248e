"""TMA tensor maps: which a kernel needs (from its thread IR) and their bytes for a launch.

Every distinct (tensor, box, swizzle) of a kernel's `TmaLoad` / `TmaStore` statements is one
kernel parameter, `const __grid_constant__ tilecore_tmap_t tilecore_tmap<i>` (128 opaque bytes,
passed by value), after the tensors and symbolic sizes, in the order `tensor_map_specs` lists
them; the renderer and the launcher both call it, so they cannot disagree. At launch each map
is encoded with the driver's `cuTensorMapEncodeTiled` (through cuda-bindings) from the torch
tensor's address, shape and strides, and cached per (address, shape, strides, dtype, box,
swizzle): encoding costs a driver call, a cache hit a dictionary lookup.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from typing import NamedTuple

from tilecore.dtypes import DType
from tilecore.errors import TileCallError, TileInternalError, caller_loc
from tilecore.ir.visit import walk

TMAP_TYPE = "tilecore_tmap_t"
TMAP_DECL = f"struct __align__(64) {TMAP_TYPE} {{ unsigned long long opaque[16]; }};"
TMAP_BYTES = 128
_CACHE_SIZE = 256

# CUtensorMapDataType by element width where the bits are all that matters (TMA only moves
# them): fp8 and int8 travel as UINT8; float types keep their own enum.
_DTYPE_ENUM = {"uint8": 0, "int8": 0, "float8_e4m3fn": 0, "float8_e5m2": 0, "bool": 0,
               "uint16": 1, "int16": 1, "uint32": 2, "int32": 3, "int64": 5, "float16": 6,
               "float32": 7, "float64": 8, "bfloat16": 9}
_SWIZZLE_ENUM = {0: 0, 32: 1, 64: 2, 128: 3}  # CU_TENSOR_MAP_SWIZZLE_{NONE,32B,64B,128B}
# CU_TENSOR_MAP_L2_PROMOTION_L2_128B / _256B by bytes (the option tilecore.tma_l2_promotion)
_L2_PROMOTION = {128: 2, 256: 3}
_OOB_FILL_ZERO = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: elements outside the tensor read as 0


class TensorMapSpec(NamedTuple):
    """One tensor-map parameter: the tensor (index among the function's parameters), its
    dtype, the box (extents per dimension, outermost first), the swizzle span in bytes and the
    L2 promotion in bytes (the compile option `tma_l2_promotion`).

    A NamedTuple, not a frozen dataclass: a compile-cache hit creates this class, and a
    dataclass costs about 1 ms to create (its methods are generated and compiled)."""

    param: int
    dtype: DType
    box: tuple
    swizzle: int
    l2_promotion: int = 128


def tensor_map_specs(kernel, params) -> tuple[TensorMapSpec, ...]:
    """The distinct tensor maps of `kernel` (a ThreadKernel) in first-use order; `params` are
    the function's parameter buffers."""
    # the thread IR is imported by the build, not by loading a cached kernel (TensorMapSpec)
    from tilecore.ir.thread import TmaLoad, TmaStore

    index = {id(p): i for i, p in enumerate(params)}
    out: list[TensorMapSpec] = []
    for n in walk(kernel.body):
        if isinstance(n, (TmaLoad, TmaStore)):
            if id(n.tensor) not in index:
                raise TileInternalError(f"TMA tensor {n.tensor.name} is not a kernel parameter")
            spec = TensorMapSpec(index[id(n.tensor)], n.tensor.dtype, tuple(n.box), n.swizzle)
            if spec not in out:
                out.append(spec)
    return tuple(out)


def module_tensor_maps(module) -> tuple[TensorMapSpec, ...]:
    """`tensor_map_specs` of a lowered module's kernel (() for a module without one), each with
    the L2 promotion of the module's options (`tma_l2_promotion`)."""
    from tilecore.ir.thread import find_kernel

    kernel = find_kernel(module.func.body)
    if kernel is None:
        return ()
    promotion = getattr(module.attrs.options, "tma_l2_promotion", 128)
    return tuple(s._replace(l2_promotion=promotion) for s in tensor_map_specs(kernel, module.func.params))


def spec_of(specs: tuple, node, params) -> int:
    """The index in `specs` of the map a TmaLoad / TmaStore uses."""
    index = next(i for i, p in enumerate(params) if p is node.tensor)
    return specs.index(TensorMapSpec(index, node.tensor.dtype, tuple(node.box), node.swizzle))


_cache: OrderedDict = OrderedDict()


def _encode(key: tuple) -> bytes:
    """The 128 bytes of one tensor map (cuTensorMapEncodeTiled); `key` as built by `encode`."""
    from .launch import _driver, check

    addr, dims, strides, enum, box, swizzle, promotion = key
    d = _driver()
    u64, u32 = d.cuuint64_t, d.cuuint32_t
    tmap = check(d.cuTensorMapEncodeTiled(
        d.CUtensorMapDataType(enum), len(dims), addr, [u64(x) for x in dims], [u64(x) for x in strides],
        [u32(x) for x in box], [u32(1)] * len(dims), d.CUtensorMapInterleave(0),
        d.CUtensorMapSwizzle(_SWIZZLE_ENUM[swizzle]), d.CUtensorMapL2promotion(_L2_PROMOTION[promotion]),
        d.CUtensorMapFloatOOBfill(_OOB_FILL_ZERO)), "cuTensorMapEncodeTiled")
    return ctypes.string_at(tmap.getPtr(), TMAP_BYTES)


def encode(tensor, spec: TensorMapSpec, what: str) -> bytes:
    """The tensor map of torch tensor `tensor` (kernel argument `what`) for `spec`, cached."""
    if tensor.numel() == 0:  # an empty grid never reads it (and the driver rejects size 0)
        return bytes(TMAP_BYTES)
    item = spec.dtype.itemsize
    rank = tensor.dim()
    addr = tensor.data_ptr()
    dims = tuple(int(tensor.shape[d]) for d in reversed(range(rank)))  # innermost first
    strides = tuple(int(tensor.stride(d)) * item for d in reversed(range(rank - 1)))
    if addr % 16 or any(s % 16 for s in strides):
        raise TileCallError(f"argument {what} cannot be read by TMA: its address and row strides must "
                            f"be multiples of 16 bytes (address {addr:#x}, strides {strides} bytes)",
                            caller_loc(), hint="pass a tensor allocated by torch (not an offset view), "
                                               "or compile for sm_80")
    key = (addr, dims, strides, _DTYPE_ENUM[spec.dtype.name], tuple(reversed(spec.box)), spec.swizzle,
           spec.l2_promotion)
    out = _cache.get(key)
    if out is None:
        out = _cache[key] = _encode(key)
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return out


def launch_params(specs: tuple, args: list, names: list) -> list:
    """ctypes buffers holding the tensor maps of one launch, in parameter order (what
    `LoadedKernel.launch` appends after the ordinary parameters)."""
    out = []
    for s in specs:
        buf = (ctypes.c_ubyte * TMAP_BYTES).from_buffer_copy(encode(args[s.param], s, names[s.param]))
        out.append(buf)
    return out
