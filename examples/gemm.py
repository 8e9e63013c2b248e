"""Tiled GEMM: fp16 inputs, fp32 accumulation, fp16 output; M, N, K need not be tile multiples.

Run: python examples/gemm.py [target]
"""

import sys

import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
TEST_SIZES = [dict(M=128, N=128, K=64), dict(M=200, N=136, K=100)]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)


def program(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32, dtype="float16",
            accum_dtype="float32", num_stages=3, threads=128, panel=0, out_dtype=None, split_k=1,
            b_eviction=None):
    """C = A @ B with a block per (block_M, block_N) output tile; `panel` > 0 runs the blocks in
    panels of that many grid rows (T.use_swizzle), so neighbouring blocks share A and B in L2.
    C has `out_dtype` (default: the inputs' dtype).

    `split_k` > 1 (small M, where N / block_N blocks cannot fill the machine): a third grid
    dimension splits the k tiles into that many runs, each block adds its partial product into
    C atomically, so C must hold zeros before the call (an output the call allocates does).
    `b_eviction` is B's T.copy eviction_policy ("evict_first": B is streamed once, so its lines
    are the ones L2 drops first)."""
    out_dtype = out_dtype or dtype
    k_tiles = (K + block_K - 1) // block_K
    per_split = (k_tiles + split_k - 1) // split_k  # k tiles of one split (the last may read past K: zeros)

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            if panel:
                T.use_swizzle(panel)
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared, eviction_policy=b_eviction)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    @T.prim_func
    def gemm_split_k(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                     C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(per_split, num_stages=num_stages):
                T.copy(A[by * block_M, (bz * per_split + k) * block_K], A_shared)
                T.copy(B[(bz * per_split + k) * block_K, bx * block_N], B_shared, eviction_policy=b_eviction)
                T.gemm(A_shared, B_shared, C_local)
            T.atomic_add(C[by * block_M, bx * block_N], C_local)

    return gemm if split_k == 1 else gemm_split_k


def small_m_config(M: int, N: int, K: int, sms: int = 132) -> dict:
    """The small-M (M <= 64) config of `program` for an (M, N, K) on `sms` multiprocessors: B is
    streamed once (bandwidth-bound), so the grid must keep every multiprocessor loading: 64-column
    tiles (128-byte TMA rows) of 16 rows of A (one mma.sync row block), split over k until the
    blocks reach about two per multiprocessor, B read with evict_first."""
    block_N = 64
    col_blocks = (N + block_N - 1) // block_N * ((M + 15) // 16)
    split = 1
    while col_blocks * split * 2 <= 2 * sms and (K // 256) // (split * 2) >= 2:
        split *= 2
    return dict(block_M=16, block_N=block_N, block_K=256 if split == 1 else 128, num_stages=4,
                threads=128, split_k=split, b_eviction="evict_first")


def make_inputs(rng, M=1024, N=1024, K=1024, dtype="float16"):
    return [rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)]


def reference(a, b):
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(a.dtype)


def main(target="interp"):
    sizes = dict(M=1000, N=520, K=300)
    kernel = tilecore.jit(program(**sizes), out_idx=OUT_IDX, target=target)
    a, b = make_inputs(np.random.default_rng(0), **sizes)
    c = kernel(a, b)
    np.testing.assert_allclose(c.astype(np.float32), reference(a, b).astype(np.float32), **TOLERANCE)
    print(f"gemm {sizes} on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
