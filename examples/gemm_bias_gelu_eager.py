"""GEMM with a fused bias + GELU epilogue in the eager style: the `@tilecore.jit` function is
the kernel. `M, N, K` are compile-time constants bound from the tensors' shapes; Y is allocated
by the call and returned. Same program as examples/gemm_bias_gelu.py (the factory style).

Run: python examples/gemm_bias_gelu_eager.py [target]
"""

import math
import sys

import numpy as np
from gemm_bias_gelu import TEST_SIZES, TOLERANCE, make_inputs, reference  # noqa: F401

import tilecore
import tilecore.language as T
from tilecore.example_protocol import sizes_for

TWIN = "gemm_bias_gelu"  # the factory-style example this one builds the same PrimFunc as
OUT_IDX = [-1]
INV_SQRT2 = 1.0 / math.sqrt(2.0)


@tilecore.jit
def gemm_bias_gelu(A, B, bias, block_M=64, block_N=64, block_K=32, dtype="float16", accum_dtype="float32"):
    """Y = gelu(A @ B + bias) (the exact erf GELU) on the fp32 accumulator in registers."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    bias: T.Tensor((N,), dtype)
    Y = T.empty((M, N), dtype)
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
            acc[i, j] = 0.5 * x * (1.0 + T.erf(x * INV_SQRT2))
        T.copy(acc, Y[by * block_M, bx * block_N])
    return Y


def program(M=1024, N=1024, K=1024, block_M=64, block_N=64, block_K=32, dtype="float16",
            accum_dtype="float32"):
    """The example protocol's PrimFunc: the eager kernel with its constants given explicitly."""
    return gemm_bias_gelu.get_prim_func(M=M, N=N, K=K, block_M=block_M, block_N=block_N, block_K=block_K,
                                        dtype=dtype, accum_dtype=accum_dtype)


def run(inputs, target="interp", **sizes):
    """The call a user makes: the kernel compiled for `target`, called with the tensors (M, N, K
    bind from their shapes) and the config entries of `sizes`; returns Y."""
    kernel = tilecore.jit(gemm_bias_gelu.fn, target=target)  # the same body, compiled for `target`
    return kernel(*inputs, **sizes_for(gemm_bias_gelu.fn, sizes))


def main(target="interp"):
    args = make_inputs(np.random.default_rng(0), M=256, N=320, K=200)
    y = run(args, target)
    np.testing.assert_allclose(y.astype(np.float32), reference(*args).astype(np.float32), **TOLERANCE)
    print(f"gemm_bias_gelu_eager {args[0].shape} @ {args[1].shape} on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
