"""Multi-head latent attention (DeepSeek-V2/V3 MLA) decoding, split over the KV length.

Every query head attends to one shared latent cache: the score of head h with position s is
q_nope[h] . KV[s] + q_pe[h] . K_pe[s] (latent width `dim` = 512, rotary width `pe_dim` = 64),
and the output is sum_s p[h, s] KV[s] (the latent is also the value). Q [batch, heads, dim],
Q_pe [batch, heads, pe_dim], KV [batch, seq_kv, dim], K_pe [batch, seq_kv, pe_dim]. One block
takes `block_H` heads of one sequence and one KV split; partial outputs and base-2 LSEs are
merged by flash_decoding.combine_program. The default softmax scale is 1/sqrt(dim + pe_dim).

Run: python examples/mla_decoding.py [target]
"""

import math
import os
import sys

import numpy as np

import tilecore
import tilecore.language as T
from tilecore.example_protocol import sizes_for

OUT_IDX = [-2, -1]
# latent 256 + rope 32 here: at 512 + 64 the query and KV tiles (>= 16 rows each) need 56 KB of
# shared memory, over Metal apple7's 32 KB; backends/emu/tests/test_emu_attention.py runs the
# DeepSeek widths (512 + 64)
TEST_SIZES = [dict(batch=1, heads=16, seq_kv=80, dim=256, pe_dim=32, num_split=2, block_N=32, threads=128)]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)
LOG2E = 1.4426950408889634


