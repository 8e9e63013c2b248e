"""GEMV-shaped GEMM (tiny M, decoding) in the eager style: the `@tilecore.jit` function is the
kernel. `M, N, K` are compile-time constants bound from A's and B's shapes; C is allocated by
the call and returned. Same program as examples/gemv.py (the factory style): one block per
(`block_N` columns, row of A), B read straight into registers in 16-byte runs.

Run: python examples/gemv_eager.py [target]
"""

import sys

import numpy as np
from gemv import TEST_SIZES, TOLERANCE, make_inputs, reference  # noqa: F401

import tilecore
import tilecore.language as T
from tilecore.example_protocol import sizes_for

TWIN = "gemv"  # the factory-style example this one builds the same PrimFunc as
OUT_IDX = [-1]


@tilecore.jit
def gemv(A, B, block_N=32, block_K=512, threads=256, dtype="float16"):
    """C = A @ B with fp32 accumulation; ragged N and K are guarded element by element."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)
    exact = N % block_N == 0 and K % block_K == 0
    with T.Kernel(T.ceildiv(N, block_N), M, threads=threads) as (bx, by):
        b = T.alloc_fragment((block_K, block_N), dtype)
        acc = T.alloc_fragment((block_K, block_N), "float32")
        col = T.alloc_fragment((block_N,), "float32")
        T.clear(acc)
        for ko in T.serial(T.ceildiv(K, block_K)):
            for r, c in T.Parallel(block_K, block_N):  # the tile's loads first
                if exact:
                    b[r, c] = B[ko * block_K + r, bx * block_N + c]
                else:
                    b[r, c] = T.if_then_else(ko * block_K + r < K and bx * block_N + c < N,
                                             B[ko * block_K + r, bx * block_N + c], 0)
            for r, c in T.Parallel(block_K, block_N):
                if exact:
                    a = A[by, ko * block_K + r]
                else:
                    a = T.if_then_else(ko * block_K + r < K, A[by, ko * block_K + r], 0)
                acc[r, c] += T.cast(a, "float32") * T.cast(b[r, c], "float32")
        T.reduce_sum(acc, col, dim=0)
        for c in T.Parallel(block_N):
            if exact:
                C[by, bx * block_N + c] = col[c]
            elif bx * block_N + c < N:
                C[by, bx * block_N + c] = col[c]
    return C


def program(M=1, N=4096, K=4096, block_N=32, block_K=512, threads=256, dtype="float16"):
    """The example protocol's PrimFunc: the eager kernel with its constants given explicitly."""
    return gemv.get_prim_func(M=M, N=N, K=K, block_N=block_N, block_K=block_K, threads=threads, dtype=dtype)


def run(inputs, target="interp", **sizes):
    """The call a user makes: the kernel compiled for `target`, called with the tensors (M, N, K
    bind from their shapes) and the config entries of `sizes`; returns C."""
    kernel = tilecore.jit(gemv.fn, target=target)  # the same body, compiled for `target`
    return kernel(*inputs, **sizes_for(gemv.fn, sizes))


def main(target="interp"):
    a, b = make_inputs(np.random.default_rng(0), M=1, N=520, K=300)
    c = run([a, b], target)
    np.testing.assert_allclose(c.astype(np.float32), reference(a, b).astype(np.float32), **TOLERANCE)
    print(f"gemv_eager {a.shape} @ {b.shape} on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
