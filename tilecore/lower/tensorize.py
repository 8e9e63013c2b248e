"""The questions lowering asks a backend about `gemm`, and the shape of its answer.

The core asks once per gemm through the `tile_gemm_tensorize` hook; the backend answers with
instructions as data (`tilecore.ir.intrinsic.Intrinsic`), so the core never names a vendor.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import DType


@dataclass(frozen=True)
class GemmQuery:
    """One gemm as the backend sees it: C[M, N] (+)= op(A)[M, K] @ op(B)[K, N] per block."""

    a_dtype: DType
    b_dtype: DType
    c_dtype: DType
    m: int
    n: int
    k: int
    transpose_a: bool
    transpose_b: bool
    a_scope: str
    b_scope: str
    threads: int
    warp_size: int
    policy: str


@dataclass(frozen=True)
class MmaPlan:
    """A backend's tensorization: `mma` (kind "mma") applied by a `warps` = (wm, wn) grid of
    warps, each owning an (M / wm) x (N / wn) sub-tile; `loaders` are candidate operand loaders
    (kind "ldmatrix"): lowering uses one whose lane map, placed on the operand, equals the mma
    operand's map, and falls back to per-element shared loads otherwise."""

    mma: object  # Intrinsic
    warps: tuple
    loaders: tuple = ()


def warp_grid(policy: str, num_warps: int, m: int, n: int, tile_m: int, tile_n: int) -> tuple | None:
    """(wm, wn) with wm * wn == num_warps dividing M into tile_m rows and N into tile_n columns:
    `full_row` prefers wn = 1, `full_col` prefers wm = 1, `square` the most square warp tiles.
    None when no split divides the block tile."""
    cands = []
    for wm in range(1, num_warps + 1):
        if num_warps % wm:
            continue
        wn = num_warps // wm
        if m % (wm * tile_m) == 0 and n % (wn * tile_n) == 0:
            cands.append((wm, wn))
    if not cands:
        return None
    if policy == "full_row":
        return max(cands, key=lambda c: c[0])
    if policy == "full_col":
        return max(cands, key=lambda c: c[1])
    return min(cands, key=lambda c: (abs(m // c[0] - n // c[1]), c[1]))
