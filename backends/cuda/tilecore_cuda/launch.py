"""Load cubins and launch kernels with the CUDA driver API (cuda-bindings) on torch's stream.

torch owns the device's primary context; this module makes that context current, loads each
cubin once per device, and launches on ``torch.cuda.current_stream()`` so tilecore kernels order
correctly with the surrounding torch work without any synchronization.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from tilecore.errors import TileCallError, TileInternalError, caller_loc

if TYPE_CHECKING:  # tilecore.dtypes imports NumPy: target discovery (gpu_visible) must not
    from tilecore import dtypes as dt

# Largest dynamic shared memory a block may use without opting in (cuFuncSetAttribute).
DEFAULT_SMEM_LIMIT = 48 * 1024

_CTYPES = {
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
    "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32, "bool": ctypes.c_bool, "float32": ctypes.c_float,
    "float64": ctypes.c_double,
}


def _driver():
    from .toolchain import cuda_bindings

    return cuda_bindings("driver")


def check(res, what: str):
    """Raise on a failed driver call; return the call's value(s) otherwise."""
    err = res[0] if isinstance(res, tuple) else res
    if int(err) != 0:
        driver = _driver()
        _, name = driver.cuGetErrorName(driver.CUresult(int(err)))
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
    """`sm_XY` of device `index`; Hopper (9.0) gets `sm_90a` so wgmma-era code may be used.

    Asked of torch when it has initialised CUDA already (a script that made tensors: no
    cuda-bindings import on a compile-cache hit), else of the driver."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        major, minor = torch.cuda.get_device_capability(index)
        arch = f"sm_{major}{minor}"
        return arch + "a" if arch == "sm_90" else arch
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


def gpu_visible() -> tuple[bool, str]:
    """Whether an NVIDIA GPU is visible to this process, answered without initialising CUDA
    (no cuInit, no torch): CUDA_VISIBLE_DEVICES, the driver library, and on Linux the device
    nodes /dev/nvidia<N>. Elsewhere (or under WSL, where there are no such nodes) the driver is
    asked (`device_count`)."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None and vis.strip() in ("", "-1"):
        return False, "CUDA_VISIBLE_DEVICES hides every GPU"
    if sys.platform.startswith("linux") and not os.path.exists("/dev/dxg"):
        import glob

        if not glob.glob("/dev/nvidia[0-9]*"):
            return False, "no CUDA device on this machine (no /dev/nvidia<N>)"
        if _libcuda() is None:
            return False, "the CUDA driver library (libcuda.so.1) cannot be loaded"
        return True, ""
    if device_count() == 0:
        return False, "no CUDA device (or no cuda-bindings / driver) on this machine"
    return True, ""


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


class ParamSpec(NamedTuple):
    """One kernel parameter: a tensor pointer (`dtype` of its elements), a scalar by value, or
    (`tmap`, a `tensormap.TensorMapSpec`) a TMA tensor map of tensor argument `tmap.param`.

    ParamSpec and Packer are NamedTuples, not frozen dataclasses: a compile-cache hit creates
    these classes, and a dataclass costs about 1 ms to create (generated, compiled methods)."""

    name: str
    dtype: dt.DType
    is_pointer: bool
    tmap: object = None


# ----------------------------------------------------------------------------- parameter buffer
class Packer(NamedTuple):
    """How one kernel parameter sits in the parameter buffer: `size` bytes aligned to `align`,
    written by `make_setter(slot_address) -> setter(value)`; `per_call` parameters (pointers)
    are written on every launch, the others (sizes) once per call signature."""

    size: int
    align: int
    make_setter: Callable[[int], Callable[[object], None]]
    per_call: bool


def _pointer_setter(address: int):
    slot = ctypes.c_uint64.from_address(address)

    def set_pointer(t, _slot=slot):
        _slot.value = t.data_ptr()

    return set_pointer


def _scalar_setter(ctype):
    def make(address: int):
        slot = ctype.from_address(address)

        def set_scalar(v, _slot=slot):
            _slot.value = v

        return set_scalar

    return make


