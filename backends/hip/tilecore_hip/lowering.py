"""The HIP target's answers to the lowering hooks: machine facts and gemm tensorization.

Registered as its own entry point (`hip-lowering`), so the lowering works without clang or an
AMD GPU, and `emu:hip:<arch>` asks for exactly these answers through the hooks.

Archs: gfx90a (MI200) and gfx942 (MI300), CDNA with 64-lane waves and MFMA; gfx1100 (RDNA3,
Radeon 7900) run in wave32 mode with WMMA. `hip` alone means gfx942.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecore import dtypes as dt
from tilecore.hookspec import hookimpl
from tilecore.target import Target, TargetFacts

if TYPE_CHECKING:
    from tilecore.contract import Declined, GemmQuery, MmaPlan

# `.intrinsics` (the lane maps and the thread-level IR they build on) and `tilecore.contract`
# are imported by the gemm hook that uses them: target discovery imports this module in every
# process, where they cost about 50 ms from source (a cpu compile-cache hit's budget is 0.5 s)

KIND = "hip"
DEFAULT_ARCH = "gfx942"
# arch -> (wave size, matrix-core family)
ARCHS = {"gfx942": (64, "mfma"), "gfx90a": (64, "mfma"), "gfx1100": (32, "wmma")}
LDS_BYTES = 64 * 1024  # per workgroup on CDNA2/3 and RDNA3
_MMA_DTYPES = ("float16", "bfloat16")


def arch_of(target: Target) -> str:
    """The target's arch (`hip` alone: gfx942)."""
    return target.arch or DEFAULT_ARCH


def wave_size(target: Target) -> int:
    """64 on CDNA, 32 on gfx11 (compiled in wave32 mode, clang's default there)."""
    return ARCHS[arch_of(target)][0]


@hookimpl
def tile_target_facts(target):
    """Waves of 64 (CDNA) or 32 (gfx11), up to 1024 work-items, 64 KiB LDS in 32 banks of 4
    bytes, 16-byte (dwordx4) vector accesses, 64-byte global cache-line segments; no
    asynchronous global-to-LDS copies (the pipeline stays synchronous)."""
    if target.kind != KIND or arch_of(target) not in ARCHS:
        return None
    arch = arch_of(target)
    ws, family = ARCHS[arch]
    return TargetFacts(
        target=target, lowers_to_threads=True, warp_size=ws, max_threads=1024,
        shared_memory_bytes=LDS_BYTES, vector_bytes=16,
        extra=(("gfx", arch), ("matrix_core", family), ("shared_bank_bytes", 4),
               ("shared_banks", 32), ("global_sector_bytes", 64)),
    )


def _check(q: GemmQuery, ws: int) -> str | None:
    """Why no matrix instruction applies to `q` whatever its shape, or None."""
    if q.a_dtype.name.startswith("float8") or q.b_dtype.name.startswith("float8"):
        # gfx942's fp8 MFMA reads the FNUZ encodings (bias 8 / 16, NaN 0x80); tilecore's float8
        # dtypes are OCP's e4m3fn / e5m2, which only gfx950 multiplies natively
        return ("gfx942's fp8 MFMA instructions use the FNUZ fp8 encodings, not the OCP "
                "float8_e4m3fn / float8_e5m2 of this program, so fp8 gemms run as SIMT multiply-adds")
    if q.a_dtype != q.b_dtype or q.a_dtype.name not in _MMA_DTYPES:
        return (f"the MFMA/WMMA instructions tilecore uses need float16 or bfloat16 A and B of one "
                f"dtype, got {q.a_dtype} and {q.b_dtype}")
    if q.c_dtype != dt.float32:
        return f"the MFMA/WMMA instructions accumulate in float32, the accumulator is {q.c_dtype}"
    if q.warp_size != ws or q.threads % ws:
        return f"{q.threads} threads are not whole waves of {ws}"
    return None


def plan_for(target: Target, q: GemmQuery, maps: dict | None = None) -> MmaPlan | Declined:
    """The matrix instruction for `q` on `target`: on CDNA the 32x32x8 MFMA when the block tile
    splits into 32x32 wave tiles (fewer, larger instructions), else 16x16x16; on gfx11 WMMA
    16x16x16. `maps` replaces lane maps (mutation tests)."""
    # tilecore.lower (the whole thread lowering) is imported when a gemm is asked about, not
    # when the backends are discovered
    from tilecore.contract import Declined, MmaPlan
    from tilecore.lower.tensorize import warp_grid

    from .intrinsics import MFMA_SHAPES, WMMA_SHAPE, mfma, mfma_cached, wmma, wmma_cached

    ws, family = ARCHS[arch_of(target)]
    why = _check(q, ws)
    if why:
        return Declined(why)
    waves = q.threads // ws
    shapes = MFMA_SHAPES if family == "mfma" else (WMMA_SHAPE,)
    for m, n, k in shapes:
        if q.k % k:
            continue
        grid = warp_grid(q.policy, waves, q.m, q.n, m, n)
        if grid is None:
            continue
        if family == "mfma":
            intr = mfma_cached((m, n, k), q.a_dtype) if maps is None else mfma((m, n, k), q.a_dtype, maps)
        else:
            intr = wmma_cached(q.a_dtype) if maps is None else wmma(q.a_dtype, maps)
        return MmaPlan(mma=intr, warps=grid)
    tiles = " or ".join(f"{m}x{n}x{k}" for m, n, k in shapes)
    return Declined(f"no grid of {waves} waves splits the {q.m}x{q.n}x{q.k} tile into {tiles} "
                    f"instruction tiles (make M and N multiples of the instruction tile times the "
                    f"waves along them, K a multiple of its k, or use fewer threads)")


@hookimpl
def tile_gemm_tensorize(target, query: GemmQuery):
    """MFMA (gfx90a, gfx942) or WMMA (gfx1100) for f16/bf16 gemms accumulating in f32, operands
    loaded from LDS element by element through the lane maps (AMD has no ldmatrix). Declined with
    the reason otherwise; None for other targets."""
    if target.kind != KIND or arch_of(target) not in ARCHS:
        return None
    return plan_for(target, query)
