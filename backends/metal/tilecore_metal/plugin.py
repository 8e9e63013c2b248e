"""Hook implementations registering the `metal` and `metal-cpu` targets: archs, availability,
the lowering metal-cpu reuses, and the build of each.

Facts, tensorization and refusals live in :mod:`tilecore_metal.lowering` (its own entry point).
`metal-cpu:<arch>` runs exactly the lowering of `metal:<arch>` (`tile_lowering_target`) and the
same MSL, compiled for the CPU by clang++ against the shim; `metal` runs on an Apple GPU through
PyObjC (`runtime_apple.py`, never executed on Apple hardware here).
"""

from __future__ import annotations

import functools

from tilecore.hookspec import hookimpl
from tilecore.target import Target, TargetInfo

from .lowering import ARCHS, CPU_KIND, KIND


def _cpu_available() -> tuple[bool, str]:
    """metal-cpu runs wherever clang++ is installed."""
    from .build import find_clang

    if find_clang() is None:
        return False, "no clang++ on PATH (apt-get install -y clang-22, or set TILECORE_CLANGXX)"
    return True, ""


@functools.lru_cache(maxsize=1)
def _gpu_available() -> tuple[bool, str]:
    """`metal` needs macOS with PyObjC's Metal bindings and a Metal device."""
    from .runtime_apple import device_or_reason

    _, reason = device_or_reason()
    return (reason is None), (reason or "")


@hookimpl
def tile_targets():
    """`metal` (an Apple GPU, priority above cpu) and `metal-cpu` (the same MSL on the CPU, below
    interp for `auto`: it is a test vehicle, slower than the compiled cpu backend)."""
    return [
        TargetInfo(KIND, "Metal Shading Language with simdgroup matrices, on an Apple GPU (PyObjC)",
                   priority=90, archs=ARCHS, default_arch="apple7", available=_gpu_available),
        TargetInfo(CPU_KIND, "the metal target's MSL compiled by clang++ against a CPU shim, "
                   "one std::thread per Metal thread", priority=-20, archs=ARCHS,
                   # each program is a clang++ build (~0.5 CPU s): the CI profile's 300, in 6
                   # shards, beside the 300 that backends/metal/tests runs on emu:metal:apple9
                   default_arch="apple9", available=_cpu_available),
    ]


@hookimpl
def tile_lowering_target(target):
    """`metal-cpu:<arch>` lowers exactly as `metal:<arch>`."""
    if target.kind != CPU_KIND:
        return None
    return Target(KIND, target.arch or "apple9")


@hookimpl
def tile_build(target, module):
    """Render the lowered module as MSL; for metal-cpu compile it now (errors surface at jit
    time), for metal hand it to the Apple runtime (compiled there on first launch)."""
    if target.kind not in (KIND, CPU_KIND):
        return None
    from .render import render_metal

    rendered, positions = render_metal(module)
    dyn_names = tuple(v.name for v in module.func.dyn_vars)
    if target.kind == CPU_KIND:
        from .artifact import MetalCpuArtifact

        return MetalCpuArtifact(rendered, positions, dyn_names)
    from .runtime_apple import MetalGpuArtifact

    return MetalGpuArtifact(rendered, dyn_names)


@hookimpl
def tile_tolerance(target, dtype):
    """simdgroup multiplies sum in another order than the oracle: fp16-sized tolerances for
    narrow floats, 1e-4 for float32 (as the other thread-lowered targets)."""
    if target.kind not in (KIND, CPU_KIND):
        return None
    if dtype.is_float and dtype.bits <= 16:
        return (2e-2, 2e-2)
    if dtype.is_float:
        return (1e-4, 1e-4)
    return None
