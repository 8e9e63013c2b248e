"""The CUDA target's answers to the lowering hooks: machine facts and gemm tensorization.

Registered as its own entry point (`cuda-lowering`), so the lowering side works without the
renderer or a GPU, and `emu:<arch>` can ask for exactly these answers through the hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecore.hookspec import hookimpl
from tilecore.target import Target, TargetFacts

# The tensorization imports (tilecore.lower, the intrinsics, NumPy) happen in the hook that needs
# them: loading this entry point is part of every target discovery, which must stay cheap.
if TYPE_CHECKING:
    from tilecore.contract import Declined, GemmQuery, MmaPlan

# Usable shared memory per block (opt-in maximum) by arch family, in bytes.
_SHARED = {"sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_89": 99 * 1024, "sm_90": 227 * 1024,
           "sm_90a": 227 * 1024}
_MMA_DTYPES = ("float16", "bfloat16")
_FP8 = ("float8_e4m3fn", "float8_e5m2")


def has_wgmma(target: Target) -> bool:
    """Hopper: `cuda:sm_90` and `cuda:sm_90a` both get wgmma. wgmma needs the arch-specific
    feature set, so a kernel that uses it is compiled for sm_90a (`tilecore_cuda.plugin`
    builds `cuda:sm_90` kernels containing wgmma as sm_90a; `cuda` on an H200 is sm_90a)."""
    return (target.arch or "").removesuffix("a") == "sm_90"


def _sm(target: Target) -> int:
    arch = target.arch or "sm_80"
    digits = "".join(ch for ch in arch if ch.isdigit())
    return int(digits) if digits else 80


@hookimpl
def tile_target_facts(target):
    """Warps of 32, up to 1024 threads, 16-byte vector accesses, 32 four-byte shared-memory banks,
    tensor cores from sm_80."""
    if target.kind != "cuda":
        return None
    return TargetFacts(
        target=target, lowers_to_threads=True, warp_size=32, max_threads=1024,
        shared_memory_bytes=_SHARED.get(target.arch or "sm_80", 99 * 1024), vector_bytes=16,
        # 32 banks of 4 bytes: the geometry shared-memory layouts are chosen against; global
        # memory moves 32-byte sectors (epilogues stage tiles whose stores would split them)
        extra=(("sm", _sm(target)),
               ("tensor_core", "wgmma.m64nNk16" if has_wgmma(target) else "mma.sync.m16n8k16"),
               ("shared_bank_bytes", 4), ("shared_banks", 32), ("global_sector_bytes", 32),
               ("async_copy_sizes", (4, 8, 16) if _sm(target) >= 80 else ()),  # cp.async
               ("tma", _sm(target) >= 90), ("warp_specialize", _sm(target) >= 90),  # TMA + mbarrier
               ("mbarrier", _sm(target) >= 90),  # user mbarriers (try_wait.parity: sm_90)
               ("setmaxnreg", (target.arch or "") == "sm_90a")),
    )


@hookimpl
def tile_gemm_tensorize(target, query):
    """`mma.sync` m16n8k16 (f16/bf16 in, f32 accumulate) on sm_80+, loaded with `ldmatrix`; the
    warp grid follows the gemm's policy. On Hopper wgmma first (`wgmma_plan`); a 16-bit gemm it
    declines gets mma.sync, with `MmaPlan.note` saying why when only a user's shared layout kept
    it off wgmma. Declined (with the reason) for other dtypes and shapes; None for other targets."""
    if target.kind != "cuda":
        return None
    from dataclasses import replace

    from tilecore import dtypes as dt
    from tilecore.contract import Declined, MmaPlan
    from tilecore.lower.tensorize import warp_grid

    from .intrinsics import ldmatrix, mma_m16n8k16

    if _sm(target) < 80:
        return Declined(f"{target} predates the sm_80 tensor-core instructions tilecore uses")
    q = query
    note = ""
    if has_wgmma(target):
        plan = wgmma_plan(q)
        if isinstance(plan, MmaPlan) or q.a_dtype.name in _FP8 or q.b_dtype.name in _FP8:
            return plan
        if q.fixed_layouts and isinstance(wgmma_plan(replace(q, fixed_layouts=())), MmaPlan):
            # only the user's layout keeps this gemm off wgmma: say so (the core warns once)
            note = ("wgmma reads shared operands through matrix descriptors, which take only "
                    "the canonical swizzled layout")
    if q.a_dtype != q.b_dtype or q.a_dtype.name not in _MMA_DTYPES:
        return Declined(f"the m16n8k16 tensor-core instruction needs float16 or bfloat16 A and B "
                        f"of one dtype, got {q.a_dtype} and {q.b_dtype}")
    if q.c_dtype != dt.float32:
        return Declined("the m16n8k16 tensor-core instruction accumulates in float32, the "
                        f"accumulator is {q.c_dtype}")
    if q.k % 16:
        return Declined(f"K = {q.k} is not a multiple of the instruction's 16")
    if q.threads % q.warp_size or q.warp_size != 32:
        return Declined(f"{q.threads} threads are not whole warps of 32")
    warps = warp_grid(q.policy, q.threads // 32, q.m, q.n, 16, 8)
    if warps is None:
        return Declined(f"no grid of {q.threads // 32} warps splits the {q.m}x{q.n} tile into 16x8 "
                        "instruction tiles (make M a multiple of 16 x warps-in-M and N of 8 x warps-in-N, "
                        "or use fewer threads)")
    loaders = tuple(ldmatrix(count, trans, q.a_dtype) for count in (4, 2) for trans in (False, True))
    return MmaPlan(mma=mma_m16n8k16(q.a_dtype), warps=warps, loaders=loaders, note=note)


def wgmma_plan(q: GemmQuery) -> MmaPlan | Declined:
    """wgmma m64nNk16 (f16/bf16) or m64nNk32 (fp8 e4m3/e5m2) with f32 accumulators: the block's
    warpgroups split M (then N) into 64-row tiles, each issuing instructions of the widest n
    (<= 256) that divides its columns. B is read through a descriptor (K- or, for 16-bit
    types, MN-major); A too, or from registers when it is a fragment. Declined with the
    reason when the gemm does not fit, or when T.annotate_layout gives a shared operand a layout
    a descriptor cannot read (`GemmQuery.fixed_layouts`; the caller then offers mma.sync for
    16-bit types, which reads shared memory through the user's layout)."""
    from tilecore import dtypes as dt
    from tilecore.contract import Declined, MmaPlan
    from tilecore.lower.tensorize import warp_grid

    from .intrinsics import WGMMA_LANES, WGMMA_M, WGMMA_NS, wgmma, wgmma_k

    fixed = [o for o in q.fixed_layouts if o == "B" or q.a_scope == "shared"]
    if fixed:
        return Declined(f"wgmma reads shared operand{'s' * (len(fixed) > 1)} {' and '.join(fixed)} "
                        "through matrix descriptors, which take only the canonical swizzled layout, "
                        "and T.annotate_layout gives another (use T.make_swizzled_layout, or no annotation)")
    fp8 = q.a_dtype == q.b_dtype and q.a_dtype.name in _FP8
    if not fp8 and (q.a_dtype != q.b_dtype or q.a_dtype.name not in _MMA_DTYPES):
        return Declined(f"wgmma needs float16, bfloat16 or fp8 A and B of one dtype, got "
                        f"{q.a_dtype} and {q.b_dtype}")
    if q.c_dtype != dt.float32:
        return Declined(f"tilecore's wgmma accumulates in float32, the accumulator is {q.c_dtype}")
    if fp8 and (q.transpose_a or not q.transpose_b):
        return Declined("fp8 wgmma reads both operands K-major: A as (M, K) and B as (N, K) "
                        "(T.gemm(A, B, C, transpose_B=True))")
    k = wgmma_k(q.a_dtype)
    if q.k % k:
        return Declined(f"K = {q.k} is not a multiple of the wgmma instruction's {k}")
    if q.warp_size != 32 or q.threads % WGMMA_LANES:
        return Declined(f"{q.threads} threads are not whole warpgroups of {WGMMA_LANES}")
    groups = q.threads // WGMMA_LANES
    grid = warp_grid("full_row", groups, q.m, q.n, WGMMA_M, 8)
    if grid is None:
        return Declined(f"no grid of {groups} warpgroup(s) splits the {q.m}x{q.n} tile into "
                        f"{WGMMA_M}-row wgmma tiles")
    n_wg = q.n // grid[1]
    n = next(x for x in WGMMA_NS if n_wg % x == 0)
    return MmaPlan(mma=wgmma(n, q.a_dtype, a_in_regs=q.a_scope == "fragment"), warps=grid, loaders=())
