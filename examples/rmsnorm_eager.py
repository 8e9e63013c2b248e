"""RMSNorm in the eager style: the `@tilecore.jit` function is the kernel. `M, N` are
compile-time constants bound from X's shape and the output Y is allocated by the call and
returned. Same program as examples/rmsnorm.py (the factory style) at every size: single pass when
`block_M` rows fit in registers, two passes over `block_N`-wide tiles otherwise, chosen when the
kernel is built (the Python `if`s on compile-time values below emit only the branch taken).

Run: python examples/rmsnorm_eager.py [target]
"""

import sys

import numpy as np
from rmsnorm import MAX_REGS, TEST_SIZES, TOLERANCE, make_inputs, reference, row_width  # noqa: F401

import tilecore
import tilecore.language as T
from tilecore.example_protocol import sizes_for

TWIN = "rmsnorm"  # the factory-style example this one builds the same PrimFunc as
OUT_IDX = [-1]


@tilecore.jit
def rmsnorm(X, W, block_M=1, block_N=None, threads=256, eps=1e-6, dtype="float16", x_policy=None,
            y_policy=None):
    """Y = X / sqrt(mean(X^2) + eps) * W over each row; `x_policy` / `y_policy` are the L2
    eviction policies of an exact single-pass row's read of X and write of Y (via T.copy)."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), dtype)
    W: T.Tensor((N,), dtype)
    Y = T.empty((M, N), dtype)
    width = row_width(N, threads)
    if block_N is None:  # a row in registers when it fits MAX_REGS per thread
        block_N = width if block_M * width // threads <= MAX_REGS else threads * 16
    single = block_N >= N
    exact = width == N and M % block_M == 0 if single else N % block_N == 0 and M % block_M == 0
    x_copy, y_copy = single and exact and x_policy is not None, single and exact and y_policy is not None
    x_plain, y_plain = exact and x_policy is None, exact and y_policy is None
    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
        if single:  # the whole row in registers: X read once, Y written once
            x = T.alloc_fragment((block_M, width), "float32")
            sq = T.alloc_fragment((block_M, width), "float32")
            scale = T.alloc_fragment((block_M,), "float32")
            if x_copy:
                T.copy(X[bx * block_M, 0], x, eviction_policy=x_policy)
            for i, j in T.Parallel(block_M, width):
                if x_plain:
                    x[i, j] = X[bx * block_M + i, j]
                elif not exact:  # padding reads as 0: it adds nothing to the sum of squares
                    x[i, j] = T.if_then_else(bx * block_M + i < M and j < N, X[bx * block_M + i, j], 0.0)
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, scale, dim=1)
            for i in T.Parallel(block_M):
                scale[i] = T.rsqrt(scale[i] * (1.0 / N) + eps)
            for i, j in T.Parallel(block_M, width):
                if y_copy:
                    x[i, j] = x[i, j] * scale[i] * W[j]
                elif y_plain:
                    Y[bx * block_M + i, j] = x[i, j] * scale[i] * W[j]
                elif bx * block_M + i < M and j < N:
                    Y[bx * block_M + i, j] = x[i, j] * scale[i] * W[j]
            if y_copy:
                T.copy(x, Y[bx * block_M, 0], eviction_policy=y_policy)
        else:  # pass 1: the sum of squares per row in fp32; pass 2: scale and write
            x = T.alloc_fragment((block_M, block_N), "float32")
            sq = T.alloc_fragment((block_M, block_N), "float32")
            ssum = T.alloc_fragment((block_M,), "float32")
            scale = T.alloc_fragment((block_M,), "float32")
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    if exact:
                        x[i, j] = X[bx * block_M + i, k * block_N + j]
                    else:
                        x[i, j] = T.if_then_else(bx * block_M + i < M and k * block_N + j < N,
                                                 X[bx * block_M + i, k * block_N + j], 0.0)
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, scale, dim=1)
                for i in T.Parallel(block_M):
                    ssum[i] = T.if_then_else(k == 0, scale[i], ssum[i] + scale[i])
            for i in T.Parallel(block_M):
                scale[i] = T.rsqrt(ssum[i] * (1.0 / N) + eps)
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    if exact:
                        Y[bx * block_M + i, k * block_N + j] = \
                            X[bx * block_M + i, k * block_N + j] * scale[i] * W[k * block_N + j]
                    elif bx * block_M + i < M and k * block_N + j < N:
                        Y[bx * block_M + i, k * block_N + j] = \
                            X[bx * block_M + i, k * block_N + j] * scale[i] * W[k * block_N + j]
    return Y


def program(M=4096, N=4096, block_M=1, block_N=None, threads=256, eps=1e-6, dtype="float16",
            x_policy=None, y_policy=None):
    """The example protocol's PrimFunc: the eager kernel with its constants given explicitly."""
    return rmsnorm.get_prim_func(M=M, N=N, block_M=block_M, block_N=block_N, threads=threads, eps=eps,
                                 dtype=dtype, x_policy=x_policy, y_policy=y_policy)


def run(inputs, target="interp", **sizes):
    """The call a user makes: the kernel compiled for `target`, called with the tensors (M, N
    bind from X's shape) and the config entries of `sizes`; returns Y."""
    kernel = tilecore.jit(rmsnorm.fn, target=target)  # the same body, compiled for `target`
    return kernel(*inputs, **sizes_for(rmsnorm.fn, sizes))


def main(target="interp"):
    args = make_inputs(np.random.default_rng(0), M=300, N=1000)
    for kind, extra in (("single pass", {}), ("two pass", dict(block_N=256))):
        y = run(args, target, **extra)  # binds M=300, N=1000 from X's shape
        np.testing.assert_allclose(y.astype(np.float32), reference(*args).astype(np.float32), **TOLERANCE)
        print(f"rmsnorm_eager {args[0].shape} ({kind}) on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
