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
            raise TileTargetError(str(e), self.func.loc) from None
        self.tvm_target, self.runs_here, _ = KINDS[kind]
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
                                  "(and validated where a tool exists) but cannot run on this machine")
        self._runner.run(args, dyn)


def _device_source(executable, kind: str) -> str:
    """The device code TVM generated (WGSL, HIP's LLVM IR, MSL, OpenCL C)."""
    mods = list(executable.mod.imports)
    if not mods:
        raise TileTargetError(f"TVM produced no device module for tvm:{kind}")
    fmt = {"rocm": "ll"}.get(kind, "")
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
