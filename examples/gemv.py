"""GEMV-shaped GEMM for tiny M (decoding: one token times a weight matrix): C = A @ B with A
[M, K], B [K, N] row-major, fp32 accumulation, C [M, N] in the inputs' dtype.

At M = 1 the product is bound by reading B once (2 N K bytes), so the kernel is built for
bandwidth, not for tensor cores: one block per `block_N` columns (and per row of A), each
thread reads 16-byte runs of B rows straight into registers (no shared-memory staging, no
barrier in the loop) and multiplies them by the matching entry of A. `block_K` rows of B are
in flight per loop iteration (all loaded before the first multiply-add waits for one), and
the block's partial sums are reduced over its rows once at the end. Rows of A past the first
each read B again (from L2): for M >= 16 the tensor-core GEMM (examples/gemm.py with
block_M=16) is the better program.

Run: python examples/gemv.py [target]
"""

import sys

import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
TEST_SIZES = [dict(M=1, N=256, K=512, block_K=128), dict(M=2, N=100, K=300, block_K=64)]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)


def program(M=1, N=4096, K=4096, block_N=32, block_K=512, threads=256, dtype="float16"):
    """C = A @ B, one block per (block_N columns, row of A); each loop iteration loads a
    `block_K` x `block_N` tile of B into registers (block_K * block_N / threads elements per
    thread, in 16-byte runs), then multiplies: all of a tile's loads are issued before the
    first product needs one. Ragged N and K are guarded element by element (zeros add
    nothing)."""
    exact = N % block_N == 0 and K % block_K == 0

    @T.prim_func
    def gemv(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
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

    return gemv


def make_inputs(rng, M=1, N=4096, K=4096, dtype="float16"):
    return [rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)]


def reference(a, b):
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(a.dtype)


def main(target="interp"):
    sizes = dict(M=1, N=520, K=300)
    kernel = tilecore.jit(program(**sizes), out_idx=OUT_IDX, target=target)
    a, b = make_inputs(np.random.default_rng(0), **sizes)
    c = kernel(a, b)
    np.testing.assert_allclose(c.astype(np.float32), reference(a, b).astype(np.float32), **TOLERANCE)
    print(f"gemv {sizes} on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
