"""The Metal target's answers to the lowering hooks: machine facts, gemm tensorization and what
Metal cannot express.

Registered as its own entry point (`metal-lowering`), so `emu:metal` and `metal-cpu` get exactly
these answers without the renderer, a compiler or an Apple device.

Facts (Apple GPU family 7+): SIMD groups of 32 lanes, at most 1024 threads per threadgroup,
32 KiB of threadgroup memory, 16-byte vector accesses, no asynchronous copies. No shared-memory
bank facts are declared, so every threadgroup buffer stays row-major: `simdgroup_load` takes an
origin and one row stride, which swizzled layouts do not have.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecore import dtypes as dt
from tilecore.hookspec import hookimpl
from tilecore.ir.stmt import AtomicAdd, AtomicAddRegion
from tilecore.ir.visit import walk
from tilecore.target import Target, TargetFacts

if TYPE_CHECKING:
    from tilecore.contract import GemmQuery

# `.intrinsics` (and the thread-level IR it builds on) and `tilecore.contract` are imported by
# the hooks that use them: target discovery imports this module in every process

KIND = "metal"
CPU_KIND = "metal-cpu"
ARCHS = ("apple7", "apple8", "apple9")
THREADGROUP_BYTES = 32 * 1024
# dtypes MSL has no type for (fp8, double); bfloat only from Apple family 9 (MSL 3.1)
_NEVER = {"float64": "Metal has no double-precision type",
          "float8_e4m3fn": "Metal has no 8-bit float type",
          "float8_e5m2": "Metal has no 8-bit float type"}


def arch_of(target: Target) -> str:
    """The Apple GPU family of a metal or metal-cpu target (`metal` alone means apple7)."""
    return target.arch or "apple7"


def has_bfloat(target: Target) -> bool:
    """Whether MSL's `bfloat` is available (Apple family 9 here; apple7/8 are refused)."""
    return arch_of(target) == "apple9"


@hookimpl
def tile_target_facts(target):
    """SIMD width 32, 1024 threads, 32 KiB threadgroup memory, 16-byte vectors, for `metal:*`."""
    if target.kind != KIND:
        return None
    from .intrinsics import SIMD_WIDTH

    return TargetFacts(target=target, lowers_to_threads=True, warp_size=SIMD_WIDTH, max_threads=1024,
                       shared_memory_bytes=THREADGROUP_BYTES, vector_bytes=16,
                       extra=(("tensor_core", "simdgroup_matrix<T,8,8>"),))


def _mma_dtypes(target: Target) -> tuple[str, ...]:
    return ("float16", "float32", "bfloat16") if has_bfloat(target) else ("float16", "float32")


@hookimpl
def tile_gemm_tensorize(target, query: GemmQuery):
    """`simdgroup_multiply_accumulate` on 8x8 `simdgroup_matrix` tiles (half / float, and bfloat
    on apple9, accumulating in float), operands loaded from threadgroup memory with
    `simdgroup_load`; the simdgroup grid follows the gemm's policy. Declined with the reason for
    other dtypes and shapes; None for other targets."""
    if target.kind != KIND:
        return None
    from tilecore.contract import Declined, MmaPlan

    from .intrinsics import MATRIX, SIMD_WIDTH, simdgroup_load, simdgroup_mma

    q = query
    ok = _mma_dtypes(target)
    if q.a_dtype != q.b_dtype or q.a_dtype.name not in ok:
        return Declined(f"simdgroup_matrix multiplies A and B of one dtype among {', '.join(ok)} on "
                        f"{target}, got {q.a_dtype} and {q.b_dtype}")
    if q.c_dtype != dt.float32:
        return Declined("tilecore's simdgroup_matrix gemm accumulates in float32, the accumulator "
                        f"is {q.c_dtype}")
    if q.k % MATRIX:
        return Declined(f"K = {q.k} is not a multiple of simdgroup_matrix's {MATRIX}")
    if q.warp_size != SIMD_WIDTH or q.threads % SIMD_WIDTH:
        return Declined(f"{q.threads} threads are not whole SIMD groups of {SIMD_WIDTH}")
    # tilecore.lower (the whole thread lowering) is imported when a gemm is asked about,
    # not when the backends are discovered
    from tilecore.lower.tensorize import warp_grid

    warps = warp_grid(q.policy, q.threads // SIMD_WIDTH, q.m, q.n, MATRIX, MATRIX)
    if warps is None:
        return Declined(f"no grid of {q.threads // SIMD_WIDTH} SIMD groups splits the {q.m}x{q.n} tile "
                        "into 8x8 matrices (make M and N multiples of 8 x the groups along them)")
    loaders = (simdgroup_load(q.a_dtype, False), simdgroup_load(q.a_dtype, True))
    return MmaPlan(mma=simdgroup_mma(q.a_dtype), warps=warps, loaders=loaders)


def unsupported_reason(target: Target, func) -> str | None:
    """Why Metal (apple family of `target`) cannot run `func`, or None: dtypes MSL lacks (double,
    fp8; bfloat before apple9) and 64-bit atomic adds (Metal's atomics are 32-bit)."""
    for node in walk(func, into_buffers=True):
        d = getattr(node, "dtype", None)
        name = getattr(d, "name", None)
        if name in _NEVER:
            return f"{_NEVER[name]} ({name}); use float32 or float16"
        if name == "bfloat16" and not has_bfloat(target):
            return (f"bfloat is Metal 3.1 / Apple GPU family 9; {target} has none "
                    f"(compile for {target.kind}:apple9, or use float16)")
        if isinstance(node, (AtomicAdd, AtomicAddRegion)):
            buf = node.buffer if isinstance(node, AtomicAdd) else node.dst.buffer
            if buf.dtype.bits == 64:
                return f"Metal has no 64-bit atomic add (atomic_add into {buf.dtype} {buf.name})"
    return None


@hookimpl
def tile_unsupported(target, func):
    """Refusals for `metal:*` and `metal-cpu:*` (see `unsupported_reason`)."""
    if target.kind not in (KIND, CPU_KIND):
        return None
    return unsupported_reason(target, func)
