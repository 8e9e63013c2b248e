"""The `tile_build` result for `tvm:*` targets: the IRModule, what TVM compiled from it, and a
runner (`tvm:llvm` on NumPy arrays in this process, `tvm:webgpu` through wgpu) or none
(source-only targets)."""

from __future__ import annotations

import numpy as np

from tilecore.errors import TileTargetError

from .caps import KINDS, Unsupported, caps_for
from .params import call_order

ALIGN = 64  # TVM assumes 64-byte aligned tensors: an unaligned one can crash a vectorized kernel


def aligned(a: np.ndarray) -> np.ndarray:
    """`a` itself when it is C-contiguous and 64-byte aligned, else an aligned copy."""
    if a.flags.c_contiguous and a.ctypes.data % ALIGN == 0:
        return a
    raw = np.empty(a.nbytes + ALIGN, np.uint8)
    off = (-raw.ctypes.data) % ALIGN
    out = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


class TvmArtifact:
    """A kernel compiled by TVM for `tvm:<kind>`; `run` executes it where the target runs here."""

    array_api = "numpy"

    def __init__(self, module, kind: str):
        import tvm

        from .lower import lower

        self.func = module.func
        self.kind = kind
        self.caps = caps_for(kind)
        try:
            self.ir_module = lower(self.func, self.caps)
        except Unsupported as e:
            raise TileTargetError(str(e), self.func.loc,
                                  hint="avoid this construct on tvm targets or pick another target") from None
        self.tvm_target, self.runs_here, _ = KINDS[kind]
        if kind == "rocm":
            _rocm_bitcode_callback()
        pipeline = None
        if self.caps.gpu:
            from .pipeline import gpu_pipeline

            pipeline = gpu_pipeline()
        self.executable = tvm.compile(self.ir_module, target=self.tvm_target, tir_pipeline=pipeline)
        if kind == "llvm":
            self.source = self.executable.mod.inspect_source("ll")
            self._runner = _LlvmRunner(self)
        else:
            self.source = _device_source(self.executable, kind)
            self._runner = None
            if kind == "webgpu":
                from .webgpu import WebGpuRunner

                self._runner = WebGpuRunner(self)

    def to_tvm(self):
        """The TIR the kernel was lowered to, as a `tvm.IRModule` (one PrimFunc, named like the
        kernel) that a TVM user can compose and build with `tvm.compile`."""
        return self.ir_module

    def run(self, args, dyn) -> None:
        """Execute on NumPy arrays in parameter order (outputs written in place)."""
        if self._runner is None:
            raise TileTargetError(f"tvm:{self.kind} is source-only here: its code was generated "
                                  "(and validated where a tool exists) but cannot run on this machine",
                                  hint="use get_kernel_source() here, or run it where the device exists")
        self._runner.run(args, dyn)


# Debian's rocm-device-libs (ocml, ockl bitcode): only kernels calling math functions need them
ROCM_BITCODE_DIRS = ("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", "/opt/rocm/amdgcn/bitcode")


def _rocm_bitcode_callback() -> None:
    """Point TVM's ROCm device-library lookup at Debian's rocm-device-libs when installed and
    at no libraries otherwise (TVM's own lookup needs a ROCm install and raises without one);
    TVM then links the code object with `ld.lld-<its LLVM major>` from PATH."""
    import glob
    import os

    import tvm_ffi

    def bitcode_path(rocdl_dir=None):
        for d in ROCM_BITCODE_DIRS:
            if os.path.isdir(d):
                names = ("ocml", "ockl", "oclc_finite_only_off", "oclc_unsafe_math_off",
                         "oclc_correctly_rounded_sqrt_on", "oclc_daz_opt_off",
                         "oclc_wavefrontsize64_on", "oclc_abi_version_500")
                return [p for n in names for p in glob.glob(os.path.join(d, n + ".bc"))]
        return []

    tvm_ffi.register_global_func("tvm_callback_rocm_bitcode_path", bitcode_path, override=True)


def _device_source(executable, kind: str) -> str:
    """The device code TVM generated (WGSL, HIP's LLVM IR, MSL, OpenCL C)."""
    mods = list(executable.mod.imports)
    if not mods:
        raise TileTargetError(f"TVM produced no device module for tvm:{kind}",
                              hint="check that the installed TVM was built with this device's codegen")
    fmt = {"rocm": "asm"}.get(kind, "")  # ROCm: the GCN assembly of the linked code object
    return mods[0].inspect_source(fmt)


class _LlvmRunner:
    """Calls the LLVM-compiled function on aligned NumPy arrays (bfloat16 through a uint16 view
    re-typed as TVM's bfloat16; float8 and bool are stored as bytes)."""

    def __init__(self, art: TvmArtifact):
        self.fn = art.executable[art.func.name]
        self.order = call_order(art.func)
        self.index = {id(p): i for i, p in enumerate(art.func.params)}

    def run(self, args, dyn) -> None:
        import tvm

        call, back = [], []
        for p in self.order:
            if id(p) not in self.index:  # a scalar parameter
                call.append(int(dyn[p.name]))
                continue
            a = args[self.index[id(p)]]
            arr = aligned(a)
            if arr is not a:
                back.append((a, arr))
            if p.dtype.name == "bfloat16":
                t = tvm.runtime.from_dlpack(arr.view(np.uint16))
                call.append(t._create_view(arr.shape, "bfloat16"))
            elif p.dtype.name.startswith("float8") or p.dtype.is_bool:
                call.append(arr.view(np.uint8))
            else:
                call.append(arr)
        self.fn(*call)
        for orig, arr in back:
            orig[...] = arr
