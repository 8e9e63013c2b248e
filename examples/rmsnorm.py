"""RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, one block per `block_M` rows.

Run: python examples/rmsnorm.py [target]
"""

import sys

import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
TEST_SIZES = [dict(M=64, N=256), dict(M=37, N=200)]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)


def program(M=4096, N=4096, block_M=4, block_N=512, eps=1e-6, dtype="float16"):
    """Pass 1 accumulates sum of squares per row in fp32; pass 2 scales and writes."""

    @T.prim_func
    def rmsnorm(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            w = T.alloc_fragment((block_N,), "float32")
            sq = T.alloc_fragment((block_M, block_N), "float32")
            ssum = T.alloc_fragment((block_M,), "float32")
            scale = T.alloc_fragment((block_M,), "float32")
            T.clear(ssum)
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, k * block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, ssum, dim=1, clear=False)
            for i in T.Parallel(block_M):
                scale[i] = T.rsqrt(ssum[i] / N + eps)
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, k * block_N], x)
                T.copy(W[k * block_N], w)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = x[i, j] * scale[i] * w[j]
                T.copy(x, Y[bx * block_M, k * block_N])

    return rmsnorm


def make_inputs(rng, M=4096, N=4096, dtype="float16"):
    return [rng.standard_normal((M, N)).astype(dtype), rng.uniform(0.5, 1.5, N).astype(dtype)]


def reference(x, w, eps=1e-6):
    x64 = x.astype(np.float64)
    r = 1.0 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps)
    return (x64 * r * w.astype(np.float64)).astype(x.dtype)


def main(target="interp"):
    sizes = dict(M=300, N=1000)
    kernel = tilecore.jit(program(**sizes), out_idx=OUT_IDX, target=target)
    args = make_inputs(np.random.default_rng(0), **sizes)
    y = kernel(*args)
    np.testing.assert_allclose(y.astype(np.float32), reference(*args).astype(np.float32), **TOLERANCE)
    print(f"rmsnorm {sizes} on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
