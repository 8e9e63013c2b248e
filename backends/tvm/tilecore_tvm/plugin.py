"""Hook implementations registering the `tvm:*` targets (Apache TVM's code generators).

Importing this module (which target discovery does) imports no `tvm`: TVM is about 300 MB
and 0.6-1.5 s to import, so it is imported only when a `tvm:*` kernel is checked, lowered
or built.
"""

from __future__ import annotations

from tilecore.hookspec import hookimpl
from tilecore.target import TargetFacts, TargetInfo

from .caps import KINDS

# Per-dtype (rtol, atol) against interp on inexact programs. LLVM's exp/log/tanh/erf differ
# from NumPy's in the last ulp or two (erf: TVM's own float32 approximation), and the loops
# sum in a different order from NumPy's pairwise reductions; narrow values may then round to
# the neighbouring value, as for the numba cpu backend.
_TOLERANCE = {
    "float64": (1e-9, 1e-12),
    "float32": (2e-4, 2e-5),
    "float16": (4e-3, 2e-3),
    "bfloat16": (3e-2, 1.6e-2),
    "float8_e4m3fn": (0.25, 0.125),
    "float8_e5m2": (0.5, 0.25),
}


def _tvm_importable() -> tuple[bool, str]:
    import importlib.util

    if importlib.util.find_spec("tvm") is None:
        return False, "apache-tvm is not installed (pip install apache-tvm)"
    return True, ""


def _webgpu_available() -> tuple[bool, str]:
    ok, why = _tvm_importable()
    if not ok:
        return ok, why
    from .webgpu import adapter_reason

    why = adapter_reason()
    return (why is None), (why or "")


def _available():
    """Runnable: tvm:llvm needs apache-tvm only (tvm:webgpu is checked when it is chosen)."""
    return _tvm_importable()


@hookimpl
def tile_targets():
    """`tvm` (arch llvm, webgpu, rocm, metal or opencl; default llvm)."""
    # a generated program costs about 0.17 CPU s on tvm:llvm (TVM's passes and LLVM, plus the
    # oracle runs): the conformance CI profile's 300 (6 shards) are about 50 CPU s
    return [TargetInfo("tvm", "Apache TVM TIR: llvm (CPU) and webgpu (WGSL on Vulkan) run here; "
                       "rocm, metal, opencl are source-only", priority=1, archs=tuple(KINDS),
                       default_arch="llvm", available=_available)]


@hookimpl
def tile_target_facts(target):
    """The tvm targets take the tile IR (the lowering to TIR maps blocks and threads itself)."""
    if target.kind != "tvm":
        return None
    return TargetFacts(target, lowers_to_threads=False, warp_size=1, max_threads=1024,
                       shared_memory_bytes=1 << 30 if target.arch == "llvm" else 16384,
                       vector_bytes=16)


def _arch(target) -> str:
    from tilecore.errors import TileTargetError

    arch = target.arch or "llvm"
    if arch not in KINDS:
        raise TileTargetError(f"unknown tvm target {target}", hint=f"use one of tvm:{', tvm:'.join(KINDS)}")
    return arch


@hookimpl
def tile_unsupported(target, func):
    """The reason `func` cannot be compiled for `target` (None when it can): the lowering to TIR
    is tried (cheap, no code generation) and its refusal, if any, is the reason."""
    if target.kind != "tvm":
        return None
    arch = _arch(target)
    if arch == "webgpu":
        ok, why = _webgpu_available()
        if not ok:
            return why
    from .caps import Unsupported, caps_for
    from .lower import lower

    try:
        lower(func, caps_for(arch))
    except Unsupported as e:
        return str(e)
    return None


@hookimpl
def tile_build(target, module):
    """Lower the tile module to TIR, compile it with TVM for the target."""
    if target.kind != "tvm":
        return None
    from .artifact import TvmArtifact

    return TvmArtifact(module, _arch(target))


@hookimpl
def tile_tolerance(target, dtype):
    """(rtol, atol) promised against interp for outputs of `dtype` on inexact programs."""
    if target.kind != "tvm":
        return None
    if not dtype.is_float:
        return (0.0, 0.0)
    return _TOLERANCE[dtype.name]
