"""The HIP runtime through ctypes: load a code object, find its kernel, launch it.

Only the module API of `libamdhip64` is used (`hipModuleLoadData`, `hipModuleGetFunction`,
`hipModuleLaunchKernel`, plus `hipGetDeviceCount`, `hipSetDevice` and `hipGetErrorString`), so
no ROCm Python package is needed; tensors come from torch's ROCm build, whose `torch.cuda`
device and streams are HIP's. The library is found as $TILECORE_HIP_LIBRARY, else
`libamdhip64.so` on the loader path or under $ROCM_PATH / /opt/rocm.

Written and unit-tested against a stand-in library with the same C signatures
(tests/test_hip_runtime.py); it has not run on an AMD GPU here (no AMD GPU is reachable).
"""

from __future__ import annotations

import ctypes
import functools
import os

from tilecore.errors import TileTargetError

HIP_SUCCESS = 0
_NAMES = ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5")


def _candidates() -> list[str]:
    forced = os.environ.get("TILECORE_HIP_LIBRARY")
    if forced:
        return [forced]
    roots = [r for r in (os.environ.get("ROCM_PATH"), "/opt/rocm") if r]
    return [*_NAMES, *(os.path.join(r, "lib", n) for r in roots for n in _NAMES)]


@functools.cache
def library() -> tuple[ctypes.CDLL | None, str]:
    """(the loaded libamdhip64 with argument types declared, "") or (None, why not)."""
    for name in _candidates():
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        _declare(lib)
        return lib, ""
    return None, "the HIP runtime (libamdhip64) is not installed on this machine"


def _declare(lib) -> None:
    """C signatures of the functions used (ctypes would otherwise pass ints as 32-bit)."""
    p, i, u = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
    sigs = {
        "hipGetDeviceCount": (i, [ctypes.POINTER(i)]),
        "hipSetDevice": (i, [i]),
        "hipGetErrorString": (ctypes.c_char_p, [i]),
        "hipModuleLoadData": (i, [ctypes.POINTER(p), p]),
        "hipModuleGetFunction": (i, [ctypes.POINTER(p), p, ctypes.c_char_p]),
        "hipModuleUnload": (i, [p]),
        "hipModuleLaunchKernel": (i, [p, u, u, u, u, u, u, u, p, ctypes.POINTER(p), ctypes.POINTER(p)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


def check(lib, err: int, what: str) -> None:
    """Raise a TileTargetError naming the HIP error of a failed call."""
    if err != HIP_SUCCESS:
        msg = lib.hipGetErrorString(err)
        text = msg.decode() if msg else "unknown error"
        raise TileTargetError(f"{what} failed: HIP error {err} ({text})",
                          hint="check the device and driver (rocm-smi); the error text says what failed")


def device_count() -> tuple[int, str]:
    """(number of AMD GPUs the runtime sees, "") or (0, why none)."""
    lib, why = library()
    if lib is None:
        return 0, why
    n = ctypes.c_int(0)
    if lib.hipGetDeviceCount(ctypes.byref(n)) != HIP_SUCCESS or n.value == 0:
        return 0, "the HIP runtime sees no AMD GPU on this machine"
    return n.value, ""


def _require_lib():
    lib, why = library()
    if lib is None:
        raise TileTargetError(f"cannot run a hip kernel: {why}",
                              hint="compile with tilecore.jit(..., target='hip:<gfx>') and read "
                                   "get_kernel_source(), or run it on target='emu:hip:<gfx>'")
    return lib


# Kernel argument ctypes by dtype name; tensors are passed as device pointers.
_SCALAR = {"int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint32": ctypes.c_uint32,
           "int16": ctypes.c_int16, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8,
           "uint16": ctypes.c_uint16, "float32": ctypes.c_float, "float64": ctypes.c_double,
           "bool": ctypes.c_bool}


def pack_args(values: list, specs) -> tuple:
    """(keep-alive ctypes values, `void**` array) for hipModuleLaunchKernel's kernelParams:
    `specs` are KernelParams (pointer parameters take integer device addresses)."""
    cvals = []
    for v, s in zip(values, specs):
        if s.is_pointer:
            cvals.append(ctypes.c_void_p(int(v)))
        else:
            cvals.append(_SCALAR[s.dtype.name](v))
    arr = (ctypes.c_void_p * max(1, len(cvals)))()
    for k, c in enumerate(cvals):
        arr[k] = ctypes.cast(ctypes.byref(c), ctypes.c_void_p)
    return cvals, arr


class HipModule:
    """One code object loaded into the current device's context, with its kernel `entry`."""

    def __init__(self, code: bytes, entry: str):
        self.lib = lib = _require_lib()
        self._image = ctypes.create_string_buffer(code, len(code))  # alive while loaded
        self.module = ctypes.c_void_p()
        check(lib, lib.hipModuleLoadData(ctypes.byref(self.module), self._image), "hipModuleLoadData")
        self.function = ctypes.c_void_p()
        check(lib, lib.hipModuleGetFunction(ctypes.byref(self.function), self.module, entry.encode()),
              f"hipModuleGetFunction({entry})")
        self.entry = entry

    def launch(self, grid: tuple, block: tuple, values: list, specs, stream: int = 0,
               shared_bytes: int = 0) -> None:
        """Launch on `grid` x `block` with `values` (device addresses and scalars, per `specs`)
        on `stream` (a hipStream_t as int; 0 is the null stream)."""
        keep, arr = pack_args(values, specs)
        err = self.lib.hipModuleLaunchKernel(
            self.function, *(int(g) for g in grid), *(int(b) for b in block), int(shared_bytes),
            ctypes.c_void_p(stream), ctypes.cast(arr, ctypes.POINTER(ctypes.c_void_p)), None)
        del keep
        check(self.lib, err, f"hipModuleLaunchKernel({self.entry})")
