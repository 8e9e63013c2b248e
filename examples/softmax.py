"""Row softmax with the online (one-pass max/sum) algorithm in base 2 (exp2).

Run: python examples/softmax.py [target]
"""

import sys

import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
TEST_SIZES = [dict(M=64, N=256), dict(M=50, N=300)]
TOLERANCE = dict(rtol=1e-2, atol=1e-3)
LOG2E = 1.4426950408889634


def program(M=4096, N=4096, block_M=4, block_N=512, dtype="float16"):
    """Pass 1 keeps a running max and rescaled sum per row; pass 2 writes exp2(x - max) / sum."""

    @T.prim_func
    def softmax(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            prev_max = T.alloc_fragment((block_M,), "float32")
            tile_sum = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.fill(row_max, -T.infinity("float32"))
            T.clear(row_sum)
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, k * block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.if_then_else(k * block_N + j < N, x[i, j] * LOG2E, -T.infinity("float32"))
                T.copy(row_max, prev_max)
                T.reduce_max(x, row_max, dim=1, clear=False)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.exp2(x[i, j] - row_max[i])
                T.reduce_sum(x, tile_sum, dim=1)
                for i in T.Parallel(block_M):
                    row_sum[i] = row_sum[i] * T.exp2(prev_max[i] - row_max[i]) + tile_sum[i]
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, k * block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.exp2(x[i, j] * LOG2E - row_max[i]) / row_sum[i]
                T.copy(x, Y[bx * block_M, k * block_N])

    return softmax


def make_inputs(rng, M=4096, N=4096, dtype="float16"):
    return [(rng.standard_normal((M, N)) * 2).astype(dtype)]


def reference(x):
    x32 = x.astype(np.float64)
    e = np.exp(x32 - x32.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(x.dtype)


def main(target="interp"):
    sizes = dict(M=300, N=1000)
    kernel = tilecore.jit(program(**sizes), out_idx=OUT_IDX, target=target)
    (x,) = make_inputs(np.random.default_rng(0), **sizes)
    y = kernel(x)
    np.testing.assert_allclose(y.astype(np.float32), reference(x).astype(np.float32), **TOLERANCE)
    print(f"softmax {sizes} on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