def pointer_packer(spec: ParamSpec) -> Packer | None:
    """A global tensor: its device address (8 bytes), written per launch."""
    return Packer(8, 8, _pointer_setter, True) if spec.is_pointer else None


def scalar_packer(spec: ParamSpec) -> Packer | None:
    """A by-value scalar (a symbolic size) of its C type."""
    if spec.is_pointer:
        return None
    ctype = _CTYPES[spec.dtype.name]
    return Packer(ctypes.sizeof(ctype), ctypes.alignment(ctype), _scalar_setter(ctype), False)


def _tensor_map_setter(spec: ParamSpec):
    """setter(tensor) writing the 128-byte tensor map of `tensor` into the slot, re-encoded
    (tensormap.encode, itself cached) only when the tensor's address changed: within one call
    signature shape, strides and dtype are fixed, so the address is all a map depends on."""
    from .tensormap import TMAP_BYTES, encode

    def make(address: int):
        last = [None]

        def set_map(t, _last=last):
            p = t.data_ptr()
            if p != _last[0]:
                ctypes.memmove(address, encode(t, spec.tmap, spec.name), TMAP_BYTES)
                _last[0] = p

        return set_map

    return make


def tensor_map_packer(spec: ParamSpec) -> Packer | None:
    """A TMA tensor map (`CUtensorMap`, 128 bytes, 64-byte aligned, passed by value as a
    `__grid_constant__` parameter), written per launch from its tensor argument."""
    if spec.tmap is None:
        return None
    return Packer(128, 64, _tensor_map_setter(spec), True)


# Asked in order for each parameter; the first non-None Packer lays it out. A new kind of
# parameter is one function inserted here.
PACKERS: list[Callable[[ParamSpec], Packer | None]] = [tensor_map_packer, pointer_packer, scalar_packer]


class ParamBuffer:
    """The memory `cuLaunchKernel` reads a kernel's arguments from, laid out once per call
    signature: one aligned slot per parameter and the array of slot addresses (`address`).

    The driver copies the arguments when the launch is enqueued, so one buffer serves every
    launch (a CUDA graph capture included); `setters[i]` writes parameter i."""

    def __init__(self, specs: tuple[ParamSpec, ...], packers=None):
        packers = PACKERS if packers is None else packers
        layout, offset = [], 0
        for s in specs:
            pk = next((p for p in (f(s) for f in packers) if p is not None), None)
            if pk is None:
                raise TileInternalError(f"no packer lays out kernel parameter {s.name} ({s.dtype})")
            offset = -(-offset // pk.align) * pk.align
            layout.append((pk, offset))
            offset += pk.size
        # 64 bytes of slack so the first slot can be aligned to 64 whatever malloc returned
        self._memory = ctypes.create_string_buffer(max(offset, 8) + 64)
        base = -(-ctypes.addressof(self._memory) // 64) * 64
        self.specs = specs
        self.packers = tuple(pk for pk, _ in layout)
        self.setters = tuple(pk.make_setter(base + off) for pk, off in layout)
        self._ptrs = (ctypes.c_void_p * max(1, len(specs)))(*[base + off for _, off in layout])
        self.address = ctypes.addressof(self._ptrs)


# ----------------------------------------------------------------------------- the launch call
@functools.lru_cache(maxsize=1)
def _libcuda():
    """The driver library (libcuda) as a ctypes `PyDLL`, or None where it cannot be loaded.
    A PyDLL call keeps the GIL: releasing and retaking it would cost more than the
    microseconds the driver takes to enqueue a launch."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            return ctypes.PyDLL(name)
        except OSError:
            continue
    return None


@functools.lru_cache(maxsize=1)
def _launch_ex():
    """`cuLaunchKernelEx` of the driver library, or None (no library, or a driver before CUDA
    12.0: the cuda-bindings wrapper is used then). It takes four arguments (a prebuilt
    `CUlaunchConfig`, the function, the parameter array, NULL) where `cuLaunchKernel` takes
    eleven: ctypes converts each argument on every call, so this is the cheaper call."""
    lib = _libcuda()
    fn = getattr(lib, "cuLaunchKernelEx", None) if lib is not None else None
    if fn is None:
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = None  # arguments are passed as ready-made ctypes instances (see Launch)
    return fn


class LaunchConfig(ctypes.Structure):
    """`CUlaunchConfig` of cuda.h: grid, block, dynamic shared memory, stream, no attributes."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


# CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION of cuda.h
PROGRAMMATIC_STREAM_SERIALIZATION = 6
GRID_WAIT = "griddepcontrol.wait"  # in a kernel's source: it may be launched as a dependent


class LaunchAttribute(ctypes.Structure):
    """`CUlaunchAttribute` of cuda.h: the id, padding to 8 bytes, a 64-byte value union (the
    attributes used here take one unsigned int, its first member)."""

    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint),
                ("value_pad", ctypes.c_char * 60)]


