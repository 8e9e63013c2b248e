"""Hook implementations registering the `cpu` target (numba-compiled native code)."""

from __future__ import annotations

from tilecore.hookspec import hookimpl
from tilecore.target import TargetFacts, TargetInfo

# Per-dtype (rtol, atol) against interp on inexact programs (atol is relative to the magnitude of
# the values an output was computed from). Float32 differs from the oracle in summation order
# (BLAS blocking, vectorized reductions vs NumPy's pairwise sums: worst case K * 2^-24 of the
# summands' scale, about 1e-4 for K = 1024 terms) and in the last ulp or two of exp/log/tanh (our
# vectorized exp, libm's others, versus NumPy's SIMD code). A narrow intermediate may then round to
# the neighbouring value, and each later narrow operation may flip another rounding: narrow
# tolerances allow a handful of units in the last place.
_TOLERANCE = {
    "float64": (1e-9, 1e-12),
    "float32": (2e-4, 2e-5),
    "float16": (4e-3, 2e-3),
    "bfloat16": (3e-2, 1.6e-2),
    "float8_e4m3fn": (0.25, 0.125),
    "float8_e5m2": (0.5, 0.25),
}


@hookimpl
def tile_targets():
    """`cpu` runs on any machine with numba; preferred by `auto` over the interpreter."""
    # numba compiles each generated program (about 1 CPU s with a cold cache): the conformance
    # CI profile's 300 run in 6 shards that pytest-xdist spreads over the cores
    # sub-byte integers run one value per byte (exprs.SUB_BYTE_INT); float4_e2m1fn has no codec
    return [TargetInfo("cpu", "native code for this CPU, compiled by numba", priority=10,
                       available=_available, sub_byte=("int4", "uint4"))]


def _available():
    """numba is installed (found, not imported: target discovery stays cheap; importing it is
    the first compile's business)."""
    import importlib.util

    if importlib.util.find_spec("numba") is None:  # pragma: no cover - numba is a dependency
        return False, "numba is not installed (pip install numba)"
    return True, ""


@hookimpl
def tile_target_facts(target):
    """The cpu target runs tile IR directly: no thread lowering, one 'thread' per block."""
    if target.kind != "cpu":
        return None
    return TargetFacts(target, lowers_to_threads=False, warp_size=1, max_threads=1 << 30,
                       shared_memory_bytes=1 << 30, vector_bytes=32)


@hookimpl
def tile_unsupported(target, func):
    """What the cpu backend cannot compile (None when it can compile `func`).

    It compiles every tile statement and expression of the IR; the one limitation is structural:
    code outside `with T.Kernel(...)` other than scalar assignments (the frontend produces none).
    """
    if target.kind != "cpu":
        return None
    from tilecore.errors import TileTargetError

    from .codegen import _split_top

    try:
        _split_top(func)
    except TileTargetError as e:
        return e.message
    return None


@hookimpl
def tile_build(target, module):
    """Generate Python for the tile-level module and compile it with numba (disk-cached)."""
    if target.kind != "cpu":
        return None
    from .artifact import CpuArtifact

    return CpuArtifact.build(module)


@hookimpl
def tile_cache_token(target):
    """numba's and llvmlite's versions and the optimization levels (`optlevel`) for the
    compile-cache key (numba is imported anyway to load the kernel); the runtime helpers are
    covered by the backend's source fingerprint."""
    if target.kind != "cpu":
        return None
    import llvmlite
    import numba

    from .optlevel import SERIAL_OPT

    return (f"numba={numba.__version__} llvmlite={llvmlite.__version__} "
            f"opt={SERIAL_OPT}/{numba.config.OPT}")


@hookimpl
def tile_artifact_load(target, meta, blobs):
    """A CpuArtifact from a compile-cache entry (its source; numba loads the machine code)."""
    if target.kind != "cpu" or meta.get("backend") != "cpu":
        return None
    from .artifact import CpuArtifact

    return CpuArtifact.from_cache_entry(meta, blobs)


@hookimpl
def tile_tolerance(target, dtype):
    """(rtol, atol) promised against interp for outputs of `dtype` on inexact programs; integer
    and bool outputs, and exact programs, match interp exactly."""
    if target.kind != "cpu":
        return None
    if not dtype.is_float:
        return (0.0, 0.0)
    return _TOLERANCE[dtype.name]
