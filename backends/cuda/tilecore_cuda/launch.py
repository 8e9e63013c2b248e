"""Load cubins and launch kernels with the CUDA driver API (cuda-bindings) on torch's stream.

torch owns the device's primary context; this module makes that context current, loads each
cubin once per device, and launches on ``torch.cuda.current_stream()`` so tilecore kernels order
correctly with the surrounding torch work without any synchronization.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
from dataclasses import dataclass

from tilecore import dtypes as dt
from tilecore.errors import TileCallError, TileInternalError, caller_loc

# Largest dynamic shared memory a block may use without opting in (cuFuncSetAttribute).
DEFAULT_SMEM_LIMIT = 48 * 1024

_CTYPES = {
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
    "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32, "bool": ctypes.c_bool, "float32": ctypes.c_float,
    "float64": ctypes.c_double,
}


def _driver():
    from .build import cuda_bindings

    return cuda_bindings("driver")


def check(res, what: str):
    """Raise on a failed driver call; return the call's value(s) otherwise."""
    err = res[0] if isinstance(res, tuple) else res
    if int(err) != 0:
        driver = _driver()
        _, name = driver.cuGetErrorName(err)
        raise TileInternalError(f"CUDA driver call {what} failed: "
                                f"{name.decode() if isinstance(name, bytes) else err}")
    if isinstance(res, tuple):
        return res[1] if len(res) == 2 else res[1:]
    return None


@functools.cache
def _primary_context(index: int):
    """Retain device `index`'s primary context (the one torch uses) once per process."""
    driver = _driver()
    check(driver.cuInit(0), "cuInit")
    dev = check(driver.cuDeviceGet(index), "cuDeviceGet")
    return check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")


def make_current(index: int) -> None:
    """Make device `index`'s primary context current on this thread."""
    driver = _driver()
    ctx = _primary_context(index)
    cur = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(cur) != int(ctx):
        check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


@functools.cache
def device_arch(index: int) -> str:
    """`sm_XY` of device `index`; Hopper (9.0) gets `sm_90a` so wgmma-era code may be used."""
    driver = _driver()
    check(driver.cuInit(0), "cuInit")
    dev = check(driver.cuDeviceGet(index), "cuDeviceGet")
    attr = driver.CUdevice_attribute
    major = check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                  "cuDeviceGetAttribute")
    minor = check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                  "cuDeviceGetAttribute")
    arch = f"sm_{major}{minor}"
    return arch + "a" if arch == "sm_90" else arch


def device_count() -> int:
    """Number of CUDA devices the driver sees (0 when there is no usable driver)."""
    try:
        # Without cuda-bindings there is nothing to ask (and torch need not be imported).
        if importlib.util.find_spec("cuda.bindings") is None:
            return 0
        driver = _driver()
        if int(driver.cuInit(0)[0]) != 0:
            return 0
        err, n = driver.cuDeviceGetCount()
        return int(n) if int(err) == 0 else 0
    except Exception:  # no cuda-bindings, or no libcuda on this machine
        return 0


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter: a tensor pointer (`dtype` of its elements) or a scalar by value."""

    name: str
    dtype: dt.DType
    is_pointer: bool


class LoadedKernel:
    """A cubin's entry point, loaded lazily once per device."""

    def __init__(self, cubin: bytes, entry: str, smem_bytes: int):
        self.cubin = cubin
        self.entry = entry
        self.smem_bytes = smem_bytes
        self._funcs: dict[int, object] = {}

    def function(self, index: int):
        """The CUfunction on device `index` (loading the module the first time)."""
        f = self._funcs.get(index)
        if f is not None:
            return f
        driver = _driver()
        make_current(index)
        mod = check(driver.cuModuleLoadData(self.cubin), "cuModuleLoadData")
        f = check(driver.cuModuleGetFunction(mod, self.entry.encode()), "cuModuleGetFunction")
        if self.smem_bytes > DEFAULT_SMEM_LIMIT:
            attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(driver.cuFuncSetAttribute(f, attr, self.smem_bytes), "cuFuncSetAttribute")
        self._funcs[index] = f
        return f

    def launch(self, grid: tuple[int, int, int], block: tuple[int, int, int], params: list,
               specs: tuple[ParamSpec, ...], extra: list = ()) -> None:
        """Launch on torch's current stream of the tensors' device; `params` follow `specs`.
        `extra`: ctypes objects passed by value after them (TMA tensor maps, tensormap.py)."""
        import torch

        index = _tensor_device(params, specs)
        f = self.function(index)
        make_current(index)
        holders = []
        for p, s in zip(params, specs):
            if s.is_pointer:
                holders.append(ctypes.c_void_p(p.data_ptr()))
            else:
                holders.append(_CTYPES[s.dtype.name](p))
        holders.extend(extra)
        ptrs = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.addressof(h) for h in holders])
        stream = torch.cuda.current_stream(index).cuda_stream
        driver = _driver()
        if min(grid) == 0:
            return  # an empty grid (a zero-size dimension) has nothing to do
        check(driver.cuLaunchKernel(f, *grid, *block, self.smem_bytes, driver.CUstream(stream),
                                    ctypes.addressof(ptrs), 0), "cuLaunchKernel")


def _tensor_device(params: list, specs: tuple[ParamSpec, ...]) -> int:
    """The one CUDA device every tensor argument lives on, checked."""
    index = None
    for p, s in zip(params, specs):
        if not s.is_pointer:
            continue
        dev = getattr(p, "device", None)
        if dev is None or dev.type != "cuda":
            raise TileCallError(f"argument {s.name} is on {dev}, the cuda target needs CUDA tensors",
                                caller_loc(), hint="move it with .cuda()")
        if not p.is_contiguous():
            raise TileCallError(f"argument {s.name} is not contiguous", caller_loc(),
                                hint="pass x.contiguous()")
        if index is None:
            index = dev.index if dev.index is not None else 0
        elif dev.index != index:
            raise TileCallError(f"argument {s.name} is on cuda:{dev.index}, others on cuda:{index}",
                                caller_loc())
    if index is None:
        import torch

        index = torch.cuda.current_device()
    return index
