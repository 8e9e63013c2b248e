"""Eager-style `@tilecore.jit` on the emulated thread lowering (emu:sm_80): the same body runs
and matches NumPy, compiled once per distinct binding of its T.const."""

import numpy as np

import tilecore
import tilecore.language as T


@tilecore.jit(target="emu:sm_80")
def matmul_relu(A, B, block=32):
    """C = relu(A @ B) in fp16 with an fp32 accumulator."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), "float16")
    B: T.Tensor((K, N), "float16")
    C = T.empty((M, N), "float16")
    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
        A_s = T.alloc_shared((block, block), "float16")
        B_s = T.alloc_shared((block, block), "float16")
        acc = T.alloc_fragment((block, block), "float32")
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, block), num_stages=2):
            T.copy(A[by * block, k * block], A_s)
            T.copy(B[k * block, bx * block], B_s)
            T.gemm(A_s, B_s, acc)
        for i, j in T.Parallel(block, block):
            acc[i, j] = T.max(acc[i, j], 0)
        T.copy(acc, C[by * block, bx * block])
    return C


def test_eager_gemm_on_emu_matches_numpy():
    rng = np.random.default_rng(3)
    for m, n, k in [(64, 32, 32), (40, 48, 20)]:
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        ref = np.maximum(a.astype(np.float32) @ b.astype(np.float32), 0)
        np.testing.assert_allclose(matmul_relu(a, b).astype(np.float32), ref, rtol=1e-2, atol=1e-2)
    assert len(matmul_relu._cache) == 2
    assert "mma" in matmul_relu.compile(M=64, N=32, K=32).get_ir("final")
