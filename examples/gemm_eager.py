"""Tiled GEMM in the eager style: the `@tilecore.jit` function *is* the kernel (TileLang's default
style). `M, N, K` are compile-time constants bound from the arguments' shapes; `C` is the output
the call allocates and returns. Same PrimFunc as examples/gemm.py (the factory style) with its
default config (no rasterization panel, no split-K).

Run: python examples/gemm_eager.py [target]
"""

import sys

import numpy as np

import tilecore
import tilecore.language as T
from tilecore.example_protocol import sizes_for

TWIN = "gemm"  # the factory-style example this one builds the same PrimFunc as
OUT_IDX = [-1]
TEST_SIZES = [dict(M=128, N=128, K=64), dict(M=200, N=136, K=100)]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)


@tilecore.jit
def matmul(A, B, block_M=128, block_N=128, block_K=32, dtype="float16", accum_dtype="float32",
           num_stages=3, threads=128):
    """C = A @ B, one block per (block_M, block_N) output tile; the edges are masked."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C


def program(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128):
    """The example protocol's PrimFunc: the eager kernel with its constants given explicitly."""
    return matmul.get_prim_func(M=M, N=N, K=K, block_M=block_M, block_N=block_N, block_K=block_K,
                                num_stages=num_stages, threads=threads)


def make_inputs(rng, M=1024, N=1024, K=1024, dtype="float16"):
    return [rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)]


def reference(a, b):
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(a.dtype)


def run(inputs, target="interp", **sizes):
    """The call a user makes: the kernel compiled for `target`, called with the tensors (M, N, K
    bind from their shapes) and the config entries of `sizes`; returns C."""
    kernel = tilecore.jit(matmul.fn, target=target)  # the same body, compiled for `target`
    return kernel(*inputs, **sizes_for(matmul.fn, sizes))


def main(target="interp"):
    a, b = make_inputs(np.random.default_rng(0), M=1000, N=520, K=300)
    c = run([a, b], target)  # binds M=1000, N=520, K=300 from the shapes, compiles, runs
    np.testing.assert_allclose(c.astype(np.float32), reference(a, b).astype(np.float32), **TOLERANCE)
    print(f"gemm_eager {a.shape} @ {b.shape} on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
