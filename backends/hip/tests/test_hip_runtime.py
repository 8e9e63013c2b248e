"""The ctypes HIP runtime path up to the device: against a stand-in `libamdhip64` (C, built
here with the same signatures) that records what it is given. No AMD GPU is reachable here, so
this is as far as the runtime is tested; the README says so."""

from __future__ import annotations

import ctypes
import subprocess

import pytest
from hip_test_util import example, needs_clang
from tilecore_hip import build, runtime

import tilecore
from tilecore.codegen.spec import KernelParam
from tilecore.errors import TileTargetError

STAND_IN = r"""
#include <string.h>
typedef int hipError_t;
static int devices = 1;
static unsigned char image_head[4];
static unsigned long image_seen;
static char function_name[128];
static unsigned launch_dims[6], launch_shared;
static void* launch_stream;
static unsigned long long param_ptr;
static int param_int;
static long long param_ll;
void stand_in_set_devices(int n) { devices = n; }
const unsigned char* stand_in_image_head(void) { return image_head; }
const char* stand_in_function(void) { return function_name; }
const unsigned* stand_in_dims(void) { return launch_dims; }
unsigned stand_in_shared(void) { return launch_shared; }
void* stand_in_stream(void) { return launch_stream; }
unsigned long long stand_in_param_ptr(void) { return param_ptr; }
int stand_in_param_int(void) { return param_int; }
long long stand_in_param_ll(void) { return param_ll; }
hipError_t hipGetDeviceCount(int* n) { *n = devices; return devices ? 0 : 100; }
hipError_t hipSetDevice(int d) { return 0; }
const char* hipGetErrorString(hipError_t e) { return e == 500 ? "hipErrorNotFound" : "hipErrorNoDevice"; }
hipError_t hipModuleLoadData(void** module, const void* image) {
  memcpy(image_head, image, 4); image_seen = 1; *module = (void*)0x1234; return 0;
}
hipError_t hipModuleGetFunction(void** fn, void* module, const char* name) {
  if (module != (void*)0x1234) return 400;
  if (strcmp(name, "missing") == 0) return 500;
  strncpy(function_name, name, 127); *fn = (void*)0x5678; return 0;
}
hipError_t hipModuleUnload(void* module) { return 0; }
hipError_t hipModuleLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
    unsigned by, unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  if (f != (void*)0x5678 || extra) return 1;
  launch_dims[0] = gx; launch_dims[1] = gy; launch_dims[2] = gz;
  launch_dims[3] = bx; launch_dims[4] = by; launch_dims[5] = bz;
  launch_shared = shared; launch_stream = stream;
  param_ptr = *(unsigned long long*)params[0];
  param_int = *(int*)params[1];
  param_ll = *(long long*)params[2];
  return 0;
}
"""


@pytest.fixture()
def stand_in(tmp_path, monkeypatch):
    src, so = tmp_path / "hip.c", tmp_path / "libamdhip64.so"
    src.write_text(STAND_IN)
    subprocess.run([build.tool("clang++"), "-x", "c", "-O1", "-shared", "-fPIC", str(src), "-o", str(so)],
                   check=True, capture_output=True)
    monkeypatch.setenv("TILECORE_HIP_LIBRARY", str(so))
    runtime.library.cache_clear()
    yield ctypes.CDLL(str(so))
    runtime.library.cache_clear()


@needs_clang
def test_load_and_launch_pass_everything_through(stand_in):
    assert runtime.device_count() == (1, "")
    code = b"\x7fELF" + bytes(60)
    mod = runtime.HipModule(code, "gemm")
    stand_in.stand_in_function.restype = ctypes.c_char_p
    assert stand_in.stand_in_function() == b"gemm"
    stand_in.stand_in_image_head.restype = ctypes.POINTER(ctypes.c_ubyte * 4)
    assert bytes(stand_in.stand_in_image_head().contents) == b"\x7fELF"
    from tilecore import dtypes as dt

    specs = (KernelParam("A", dt.float16, True), KernelParam("n", dt.int32, False),
             KernelParam("m", dt.int64, False))
    mod.launch((7, 2, 1), (256, 1, 1), [0xDEAD0000BEEF, -5, 2**40 + 3], specs, stream=0x42)
    stand_in.stand_in_dims.restype = ctypes.POINTER(ctypes.c_uint * 6)
    assert list(stand_in.stand_in_dims().contents) == [7, 2, 1, 256, 1, 1]
    stand_in.stand_in_stream.restype = ctypes.c_void_p
    stand_in.stand_in_param_ptr.restype = ctypes.c_ulonglong
    stand_in.stand_in_param_ll.restype = ctypes.c_longlong
    assert stand_in.stand_in_stream() == 0x42 and stand_in.stand_in_shared() == 0
    assert stand_in.stand_in_param_ptr() == 0xDEAD0000BEEF
    assert stand_in.stand_in_param_int() == -5 and stand_in.stand_in_param_ll() == 2**40 + 3


@needs_clang
def test_errors_name_the_hip_error(stand_in):
    with pytest.raises(TileTargetError, match=r"hipModuleGetFunction\(missing\).*hipErrorNotFound"):
        runtime.HipModule(b"\x7fELF" + bytes(60), "missing")


@needs_clang
def test_no_device_is_a_reason_not_a_crash(stand_in):
    stand_in.stand_in_set_devices(0)
    n, why = runtime.device_count()
    assert n == 0 and "no AMD GPU" in why


def test_missing_library_is_explained(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECORE_HIP_LIBRARY", str(tmp_path / "absent.so"))
    runtime.library.cache_clear()
    try:
        assert runtime.library()[0] is None and "libamdhip64" in runtime.library()[1]
        with pytest.raises(TileTargetError, match="libamdhip64"):
            runtime.HipModule(b"", "k")
    finally:
        runtime.library.cache_clear()


class FakeTensor:
    def __init__(self, address: int):
        self.address = address

    def data_ptr(self) -> int:
        return self.address


@needs_clang
def test_artifact_launch_arguments(stand_in):
    """The artifact hands the kernel its grid, block and (pointers, sizes) in parameter order,
    and the stand-in receives exactly those."""
    mod, func, _ = example("elementwise_add", {"n": 1000})
    art = tilecore.jit(func, out_idx=mod.OUT_IDX, target="hip:gfx942").artifact
    names = [p.name for p in art.rendered.params]
    assert names[-1] == "n" and [p.is_pointer for p in art.rendered.params] == [True] * 3 + [False]
    values = art.launch_values([FakeTensor(0x1000), FakeTensor(0x2000), FakeTensor(0x3000)], {"n": 1000})
    assert values == [0x1000, 0x2000, 0x3000, 1000]
    block = art.rendered.block
    grid = art.launch_grid({"n": 1000})
    assert grid[1:] == (1, 1) and (grid[0] - 1) * block[0] < 1000 <= grid[0] * block[0] * 8
    keep, arr = runtime.pack_args(values, art.rendered.params)
    assert ctypes.cast(arr[3], ctypes.POINTER(ctypes.c_int32)).contents.value == 1000
    assert ctypes.cast(arr[1], ctypes.POINTER(ctypes.c_void_p)).contents.value == 0x2000
