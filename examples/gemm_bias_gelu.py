"""GEMM with a fused epilogue: Y = gelu(A @ B + bias), GELU with the exact erf.

Run: python examples/gemm_bias_gelu.py [target]
"""

import math
import sys

import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
TEST_SIZES = [dict(M=128, N=128, K=64), dict(M=96, N=200, K=72)]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)


def program(M=1024, N=1024, K=1024, block_M=64, block_N=64, block_K=32, dtype="float16",
            accum_dtype="float32"):
    """One block per output tile; the epilogue runs on the fp32 accumulator in registers."""
    inv_sqrt2 = 1.0 / math.sqrt(2.0)

    @T.prim_func
    def gemm_bias_gelu(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                       bias: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            bias_local = T.alloc_fragment((block_N,), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, acc)
            T.copy(bias[bx * block_N], bias_local)
            for i, j in T.Parallel(block_M, block_N):
                x = acc[i, j] + bias_local[j]
                acc[i, j] = 0.5 * x * (1.0 + T.erf(x * inv_sqrt2))
            T.copy(acc, Y[by * block_M, bx * block_N])

    return gemm_bias_gelu


def make_inputs(rng, M=1024, N=1024, K=1024, dtype="float16"):
    return [(rng.standard_normal((M, K)) * 0.5).astype(dtype),
            (rng.standard_normal((K, N)) * 0.5).astype(dtype),
            rng.standard_normal(N).astype(dtype)]


def reference(a, b, bias):
    x = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    erf = np.vectorize(math.erf)
    return (0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))).astype(a.dtype)


def main(target="interp"):
    sizes = dict(M=256, N=320, K=200)
    kernel = tilecore.jit(program(**sizes), out_idx=OUT_IDX, target=target)
    args = make_inputs(np.random.default_rng(0), **sizes)
    y = kernel(*args)
    np.testing.assert_allclose(y.astype(np.float32), reference(*args).astype(np.float32), **TOLERANCE)
    print(f"gemm_bias_gelu {sizes} on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