def programmatic_attributes():
    """A one-element `CUlaunchAttribute` array allowing programmatic stream serialization: the
    grid may start before the previous kernel in the stream has completed (its blocks become
    resident as that kernel's blocks exit). Only for kernels whose first statement is
    `griddepcontrol.wait` (render.CudaRenderer.grid_dependency_wait), which then holds every
    thread until the previous grid has completed and its memory is visible."""
    attrs = (LaunchAttribute * 1)()
    attrs[0].id = PROGRAMMATIC_STREAM_SERIALIZATION
    attrs[0].value = 1
    return attrs


def raw_stream_getter():
    """`index -> cudaStream_t` (an int) of torch's current stream on device `index`; the private
    fast accessor when torch has it (0.2 us against 3 us for torch.cuda.current_stream)."""
    import torch

    fast = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if fast is not None:
        return fast
    return lambda index: torch.cuda.current_stream(index).cuda_stream


class Launch:
    """One prepared launch of a kernel for one call signature: function, grid, block, shared
    memory and parameter buffer fixed; `__call__(args)` writes the tensor pointers and enqueues
    the kernel on torch's current stream of `device` (capturable into a CUDA graph)."""

    def __init__(self, function, device: int, grid, block, smem_bytes: int,
                 specs: tuple[ParamSpec, ...], static: dict[int, object], programmatic: bool = False):
        self.device = device
        self.params = ParamBuffer(specs)
        for i, v in static.items():
            self.params.setters[i](v)
        # tensor maps are written from their tensor argument (`tmap.param`), after the pointers
        self.tmaps = tuple((s.tmap.param, self.params.setters[i]) for i, s in enumerate(specs)
                           if s.tmap is not None)
        self.per_call = tuple((i, self.params.setters[i]) for i, pk in enumerate(self.params.packers)
                              if pk.per_call and specs[i].tmap is None)
        # the usual layout (tensor pointers first, then sizes): the pointer slots are one
        # 8-byte array written in a single loop, without a setter call per tensor
        n_ptr = len(self.per_call)
        offsets = [self.params._ptrs[i] - self.params._ptrs[0] for i in range(n_ptr)]
        self._pointers = None
        plain = all(pk.make_setter is _pointer_setter for pk in self.params.packers[:n_ptr])
        if n_ptr and plain and [i for i, _ in self.per_call] == list(range(n_ptr)) and \
                offsets == [8 * i for i in range(n_ptr)]:
            self._pointers = (ctypes.c_uint64 * n_ptr).from_address(self.params._ptrs[0])
            self._n_ptr = n_ptr
        self._function = function
        self._dims = (*grid, *block, smem_bytes)
        # cuLaunchKernelEx(&config, f, kernelParams, NULL): every argument a C value made once;
        # a call writes only the stream into the config
        self._config = LaunchConfig(*(int(v) for v in self._dims), None, None, 0)
        self._attrs = None
        if programmatic:  # a dependent launch (the kernel waits for the previous grid itself)
            self._attrs = programmatic_attributes()
            self._config.attrs = ctypes.addressof(self._attrs)
            self._config.numAttrs = 1
        self._args = (ctypes.c_void_p(ctypes.addressof(self._config)), ctypes.c_void_p(int(function)),
                      ctypes.c_void_p(self.params.address), None)
        self._empty = min(grid) == 0  # a zero-size dimension: nothing to do
        self._stream = raw_stream_getter()
        self._cu = _launch_ex()
        self._lock = threading.Lock()  # the buffer is shared: fill + enqueue is one step

    def __call__(self, args) -> None:
        """Launch on `args` (every parameter that is a tensor, in order; sizes are fixed)."""
        if self._empty:
            return
        with self._lock:
            ptrs = self._pointers
            if ptrs is not None:
                for i in range(self._n_ptr):  # args may go on with the sizes (LoadedKernel.launch)
                    ptrs[i] = args[i].data_ptr()
            else:
                for i, setter in self.per_call:
                    setter(args[i])
            for i, setter in self.tmaps:
                setter(args[i])
            stream = self._stream(self.device)
            if self._cu is not None:
                self._config.hStream = stream
                rc = self._cu(*self._args)
                if rc != 0:  # a thread where torch made no (or another device's) context current
                    make_current(self.device)
                    rc = self._cu(*self._args)
                if rc != 0:
                    check(rc, "cuLaunchKernelEx")
                return
            driver = _driver()
            make_current(self.device)
            check(driver.cuLaunchKernel(self._function, *self._dims, driver.CUstream(stream),
                                        self.params.address, 0), "cuLaunchKernel")


    def entry(self):
        """The cheapest function doing what `__call__` does for this launch: for the usual
        case (tensor pointers first, no tensor maps, the driver library loaded) a closure over
        the fixed values (no attribute lookups per call), else `__call__` itself. A prepared
        call plan (`CudaArtifact.launcher`) calls this."""
        if self._empty or self._pointers is None or self.tmaps or self._cu is None:
            return self.__call__
        ptrs, slots, lock, config = self._pointers, range(self._n_ptr), self._lock, self._config
        stream_of, device, cu, c_args = self._stream, self.device, self._cu, self._args

        def launch(args) -> None:
            with lock:
                for i in slots:
                    ptrs[i] = args[i].data_ptr()
                config.hStream = stream_of(device)
                rc = cu(*c_args)
                if rc != 0:  # a thread where torch made no (or another device's) context current
                    make_current(device)
                    rc = cu(*c_args)
                if rc != 0:
                    check(rc, "cuLaunchKernelEx")

        launch.prepared = self  # what it launches (benchmarks/host_overhead.py times it alone)
        return launch


