"""Hook implementations registering the `cuda` target: its archs, availability, and build.

Target facts and lowering passes live in :mod:`tilecore_cuda.lowering` (its own entry point);
this module turns the fully lowered thread-level module into CUDA C++ and a launchable artifact.
"""

from __future__ import annotations

import functools
import importlib.util

from tilecore.hookspec import hookimpl
from tilecore.target import TargetInfo

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")


@functools.lru_cache(maxsize=1)
def _available() -> tuple[bool, str]:
    """A CUDA device is usable when the driver sees one and torch (for tensors) is importable."""
    from .launch import device_count

    if device_count() == 0:
        return False, "no CUDA device (or no cuda-bindings / driver) on this machine"
    if importlib.util.find_spec("torch") is None:
        return False, "torch is not installed (the cuda target runs on torch CUDA tensors)"
    return True, ""


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
