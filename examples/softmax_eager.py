"""Row softmax in the eager style: the `@tilecore.jit` function is the kernel. `M, N` are
compile-time constants bound from X's shape and the output Y is allocated by the call and
returned. Same program as examples/softmax.py (the factory style) at every size: single pass
when a row fits in registers, the online two-pass algorithm otherwise, chosen when the kernel
is built (the Python `if`s on compile-time values below emit only the branch taken).

Run: python examples/softmax_eager.py [target]
"""

import sys

import numpy as np
from softmax import LOG2E, MAX_REGS, TEST_SIZES, TOLERANCE, make_inputs, reference, row_width  # noqa: F401

import tilecore
import tilecore.language as T
from tilecore.example_protocol import sizes_for

TWIN = "softmax"  # the factory-style example this one builds the same PrimFunc as
OUT_IDX = [-1]


@tilecore.jit
def softmax(X, block_M=1, block_N=None, threads=256, dtype="float16"):
    """Y = softmax(X) over each row (base 2: exp2 of x * log2(e))."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), dtype)
    Y = T.empty((M, N), dtype)
    width = row_width(N, threads)
    if block_N is None:  # a row in registers when it fits MAX_REGS per thread
        block_N = width if block_M * width // threads <= MAX_REGS else threads * 16
    single = block_N >= N
    exact = width == N and M % block_M == 0 if single else N % block_N == 0 and M % block_M == 0
    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
        if single:  # the whole row in registers: X read once, Y written once
            x = T.alloc_fragment((block_M, width), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            for i, j in T.Parallel(block_M, width):
                if exact:
                    x[i, j] = X[bx * block_M + i, j]
                else:  # padding reads as -inf: it changes neither the max nor the sum
                    x[i, j] = T.if_then_else(bx * block_M + i < M and j < N, X[bx * block_M + i, j],
                                             -T.infinity("float32"))
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, width):
                x[i, j] = T.exp2(x[i, j] * LOG2E - row_max[i] * LOG2E)
            T.reduce_sum(x, row_sum, dim=1)
            for i in T.Parallel(block_M):
                row_sum[i] = 1.0 / row_sum[i]
            for i, j in T.Parallel(block_M, width):
                if exact:
                    Y[bx * block_M + i, j] = x[i, j] * row_sum[i]
                elif bx * block_M + i < M and j < N:
                    Y[bx * block_M + i, j] = x[i, j] * row_sum[i]
        else:  # pass 1: running max and rescaled sum per row; pass 2: exp2(x - max) / sum
            x = T.alloc_fragment((block_M, block_N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            prev_max = T.alloc_fragment((block_M,), "float32")
            tile_sum = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    if exact:
                        x[i, j] = X[bx * block_M + i, k * block_N + j] * LOG2E
                    else:
                        x[i, j] = T.if_then_else(bx * block_M + i < M and k * block_N + j < N,
                                                 X[bx * block_M + i, k * block_N + j] * LOG2E,
                                                 -T.infinity("float32"))
                T.reduce_max(x, tile_sum, dim=1)
                for i in T.Parallel(block_M):
                    prev_max[i] = T.if_then_else(k == 0, tile_sum[i], row_max[i])
                    row_max[i] = T.max(prev_max[i], tile_sum[i])
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.exp2(x[i, j] - row_max[i])
                T.reduce_sum(x, tile_sum, dim=1)
                for i in T.Parallel(block_M):
                    row_sum[i] = T.if_then_else(k == 0, tile_sum[i],
                                                row_sum[i] * T.exp2(prev_max[i] - row_max[i]) + tile_sum[i])
            for i in T.Parallel(block_M):
                row_sum[i] = 1.0 / row_sum[i]
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    if exact:
                        Y[bx * block_M + i, k * block_N + j] = \
                            T.exp2(X[bx * block_M + i, k * block_N + j] * LOG2E - row_max[i]) * row_sum[i]
                    elif bx * block_M + i < M and k * block_N + j < N:
                        Y[bx * block_M + i, k * block_N + j] = \
                            T.exp2(X[bx * block_M + i, k * block_N + j] * LOG2E - row_max[i]) * row_sum[i]
    return Y


def program(M=4096, N=4096, block_M=1, block_N=None, threads=256, dtype="float16"):
    """The example protocol's PrimFunc: the eager kernel with its constants given explicitly."""
    return softmax.get_prim_func(M=M, N=N, block_M=block_M, block_N=block_N, threads=threads, dtype=dtype)


def run(inputs, target="interp", **sizes):
    """The call a user makes: the kernel compiled for `target`, called with the tensors (M, N
    bind from X's shape) and the config entries of `sizes`; returns Y."""
    kernel = tilecore.jit(softmax.fn, target=target)  # the same body, compiled for `target`
    return kernel(*inputs, **sizes_for(softmax.fn, sizes))


def main(target="interp"):
    (x,) = make_inputs(np.random.default_rng(0), M=300, N=1000)
    for kind, extra in (("single pass", {}), ("two pass", dict(block_N=256))):
        y = run([x], target, **extra)  # binds M=300, N=1000 from x's shape
        np.testing.assert_allclose(y.astype(np.float32), reference(x).astype(np.float32), **TOLERANCE)
        print(f"softmax_eager {x.shape} ({kind}) on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
