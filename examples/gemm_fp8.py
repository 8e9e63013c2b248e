"""fp8 GEMM: e4m3 x e4m3 -> fp32 accumulate -> bf16, with per-tensor scales in the epilogue.

Y = (scale_a * scale_b) * (A @ B^T), A (M, K) and B (N, K) in float8_e4m3fn: both operands are
K-major, the layout fp8 tensor-core instructions read (on cuda:sm_90a, wgmma m64nNk32).

Run: python examples/gemm_fp8.py [target]
"""

import sys

import ml_dtypes
import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
TEST_SIZES = [dict(M=64, N=64, K=64), dict(M=80, N=72, K=160)]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)


def program(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=128, dtype="float8_e4m3fn",
            out_dtype="bfloat16", scale_a=0.5, scale_b=2.0, num_stages=3, threads=128, panel=0,
            stream_k=False):
    """One block per (block_M, block_N) output tile; the scales multiply the fp32 accumulator.
    `panel` > 0 rasterizes the blocks in panels of that many grid rows (T.use_swizzle).
    `stream_k=True`: the program is `(A, B, W, Flags, Y)` (shapes from `stream_k_shapes`) and
    calls `T.stream_k(W, Flags)`, as examples/gemm.py's (the last partial wave of a persistent
    grid split over every multiprocessor; the scales apply once, to the summed tile)."""
    scale = float(scale_a) * float(scale_b)
    (w_len,), (f_len,) = (shape for shape, _ in stream_k_shapes(M, N, block_M, block_N))

    @T.prim_func
    def gemm_fp8_stream_k(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
                          W: T.Tensor((w_len,), "float32"), Flags: T.Tensor((f_len,), "int32"),
                          Y: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            if panel:
                T.use_swizzle(panel)
            T.stream_k(W, Flags)
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = acc[i, j] * scale
            T.copy(acc, Y[by * block_M, bx * block_N])

    if stream_k:
        return gemm_fp8_stream_k

    @T.prim_func
    def gemm_fp8(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), Y: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            if panel:
                T.use_swizzle(panel)
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = acc[i, j] * scale
            T.copy(acc, Y[by * block_M, bx * block_N])

    return gemm_fp8


def stream_k_shapes(M: int, N: int, block_M: int, block_N: int, sms: int = 132, **_) -> list:
    """[(shape, dtype)] of `program(stream_k=True)`'s W and Flags (as examples/gemm.py's)."""
    tiles = -(-M // block_M) * -(-N // block_N)
    return [((sms * block_M * block_N,), "float32"), ((tiles,), "int32")]


def config(M: int, N: int, K: int, sms: int = 132) -> dict:
    """The `program` config chosen for large fp8 GEMMs on the H200 (BENCHMARKS.md, issue 10):
    128x256x128 tiles (two m64n256k32 consumer warpgroups), 3 stages beside the TMA-store
    staging tile, blocks rasterized in panels of 8 grid rows (interleaved against
    torch._scaled_mm at 8192^3: 1.000 with the panel, 0.992-0.993 without), and stream-K
    where a partial last wave leaves each block at least 26 idle k steps: twice the ~13 k
    steps the fix-up cost a bf16 128x256x64 tile (examples/gemm.py), fp8 k steps taking half
    that time (8192^3: 31 of 64; measured 1.016 against 0.999 without). The program then
    takes W and Flags (`stream_k_shapes`)."""
    cfg = dict(block_M=128, block_N=256, block_K=128, num_stages=3, threads=256, panel=8)
    tiles = -(-M // 128) * -(-N // 256)
    r = tiles % sms
    if tiles > sms and r and (1 - r / sms) * -(-K // 128) >= 26:
        cfg["stream_k"] = True
    return cfg


def make_inputs(rng, M=1024, N=1024, K=1024, dtype="float8_e4m3fn"):
    npd = getattr(ml_dtypes, dtype)
    return [rng.standard_normal((M, K)).astype(npd), rng.standard_normal((N, K)).astype(npd)]


def reference(a, b, scale_a=0.5, scale_b=2.0):
    y = (a.astype(np.float32) @ b.astype(np.float32).T) * np.float32(scale_a * scale_b)
    return y.astype(ml_dtypes.bfloat16)


def main(target="interp"):
    sizes = dict(M=200, N=136, K=256)
    kernel = tilecore.jit(program(**sizes), out_idx=OUT_IDX, target=target)
    a, b = make_inputs(np.random.default_rng(0), **sizes)
    y = kernel(a, b)
    np.testing.assert_allclose(np.asarray(y, dtype=np.float32), reference(a, b).astype(np.float32),
                               **TOLERANCE)
    print(f"gemm_fp8 {sizes} on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
