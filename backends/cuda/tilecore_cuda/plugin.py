"""Hook implementations registering the `cuda` target: its archs, availability, and build.

Target facts and lowering passes live in :mod:`tilecore_cuda.lowering` (its own entry point);
this module turns the fully lowered thread-level module into CUDA C++ and a launchable artifact.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys

from tilecore.hookspec import hookimpl
from tilecore.target import TargetInfo

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")


@functools.lru_cache(maxsize=1)
def _available() -> tuple[bool, str]:
    """A CUDA device is usable when the driver sees one and torch (for tensors) is importable.

    Answered without importing torch or initialising CUDA (`launch.gpu_visible`), so
    `tilecore.plugins.targets(runnable_only=True)` stays fast; the first cuda compile asks the
    driver itself (the device's arch)."""
    from .launch import gpu_visible

    if importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.bindings") is None:
        return False, "cuda-bindings is not installed (pip install cuda-bindings)"
    if importlib.util.find_spec("torch") is None:
        return False, "torch is not installed (the cuda target runs on torch CUDA tensors)"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return True, ""  # torch made a CUDA context (a script with CUDA tensors): a GPU is usable
    ok, why = gpu_visible()
    return (True, "") if ok else (False, why)


@functools.lru_cache(maxsize=1)
def _default_arch() -> str:
    """The arch of device 0 when there is one, else sm_80 (the oldest arch with mma.sync bf16)."""
    from .launch import device_arch

    if _available()[0]:
        return device_arch(0)
    return "sm_80"


@hookimpl
def tile_targets():
    """`cuda` (priority above interp and cpu, so `auto` picks it on a GPU machine)."""
    return [TargetInfo("cuda", "CUDA C++ with inline PTX, built with NVRTC or nvcc, run on torch",
                       priority=100, archs=ARCHS, default_arch=_default_arch,
                       available=_available)]


@hookimpl
def tile_build(target, module):
    """Render the lowered module as CUDA C++; compile it now when a GPU is present (errors surface
    at jit time), else on first launch."""
    if target.kind != "cuda":
        return None
    from .artifact import CudaArtifact
    from .render import render_cuda
    from .tensormap import module_tensor_maps

    rendered = render_cuda(module, target)
    arch = target.arch
    if arch == "sm_90" and "wgmma." in rendered.source:
        arch = "sm_90a"  # wgmma is in the arch-specific feature set (lowering.has_wgmma)
    return CudaArtifact(rendered, arch, eager=_available()[0], tensor_maps=module_tensor_maps(module))


@hookimpl
def tile_build_begin(target):
    """On a GPU machine (where the build compiles the cubin at once), read NVRTC's libraries and
    headers from disk in a thread while the pipeline runs (`tilecore_cuda.prewarm`; opt-in,
    TILECORE_CUDA_PREWARM=1: it slowed the cold GEMM jit on the H200)."""
    if target.kind == "cuda" and os.environ.get("TILECORE_CUDA_COMPILER") != "nvcc" and _available()[0]:
        from . import prewarm

        prewarm.start(target.arch)


@hookimpl
def tile_cache_token(target):
    """The CUDA toolchain a build would use (compiler choice, cuda-bindings and NVRTC wheel
    versions, CUDA_HOME), read from package metadata: no compiler is loaded on a cache hit."""
    if target.kind != "cuda":
        return None
    from .toolchain import toolchain_token

    return toolchain_token()


@hookimpl
def tile_artifact_load(target, meta, blobs):
    """A CudaArtifact from a compile-cache entry (launch description and cubins; see
    `tilecore_cuda.artifact`)."""
    if target.kind != "cuda" or meta.get("backend") != "cuda":
        return None
    from .artifact import CudaArtifact

    return CudaArtifact.from_cache_entry(meta, blobs)


@hookimpl
def tile_tolerance(target, dtype):
    """(rtol, atol) promised against interp for inexact outputs: the thread-lowered program sums
    in another order than the oracle (tensor-core tiles, per-thread fp16 accumulators), so
    narrow floats get the same fp16-sized tolerance as `emu`, which executes this very program
    (a conformance case with an fp16 accumulator under exp2 came out identical on emu:sm_90a
    and the H200, 3% from interp, past the default fp16 atol)."""
    if target.kind != "cuda":
        return None
    if dtype.is_float and dtype.bits <= 16:
        return (2e-2, 2e-2)
    return None  # wider floats: the suite's defaults, under which 800 programs passed here