def program(batch=32, heads=128, seq_kv=8192, dim=512, pe_dim=64, num_split=4, block_H=64, block_N=32,
            num_stages=2, threads=256, dtype="float16", sm_scale=None):
    """The split kernel: one block per (head tile, split, sequence)."""
    if heads % block_H and heads > block_H:
        raise ValueError(f"heads ({heads}) must be a multiple of block_H ({block_H})")
    block_H = min(block_H, heads)
    scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim + pe_dim)) * LOG2E
    accum = "float32"
    n_tiles = -(-seq_kv // block_N)
    per_split = -(-n_tiles // num_split)
    mask_tail = seq_kv % block_N != 0

    @T.prim_func
    def mla_decoding(Q: T.Tensor((batch, heads, dim), dtype), Q_pe: T.Tensor((batch, heads, pe_dim), dtype),
                     KV: T.Tensor((batch, seq_kv, dim), dtype),
                     K_pe: T.Tensor((batch, seq_kv, pe_dim), dtype),
                     O_partial: T.Tensor((batch, heads, num_split, dim), accum),
                     LSE_partial: T.Tensor((batch, heads, num_split), accum)):
        with T.Kernel(heads // block_H, num_split, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_H, dim), dtype)
            Qpe_shared = T.alloc_shared((block_H, pe_dim), dtype)
            KV_shared = T.alloc_shared((block_N, dim), dtype)
            Kpe_shared = T.alloc_shared((block_N, pe_dim), dtype)
            acc_s = T.alloc_fragment((block_H, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_H, block_N), dtype)
            acc_o = T.alloc_fragment((block_H, dim), accum)
            scores_max = T.alloc_fragment((block_H,), accum)
            scores_max_prev = T.alloc_fragment((block_H,), accum)
            scores_scale = T.alloc_fragment((block_H,), accum)
            scores_sum = T.alloc_fragment((block_H,), accum)
            logsum = T.alloc_fragment((block_H,), accum)

            T.copy(Q[bz, bx * block_H:(bx + 1) * block_H, :], Q_shared)
            T.copy(Q_pe[bz, bx * block_H:(bx + 1) * block_H, :], Qpe_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum))
            first = by * per_split
            for k in T.Pipelined(T.max(T.min(per_split, n_tiles - first), 0), num_stages=num_stages):
                T.copy(KV[bz, (first + k) * block_N:(first + k + 1) * block_N, :], KV_shared)
                T.copy(K_pe[bz, (first + k) * block_N:(first + k + 1) * block_N, :], Kpe_shared)
                if mask_tail:
                    for i, j in T.Parallel(block_H, block_N):
                        acc_s[i, j] = T.if_then_else((first + k) * block_N + j < seq_kv, 0,
                                                     -T.infinity(accum))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(Qpe_shared, Kpe_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= scores_scale[i]
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.copy(acc_s, acc_s_cast)
                T.gemm(acc_s_cast, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_H):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
            for i in T.Parallel(block_H):
                LSE_partial[bz, bx * block_H + i, by] = T.if_then_else(
                    logsum[i] > 0, scores_max[i] * scale + T.log2(logsum[i]), -T.infinity(accum))
                logsum[i] = T.if_then_else(logsum[i] > 0, 1.0 / logsum[i], 0)
            for i, j in T.Parallel(block_H, dim):
                O_partial[bz, bx * block_H + i, by, j] = acc_o[i, j] * logsum[i]

    return mla_decoding


def make_inputs(rng, batch=32, heads=128, seq_kv=8192, dim=512, pe_dim=64, dtype="float16"):
    """Q, Q_pe, KV, K_pe with standard-normal entries."""
    npd = T.bfloat16.np if dtype == "bfloat16" else np.dtype(dtype)
    shapes = ((batch, heads, dim), (batch, heads, pe_dim), (batch, seq_kv, dim), (batch, seq_kv, pe_dim))
    return [rng.standard_normal(s).astype(npd) for s in shapes]


def partials64(q, q_pe, kv, k_pe, num_split, block_N, sm_scale=None):
    """float64 split partials: (O_partial [b, h, splits, dim], base-2 LSE [b, h, splits])."""
    b, h, d = q.shape
    n = kv.shape[1]
    scale = sm_scale if sm_scale is not None else 1 / np.sqrt(d + q_pe.shape[-1])
    s = (np.einsum("bhd,bsd->bhs", q.astype(np.float64), kv.astype(np.float64))
         + np.einsum("bhd,bsd->bhs", q_pe.astype(np.float64), k_pe.astype(np.float64))) * scale
    per = math.ceil(math.ceil(n / block_N) / num_split) * block_N
    o = np.zeros((b, h, num_split, d))
    lse = np.full((b, h, num_split), -np.inf)
    for sp in range(num_split):
        lo, hi = sp * per, min((sp + 1) * per, n)
        if lo >= hi:
            continue
        m = s[..., lo:hi].max(-1, keepdims=True)
        e = np.exp(s[..., lo:hi] - m)
        o[:, :, sp] = np.einsum("bhs,bsd->bhd", e, kv[:, lo:hi].astype(np.float64)) / e.sum(-1, keepdims=True)
        lse[:, :, sp] = (m[..., 0] + np.log(e.sum(-1))) * LOG2E
    return o, lse


def reference(q, q_pe, kv, k_pe, num_split=4, block_N=32, sm_scale=None):
    """float64 partials, as float32."""
    o, lse = partials64(q, q_pe, kv, k_pe, num_split, block_N, sm_scale)
    return [o.astype(np.float32), lse.astype(np.float32)]


def decode(target, inputs, **sizes):
    """Split kernel then flash_decoding's combine on `target`: Output [batch, heads, dim]."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import flash_decoding  # the one combine kernel (examples/ is a folder of scripts)

    split = tilecore.jit(program(**sizes_for(program, sizes)), out_idx=OUT_IDX, target=target)
    merge = tilecore.jit(flash_decoding.combine_program(**sizes_for(flash_decoding.combine_program, sizes)),
                         out_idx=[-1], target=target)
    return merge(*split(*inputs))


def main(target="interp"):
    sizes = dict(batch=2, heads=32, seq_kv=300, dim=512, pe_dim=64, num_split=3, block_H=32, threads=128)
    inputs = make_inputs(np.random.default_rng(0), **sizes_for(make_inputs, sizes))
    out = decode(target, inputs, **sizes)
    o, _ = partials64(*inputs, 1, 32)
    np.testing.assert_allclose(out.astype(np.float32), o[:, :, 0].astype(np.float32), **TOLERANCE)
    print(f"mla_decoding {sizes} on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
