"""The `metal` runtime for Apple GPUs through PyObjC's Metal bindings (`pyobjc-framework-Metal`).

NEVER EXECUTED ON APPLE HARDWARE: no Mac is reachable where this was written. The code follows
Apple's documented API (MTLDevice newLibraryWithSource:options:error:, newFunctionWithName:,
newComputePipelineStateWithFunction:error:, a command buffer with one compute encoder,
dispatchThreadgroups:threadsPerThreadgroup:) and is unit-tested against a recording stand-in
for the `Metal` module (tests/test_metal_runtime.py), which checks the calls and the data
movement but not Apple's behaviour.

Compile options: fast math off (`setFastMathEnabled_(False)`), since the oracle's semantics
are IEEE; the generated code uses `metal::precise::` functions anyway.
"""

from __future__ import annotations

import functools
import platform

import numpy as np

from tilecore.codegen.spec import RenderedKernel, host_int
from tilecore.errors import TileRuntimeError, TileTargetError

_SHARED = 0  # MTLResourceStorageModeShared: CPU and GPU see the same memory (Apple silicon)


def import_metal():
    """PyObjC's `Metal` module, or raise TileTargetError saying why it is unavailable."""
    if platform.system() != "Darwin":
        raise TileTargetError(f"the metal target runs on macOS; this is {platform.system()}",
                              hint="use target='metal-cpu' to run the same MSL on the CPU")
    try:
        import Metal  # type: ignore[import-not-found]
    except ImportError:
        raise TileTargetError("PyObjC's Metal bindings are not installed",
                              hint="pip install pyobjc-framework-Metal") from None
    return Metal


def device_or_reason(metal=None):
    """(the system default MTLDevice, None), or (None, why there is none)."""
    try:
        metal = metal or import_metal()
    except TileTargetError as e:
        return None, e.message
    dev = metal.MTLCreateSystemDefaultDevice()
    if dev is None:
        return None, "MTLCreateSystemDefaultDevice() returned no device"
    return dev, None


class MetalGpuArtifact:
    """The `metal` artifact: the MSL compiled by Metal on first run, launched on the default
    device with one buffer per array (copied in, run, copied back) and symbolic sizes as 4-byte
    `setBytes` arguments. `metal` may be a stand-in for PyObjC's module (tests)."""

    array_api = "numpy"

    def __init__(self, rendered: RenderedKernel, dyn_names: tuple[str, ...], metal=None):
        self.rendered = rendered
        self.source = rendered.source
        self.dyn_names = dyn_names
        self._metal = metal

    @functools.cached_property
    def _pipeline(self):
        metal = self._metal or import_metal()
        dev, reason = device_or_reason(metal)
        if dev is None:
            raise TileTargetError(f"no Metal device: {reason}",
                                  hint="run on macOS with an Apple GPU, or use target metal-cpu")
        opts = metal.MTLCompileOptions.alloc().init()
        opts.setFastMathEnabled_(False)
        lib, err = dev.newLibraryWithSource_options_error_(self.source, opts, None)
        if lib is None:
            raise TileTargetError(f"Metal could not compile the generated MSL: {err}",
                                  hint="this is a tilecore bug; please report it")
        fn = lib.newFunctionWithName_(self.rendered.entry)
        pipe, err = dev.newComputePipelineStateWithFunction_error_(fn, None)
        if pipe is None:
            raise TileTargetError(f"Metal could not build a pipeline for {self.rendered.entry}: {err}",
                                  hint="the error is the Metal compiler's; report it with "
                                  "kernel.get_kernel_source()")
        threads = self.rendered.block[0]
        if threads > pipe.maxTotalThreadsPerThreadgroup():
            raise TileRuntimeError(f"{self.rendered.entry} needs {threads} threads per threadgroup; "
                                   f"this device allows {pipe.maxTotalThreadsPerThreadgroup()}",
                                   hint="use fewer threads per block")
        return metal, dev, pipe, dev.newCommandQueue()

    def run(self, args: list, dyn: dict) -> None:
        """One dispatch over the grid; outputs are copied back into `args`."""
        metal, dev, pipe, queue = self._pipeline
        r = self.rendered
        arrays = [np.ascontiguousarray(a) for a in args]
        buffers = [dev.newBufferWithBytes_length_options_(a.tobytes(), max(1, a.nbytes), _SHARED)
                   for a in arrays]
        cmd = queue.commandBuffer()
        enc = cmd.computeCommandEncoder()
        enc.setComputePipelineState_(pipe)
        sizes = iter(self.dyn_names)
        index, buf_i = 0, 0
        for p in r.params:
            if p.is_pointer:
                enc.setBuffer_offset_atIndex_(buffers[buf_i], 0, index)
                buf_i += 1
            else:
                value = np.array([dyn[next(sizes)]], dtype=p.dtype.np)
                enc.setBytes_length_atIndex_(value.tobytes(), value.nbytes, index)
            index += 1
        grid = [host_int(g, dyn) for g in r.grid]
        enc.dispatchThreadgroups_threadsPerThreadgroup_(metal.MTLSizeMake(*grid),
                                                        metal.MTLSizeMake(*r.block))
        enc.endEncoding()
        cmd.commit()
        cmd.waitUntilCompleted()
        if cmd.error() is not None:
            raise TileRuntimeError(f"{r.entry} failed on the GPU: {cmd.error()}",
                                   hint="run the same kernel on emu:metal to locate the fault")
        for a, buf in zip(args, buffers):
            view = buf.contents().as_buffer(a.nbytes)
            np.copyto(a.reshape(-1), np.frombuffer(view, dtype=a.dtype, count=a.size))
