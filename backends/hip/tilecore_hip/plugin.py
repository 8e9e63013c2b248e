"""Hook implementations registering the `hip` target: its archs, availability, and build.

Facts and tensorization live in :mod:`tilecore_hip.lowering` (its own entry point); this module
turns the lowered thread-level module into HIP source and an artifact that compiles it offline
with clang and runs it through the HIP runtime where an AMD GPU is present.
"""

from __future__ import annotations

from tilecore.hookspec import hookimpl
from tilecore.target import TargetInfo

from .lowering import ARCHS, DEFAULT_ARCH, KIND


def available() -> tuple[bool, str]:
    """Runnable only with the HIP runtime and an AMD GPU; the reason otherwise."""
    from .runtime import device_count

    n, why = device_count()
    if n == 0:
        return False, why
    return True, ""


@hookimpl
def tile_targets():
    """`hip` (gfx942 by default), below `cuda` for `auto`; runnable only on an AMD GPU machine."""
    archs = (DEFAULT_ARCH, *(a for a in ARCHS if a != DEFAULT_ARCH))
    return [TargetInfo(KIND, "HIP for AMD GPUs (MFMA/WMMA), built offline with clang, run via libamdhip64",
                       priority=90, archs=archs, default_arch=DEFAULT_ARCH, available=available)]


@hookimpl
def tile_build(target, module):
    """Render the lowered module as HIP; the artifact compiles it with clang on first use."""
    if target.kind != KIND:
        return None
    from .artifact import HipArtifact
    from .render import render_hip

    return HipArtifact(render_hip(module), target.arch or DEFAULT_ARCH)
