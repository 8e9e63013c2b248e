"""The CUDA target's answers to the lowering hooks: machine facts and gemm tensorization.

Registered as its own entry point (`cuda-lowering`), so the lowering side works without the
renderer or a GPU, and `emu:<arch>` can ask for exactly these answers through the hooks.
"""

from __future__ import annotations

from tilecore.hookspec import hookimpl
from tilecore.target import Target, TargetFacts

# The tensorization imports (tilecore.lower, the intrinsics, NumPy) happen in the hook that needs
# them: loading this entry point is part of every target discovery, which must stay cheap.

# Usable shared memory per block (opt-in maximum) by arch family, in bytes.
_SHARED = {"sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_89": 99 * 1024, "sm_90": 227 * 1024,
           "sm_90a": 227 * 1024}
_MMA_DTYPES = ("float16", "bfloat16")


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
        extra=(("sm", _sm(target)), ("tensor_core", "mma.sync.m16n8k16"),
               ("shared_bank_bytes", 4), ("shared_banks", 32), ("global_sector_bytes", 32),
               ("async_copy_sizes", (4, 8, 16) if _sm(target) >= 80 else ())),  # cp.async
    )


@hookimpl
def tile_gemm_tensorize(target, query):
    """`mma.sync` m16n8k16 (f16/bf16 in, f32 accumulate) on sm_80+, loaded with `ldmatrix`; the
    warp grid follows the gemm's policy. Declined (with the reason) for other dtypes and shapes;
    None for other targets."""
    if target.kind != "cuda":
        return None
    from tilecore import dtypes as dt
    from tilecore.contract import Declined, MmaPlan
    from tilecore.lower.tensorize import warp_grid

    from .intrinsics import ldmatrix, mma_m16n8k16

    if _sm(target) < 80:
        return Declined(f"{target} predates the sm_80 tensor-core instructions tilecore uses")
    q = query
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
    return MmaPlan(mma=mma_m16n8k16(q.a_dtype), warps=warps, loaders=loaders)
