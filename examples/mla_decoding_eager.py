"""Multi-head latent attention (DeepSeek MLA) decoding in the eager style: the `@tilecore.jit`
function is the split kernel. `batch, heads, dim` are compile-time constants bound from Q's
shape, `pe_dim` from Q_pe's and `seq_kv` from KV's; the partial outputs and base-2 LSEs
(O_partial [batch, heads, num_split, dim], LSE_partial [batch, heads, num_split]) are allocated
by the call and returned, and flash_decoding_eager's `combine` merges them (`num_split` bound
from their shapes). Same program as examples/mla_decoding.py (the factory style).

Run: python examples/mla_decoding_eager.py [target]
"""

import math
import sys

import numpy as np
from flash_decoding_eager import combine
from mla_decoding import LOG2E, TEST_SIZES, TOLERANCE, make_inputs, partials64, reference  # noqa: F401

import tilecore
import tilecore.language as T
from tilecore.example_protocol import sizes_for

TWIN = "mla_decoding"  # the factory-style example this one builds the same PrimFunc as
OUT_IDX = [-2, -1]


@tilecore.jit
def mla_decoding(Q, Q_pe, KV, K_pe, num_split=4, block_H=64, block_N=32, num_stages=2, threads=256,
                 dtype="float16", sm_scale=None):
    """One block per (head tile, split, sequence); scores q_nope . KV + q_pe . K_pe, scale
    1/sqrt(dim + pe_dim) by default; the latent KV is also the value."""
    batch, heads, dim, pe_dim, seq_kv = T.const("batch, heads, dim, pe_dim, seq_kv")
    Q: T.Tensor((batch, heads, dim), dtype)
    Q_pe: T.Tensor((batch, heads, pe_dim), dtype)
    KV: T.Tensor((batch, seq_kv, dim), dtype)
    K_pe: T.Tensor((batch, seq_kv, pe_dim), dtype)
    accum = "float32"
    O_partial = T.empty((batch, heads, num_split, dim), accum)
    LSE_partial = T.empty((batch, heads, num_split), accum)
    # below the declarations: Python on the constants, read only once they are ints
    assert heads % block_H == 0 or heads <= block_H, "heads must be a multiple of block_H"
    block_H = min(block_H, heads)
    scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim + pe_dim)) * LOG2E
    n_tiles = T.ceildiv(seq_kv, block_N)  # (in a kernel body `//` rounds toward zero, as in C)
    per_split = T.ceildiv(n_tiles, num_split)
    mask_tail = seq_kv % block_N != 0
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

    return O_partial, LSE_partial


def program(batch=32, heads=128, seq_kv=8192, dim=512, pe_dim=64, num_split=4, block_H=64, block_N=32,
            num_stages=2, threads=256, dtype="float16", sm_scale=None):
    """The example protocol's PrimFunc: the eager kernel with its constants given explicitly."""
    return mla_decoding.get_prim_func(batch=batch, heads=heads, seq_kv=seq_kv, dim=dim, pe_dim=pe_dim,
                                      num_split=num_split, block_H=block_H, block_N=block_N,
                                      num_stages=num_stages, threads=threads, dtype=dtype, sm_scale=sm_scale)


def run(inputs, target="interp", **sizes):
    """The call a user makes: the split kernel compiled for `target`, called with Q, Q_pe, KV,
    K_pe (the constants bind from their shapes) and the config entries of `sizes`; returns
    (O_partial, LSE_partial)."""
    kernel = tilecore.jit(mla_decoding.fn, target=target)  # the same body, compiled for `target`
    return kernel(*inputs, **sizes_for(mla_decoding.fn, sizes))


def main(target="interp"):
    sizes = dict(num_split=3, block_H=32, threads=128)
    inputs = make_inputs(np.random.default_rng(0), batch=2, heads=32, seq_kv=300, dim=512, pe_dim=64)
    o_partial, lse_partial = run(inputs, target, **sizes)
    out = tilecore.jit(combine.fn, target=target)(o_partial, lse_partial)  # Output [batch, heads, dim]
    o, _ = partials64(*inputs, 1, 32)
    np.testing.assert_allclose(out.astype(np.float32), o[:, :, 0].astype(np.float32), **TOLERANCE)
    print(f"mla_decoding_eager {inputs[0].shape} x {inputs[2].shape} on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
