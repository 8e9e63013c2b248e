"""FlashAttention forward (online softmax over K/V tiles), causal and non-causal.

Tensors are laid out [batch, seq, heads, dim]. Run: python examples/flash_attention.py [target]
"""

import sys

import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
TEST_SIZES = [dict(batch=1, heads=2, seq_len=128, dim=64, is_causal=False),
              dict(batch=1, heads=2, seq_len=128, dim=64, is_causal=True)]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)


def program(batch=1, heads=8, seq_len=1024, dim=64, is_causal=False, block_M=64, block_N=64,
            num_stages=1, threads=128, dtype="float16"):
    """One block per (query tile, head, batch); seq_len must be a multiple of the tiles."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # softmax in base 2
    shape = (batch, seq_len, heads, dim)
    accum = "float32"

    @T.prim_func
    def flash_attention(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                        Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            O_shared = T.alloc_shared((block_M, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum)
            scores_max = T.alloc_fragment((block_M,), accum)
            scores_max_prev = T.alloc_fragment((block_M,), accum)
            scores_scale = T.alloc_fragment((block_M,), accum)
            scores_sum = T.alloc_fragment((block_M,), accum)
            logsum = T.alloc_fragment((block_M,), accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum))
            loop_range = (T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                          if is_causal else T.ceildiv(seq_len, block_N))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0,
                                                     -T.infinity(acc_s.dtype))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.copy(acc_s, acc_s_cast)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return flash_attention


def make_inputs(rng, batch=1, heads=8, seq_len=1024, dim=64, is_causal=False, dtype="float16"):
    shape = (batch, seq_len, heads, dim)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(3)]


def reference(q, k, v, is_causal=False):
    q64, k64, v64 = (x.astype(np.float64).transpose(0, 2, 1, 3) for x in (q, k, v))
    s = q64 @ k64.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if is_causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return (p @ v64).transpose(0, 2, 1, 3).astype(q.dtype)


def main(target="interp"):
    for causal in (False, True):
        sizes = dict(batch=1, heads=4, seq_len=256, dim=64, is_causal=causal)
        kernel = tilecore.jit(program(**sizes), out_idx=OUT_IDX, target=target)
        q, k, v = make_inputs(np.random.default_rng(0), **sizes)
        o = kernel(q, k, v)
        np.testing.assert_allclose(o.astype(np.float32), reference(q, k, v, causal).astype(np.float32),
                                   **TOLERANCE)
        print(f"flash_attention {sizes} on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