class LoadedKernel:
    """A cubin's entry point, loaded lazily once per device."""

    def __init__(self, cubin: bytes, entry: str, smem_bytes: int, programmatic: bool = False):
        self.cubin = cubin
        self.entry = entry
        self.smem_bytes = smem_bytes
        # prepared launches allow programmatic stream serialization (a kernel that starts with
        # griddepcontrol.wait); a plain attribute, so an A/B run can launch the same cubin both ways
        self.programmatic = programmatic
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

    def prepare(self, index: int, grid, block, specs: tuple[ParamSpec, ...],
                static: dict[int, object]) -> Launch:
        """A Launch on device `index` with `static` parameter values (position -> value)."""
        return Launch(self.function(index), index, grid, block, self.smem_bytes, specs, static,
                      self.programmatic)

    def launch(self, grid: tuple[int, int, int], block: tuple[int, int, int], params: list,
               specs: tuple[ParamSpec, ...], extra: list = ()) -> None:
        """Launch once on `params` (checked: CUDA tensors on one device, contiguous), following
        `specs`; the per-signature path is `prepare`. `extra`: ctypes objects passed by value
        after the ordinary parameters (TMA tensor maps, tensormap.py); the prepared path writes
        them itself (`tensor_map_packer`)."""
        index = _tensor_device(params, specs)
        if not extra:
            static = {i: p for i, (p, s) in enumerate(zip(params, specs)) if not s.is_pointer}
            self.prepare(index, grid, block, specs, static)(params)
            return
        import torch

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
                                caller_loc(), hint=f"move every tensor to one device: .to('cuda:{index}')")
    if index is None:
        import torch

        index = torch.cuda.current_device()
    return index
