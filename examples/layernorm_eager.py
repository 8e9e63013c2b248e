"""LayerNorm in the eager style: the `@tilecore.jit` function is the kernel. `M, N` are
compile-time constants bound from X's shape and the output Y is allocated by the call and
returned. Same program as examples/layernorm.py (the factory style) at every size: single pass
(centred variance) when `block_M` rows fit in registers, two passes over `block_N`-wide tiles
otherwise, chosen when the kernel is built.

Run: python examples/layernorm_eager.py [target]
"""

import sys

import numpy as np
from layernorm import MAX_REGS, TEST_SIZES, TOLERANCE, make_inputs, reference, row_width  # noqa: F401

import tilecore
import tilecore.language as T
from tilecore.example_protocol import sizes_for

TWIN = "layernorm"  # the factory-style example this one builds the same PrimFunc as
OUT_IDX = [-1]


@tilecore.jit
def layernorm(X, W, B, block_M=1, block_N=None, threads=256, eps=1e-5, dtype="float16"):
    """Y = (X - mean) / sqrt(var + eps) * W + B over each row."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), dtype)
    W: T.Tensor((N,), dtype)
    B: T.Tensor((N,), dtype)
    Y = T.empty((M, N), dtype)
    width = row_width(N, threads)
    if block_N is None:  # a row in registers when it fits MAX_REGS per thread
        block_N = width if block_M * width // threads <= MAX_REGS else threads * 16
    single = block_N >= N
    exact = width == N and M % block_M == 0 if single else N % block_N == 0 and M % block_M == 0
    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
        if single:  # the whole row in registers: X read once, Y written once
            x = T.alloc_fragment((block_M, width), "float32")
            sq = T.alloc_fragment((block_M, width), "float32")
            mean = T.alloc_fragment((block_M,), "float32")
            rstd = T.alloc_fragment((block_M,), "float32")
            for i, j in T.Parallel(block_M, width):
                if exact:
                    x[i, j] = X[bx * block_M + i, j]
                else:  # padding reads as 0: it adds nothing to the sum
                    x[i, j] = T.if_then_else(bx * block_M + i < M and j < N, X[bx * block_M + i, j], 0.0)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] * (1.0 / N)
            for i, j in T.Parallel(block_M, width):
                if exact:
                    x[i, j] = x[i, j] - mean[i]
                else:  # padding stays 0, out of the variance
                    x[i, j] = T.if_then_else(j < N, x[i, j] - mean[i], 0.0)
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_M):
                rstd[i] = T.rsqrt(rstd[i] * (1.0 / N) + eps)
            for i, j in T.Parallel(block_M, width):
                if exact:
                    Y[bx * block_M + i, j] = x[i, j] * rstd[i] * W[j] + B[j]
                elif bx * block_M + i < M and j < N:
                    Y[bx * block_M + i, j] = x[i, j] * rstd[i] * W[j] + B[j]
        else:  # pass 1: sum and sum of squares in fp32 (var = E[x^2] - mean^2); pass 2: normalize
            x = T.alloc_fragment((block_M, block_N), "float32")
            sq = T.alloc_fragment((block_M, block_N), "float32")
            tile_sum = T.alloc_fragment((block_M,), "float32")
            tile_sq = T.alloc_fragment((block_M,), "float32")
            mean = T.alloc_fragment((block_M,), "float32")
            rstd = T.alloc_fragment((block_M,), "float32")
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    if exact:
                        x[i, j] = X[bx * block_M + i, k * block_N + j]
                    else:
                        x[i, j] = T.if_then_else(bx * block_M + i < M and k * block_N + j < N,
                                                 X[bx * block_M + i, k * block_N + j], 0.0)
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x, tile_sum, dim=1)
                T.reduce_sum(sq, tile_sq, dim=1)
                for i in T.Parallel(block_M):
                    mean[i] = T.if_then_else(k == 0, tile_sum[i], mean[i] + tile_sum[i])
                    rstd[i] = T.if_then_else(k == 0, tile_sq[i], rstd[i] + tile_sq[i])
            for i in T.Parallel(block_M):
                mean[i] = mean[i] * (1.0 / N)
                rstd[i] = T.rsqrt(T.max(rstd[i] * (1.0 / N) - mean[i] * mean[i], 0.0) + eps)
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    if exact:
                        Y[bx * block_M + i, k * block_N + j] = \
                            (X[bx * block_M + i, k * block_N + j] - mean[i]) * rstd[i] * W[k * block_N + j] \
                            + B[k * block_N + j]
                    elif bx * block_M + i < M and k * block_N + j < N:
                        Y[bx * block_M + i, k * block_N + j] = \
                            (X[bx * block_M + i, k * block_N + j] - mean[i]) * rstd[i] * W[k * block_N + j] \
                            + B[k * block_N + j]
    return Y


def program(M=4096, N=4096, block_M=1, block_N=None, threads=256, eps=1e-5, dtype="float16"):
    """The example protocol's PrimFunc: the eager kernel with its constants given explicitly."""
    return layernorm.get_prim_func(M=M, N=N, block_M=block_M, block_N=block_N, threads=threads, eps=eps,
                                   dtype=dtype)


def run(inputs, target="interp", **sizes):
    """The call a user makes: the kernel compiled for `target`, called with the tensors (M, N
    bind from X's shape) and the config entries of `sizes`; returns Y."""
    kernel = tilecore.jit(layernorm.fn, target=target)  # the same body, compiled for `target`
    return kernel(*inputs, **sizes_for(layernorm.fn, sizes))


def main(target="interp"):
    args = make_inputs(np.random.default_rng(0), M=300, N=1000)
    for kind, extra in (("single pass", {}), ("two pass", dict(block_N=256))):
        y = run(args, target, **extra)  # binds M=300, N=1000 from X's shape
        np.testing.assert_allclose(y.astype(np.float32), reference(*args).astype(np.float32), **TOLERANCE)
        print(f"layernorm_eager {args[0].shape} ({kind}) on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
