"""fp8 GEMM (e4m3 x e4m3 -> fp32 -> bf16, per-tensor scales) in the eager style: the
`@tilecore.jit` function is the kernel. `M, N, K` are compile-time constants bound from A's
(M, K) and B's (N, K) shapes; Y is allocated by the call and returned. Same program as
examples/gemm_fp8.py (the factory style); `config(M, N, K)` there is its measured large tile.

Run: python examples/gemm_fp8_eager.py [target]
"""

import sys

import numpy as np
from gemm_fp8 import TEST_SIZES, TOLERANCE, make_inputs, reference  # noqa: F401

import tilecore
import tilecore.language as T
from tilecore.example_protocol import sizes_for

TWIN = "gemm_fp8"  # the factory-style example this one builds the same PrimFunc as
OUT_IDX = [-1]


@tilecore.jit
def gemm_fp8(A, B, block_M=128, block_N=128, block_K=128, dtype="float8_e4m3fn", out_dtype="bfloat16",
             scale_a=0.5, scale_b=2.0, num_stages=3, threads=128, panel=0):
    """Y = (scale_a * scale_b) * (A @ B^T), both operands K-major; `panel` > 0 rasterizes the
    blocks in panels of that many grid rows (T.use_swizzle)."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((N, K), dtype)
    Y = T.empty((M, N), out_dtype)
    scale = float(scale_a) * float(scale_b)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        if panel:
            T.use_swizzle(panel)
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_N, block_K), dtype)
        acc = T.alloc_fragment((block_M, block_N), "float32")
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[bx * block_N, k * block_K], B_shared)
            T.gemm(A_shared, B_shared, acc, transpose_B=True)
        for i, j in T.Parallel(block_M, block_N):
            acc[i, j] = acc[i, j] * scale
        T.copy(acc, Y[by * block_M, bx * block_N])
    return Y


def program(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=128, dtype="float8_e4m3fn",
            out_dtype="bfloat16", scale_a=0.5, scale_b=2.0, num_stages=3, threads=128, panel=0):
    """The example protocol's PrimFunc: the eager kernel with its constants given explicitly."""
    return gemm_fp8.get_prim_func(M=M, N=N, K=K, block_M=block_M, block_N=block_N, block_K=block_K,
                                  dtype=dtype, out_dtype=out_dtype, scale_a=scale_a, scale_b=scale_b,
                                  num_stages=num_stages, threads=threads, panel=panel)


def run(inputs, target="interp", **sizes):
    """The call a user makes: the kernel compiled for `target`, called with the tensors (M, N, K
    bind from their shapes) and the config entries of `sizes`; returns Y."""
    kernel = tilecore.jit(gemm_fp8.fn, target=target)  # the same body, compiled for `target`
    return kernel(*inputs, **sizes_for(gemm_fp8.fn, sizes))


def main(target="interp"):
    a, b = make_inputs(np.random.default_rng(0), M=200, N=136, K=256)
    y = run([a, b], target)
    np.testing.assert_allclose(np.asarray(y, dtype=np.float32), reference(a, b).astype(np.float32),
                               **TOLERANCE)
    print(f"gemm_fp8_eager {a.shape} @ {b.shape}^T on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
