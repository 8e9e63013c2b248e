"""FlashAttention forward in the eager style: the `@tilecore.jit` function is the kernel.
`batch, seq_len, heads, dim` are compile-time constants bound from Q's shape and `kv_heads`
from K's (grouped-query heads: query head h reads KV head h // (heads // kv_heads)); Output, and
LSE with `return_lse=True`, are allocated by the call and returned. Same program as
examples/flash_attention.py (the factory style) for every config, the FlashAttention-3 orders
(`overlap`, `diag_first`) included: the `@T.macro` helpers defined in the body see its
constants and config values, as the factory's nested macros see its locals.

Run: python examples/flash_attention_eager.py [target]
"""

import math
import sys

import numpy as np
from flash_attention import LOG2E, TEST_SIZES, TOLERANCE, attention64, make_inputs, reference  # noqa: F401

import tilecore
import tilecore.language as T
from tilecore.contrib.attention_configs import tuned_config
from tilecore.example_protocol import sizes_for

TWIN = "flash_attention"  # the factory-style example this one builds the same PrimFunc as
OUT_IDX = [-1]
# configs past the twin's TEST_SIZES at which tests/test_eager_examples.py also compares the two
# PrimFuncs (building only): the FlashAttention-3 orders and the LSE output
TWIN_SIZES = [dict(batch=1, heads=4, seq_len=256, dim=64, overlap=True),
              dict(batch=1, heads=4, seq_len=256, dim=64, overlap="masked"),
              dict(batch=1, heads=4, seq_len=256, dim=64, is_causal=True, overlap=True, diag_first=True,
                   block_N=128),
              dict(batch=1, heads=4, kv_heads=2, seq_len=200, dim=64, is_causal=True, return_lse=True)]


@tilecore.jit
def flash_attention(Q, K, V, is_causal=False, block_M=64, block_N=64, num_stages=1, threads=128,
                    dtype="float16", sm_scale=None, return_lse=False, overlap=False, reverse_causal=True,
                    diag_first=False):
    """Output = softmax(Q K^T * sm_scale) V per head: online softmax over K/V tiles in base 2,
    `sm_scale` 1/sqrt(dim) by default. `return_lse=True` also returns LSE [batch, heads, seq_len]
    (natural log, float32). `overlap`, `reverse_causal`, `diag_first`: the schedules of
    examples/flash_attention.py's `program` (see its docstring)."""
    batch, seq_len, heads, dim, kv_heads = T.const("batch, seq_len, heads, dim, kv_heads")
    Q: T.Tensor((batch, seq_len, heads, dim), dtype)
    K: T.Tensor((batch, seq_len, kv_heads, dim), dtype)
    V: T.Tensor((batch, seq_len, kv_heads, dim), dtype)
    accum = "float32"
    Output = T.empty((batch, seq_len, heads, dim), dtype)
    if return_lse:
        LSE = T.empty((batch, heads, seq_len), accum)
    # below the declarations: Python on the constants, read only once they are ints
    assert heads % kv_heads == 0, "heads must be a multiple of kv_heads"
    diag_first = bool(diag_first and is_causal and overlap is True and block_N % block_M == 0)
    groups = heads // kv_heads
    scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim)) * LOG2E
    mask_tail = seq_len % block_N != 0 and not is_causal
    n_q = T.ceildiv(seq_len, block_M)  # (in a kernel body `//` rounds toward zero, as in C)

    @T.macro
    def init_scores(acc_s, k, bx):
        """acc_s = 0 where key tile k may be attended, -inf where masked (before S += Q K^T)."""
        if is_causal:
            # only tiles reaching past the block's first row need the mask (one uniform
            # branch per tile instead of a compare and select per element of every tile)
            if (k + 1) * block_N > bx * block_M + 1:
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0,
                                                 -T.infinity(accum))
            else:
                T.clear(acc_s)
        elif mask_tail:
            # only the last tile reaches past the end (a uniform branch per tile)
            if (k + 1) * block_N > seq_len:
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(accum))
            else:
                T.clear(acc_s)
        else:
            T.clear(acc_s)

    @T.macro
    def online_softmax(acc_s, scores_max, scores_max_prev, scores_scale, scores_sum, logsum):
        """acc_s = exp2((S - running max) * scale) in place; the running max, the factor the
        output must be rescaled by (scores_scale) and the running row sums updated."""
        T.copy(scores_max, scores_max_prev)
        T.reduce_max(acc_s, scores_max, dim=1, clear=False)
        for i in T.Parallel(block_M):
            scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
        for i, j in T.Parallel(block_M, block_N):
            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
        T.reduce_sum(acc_s, scores_sum, dim=1)
        for i in T.Parallel(block_M):
            logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]

    @T.macro
    def attention(Q, K, V, Output, LSE, bx, by, bz):
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
        kv_head = by // groups

        T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
        T.fill(acc_o, 0)
        T.fill(logsum, 0)
        T.fill(scores_max, -T.infinity(accum))
        loop_range = (T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                      if is_causal else T.ceildiv(seq_len, block_N))
        if overlap == "masked":
            # the overlapped order below without its first and last branches: P(-1) = 0 makes
            # the first P V add nothing, and the extra last tile is all -inf (its softmax leaves
            # the maxima and sums unchanged); one loop body instead of three (less code, two
            # gemms of wasted work per block)
            T.fill(acc_s_cast, 0)
            for k in T.Pipelined(loop_range + 1, num_stages=num_stages):
                T.copy(K[bz, T.min(k, loop_range - 1) * block_N:(T.min(k, loop_range - 1) + 1) * block_N,
                         kv_head, :], K_shared)
                T.copy(V[bz, T.max(k - 1, 0) * block_N:(T.max(k - 1, 0) + 1) * block_N, kv_head, :],
                       V_shared)
                if k == loop_range:
                    T.fill(acc_s, -T.infinity(accum))
                else:
                    init_scores(acc_s, k, bx)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow,
                       wg_wait=-1)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow, wg_wait=-1)
                online_softmax(acc_s, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(acc_s, acc_s_cast)
        elif overlap:
            # FlashAttention-3's order: iteration k issues S(k) = Q K(k)^T and O += P(k-1) V(k-1)
            # back to back (wg_wait=-1: both in flight), so the softmax of S(k) waits only for
            # S and runs while the tensor cores compute P V; the rescale of O waits for both.
            # One extra iteration: k = 0 has no P V yet, k = loop_range only its P V. Each
            # stage holds K(k) and V(k - 1) (clamped: the unused tile is loaded, not read).
            for k in T.Pipelined(loop_range + 1, num_stages=num_stages):
                if diag_first:
                    # causal, key tiles last to first: the diagonal tile (the masked one) is
                    # iteration 0's, so the overlapped body below carries no mask
                    T.copy(K[bz, T.max(loop_range - 1 - k, 0) * block_N:(T.max(loop_range - 1 - k, 0) + 1)
                             * block_N, kv_head, :], K_shared)
                    T.copy(V[bz, T.min(loop_range - k, loop_range - 1) * block_N:
                             (T.min(loop_range - k, loop_range - 1) + 1) * block_N, kv_head, :], V_shared)
                else:
                    T.copy(K[bz, T.min(k, loop_range - 1) * block_N:(T.min(k, loop_range - 1) + 1) * block_N,
                             kv_head, :], K_shared)
                    T.copy(V[bz, T.max(k - 1, 0) * block_N:(T.max(k - 1, 0) + 1) * block_N, kv_head, :],
                           V_shared)
                if k == 0 and diag_first:
                    # the diagonal tile, masked after its product: a mask written into the
                    # accumulators before it (init_scores) made ptxas spill 132 bytes here
                    T.clear(acc_s)
                    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= (loop_range - 1) * block_N + j,
                                                     acc_s[i, j], -T.infinity(accum))
                    online_softmax(acc_s, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                    T.copy(acc_s, acc_s_cast)
                elif k == 0:
                    init_scores(acc_s, k, bx)
                    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    online_softmax(acc_s, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                    T.copy(acc_s, acc_s_cast)
                elif k < loop_range:
                    if diag_first:
                        T.clear(acc_s)  # below the diagonal: no key is masked
                    else:
                        init_scores(acc_s, k, bx)
                    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow,
                           wg_wait=-1)
                    T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow, wg_wait=-1)
                    online_softmax(acc_s, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                    for i, j in T.Parallel(block_M, dim):
                        acc_o[i, j] *= scores_scale[i]
                    T.copy(acc_s, acc_s_cast)
                else:
                    T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
        else:
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, kv_head, :], K_shared)
                init_scores(acc_s, k, bx)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, kv_head, :], V_shared)
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
        if return_lse:
            lse = T.alloc_fragment((block_M,), accum)
            for i in T.Parallel(block_M):
                lse[i] = (scores_max[i] * scale + T.log2(logsum[i])) * (1.0 / LOG2E)
            T.copy(lse, LSE[bz, by, bx * block_M:(bx + 1) * block_M])
        # one reciprocal per row, then multiplies: a division per element is one IEEE
        # division subroutine call per accumulator register on CUDA (64 per thread at d=128)
        for i in T.Parallel(block_M):
            logsum[i] = 1.0 / logsum[i]
        for i, j in T.Parallel(block_M, dim):
            acc_o[i, j] *= logsum[i]
        T.copy(acc_o, O_shared)
        T.copy(O_shared, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    with T.Kernel(n_q, heads, batch, threads=threads) as (bx, by, bz):
        # causal query tiles run longest first (the last attends to every key tile), so the
        # short ones fill the tail of the grid
        attention(Q, K, V, Output, LSE if return_lse else None,
                  n_q - 1 - bx if is_causal and reverse_causal else bx, by, bz)
    if return_lse:  # decided when the kernel is built: the outputs are what is returned
        return Output, LSE
    else:
        return Output


def program(batch=1, heads=8, seq_len=1024, dim=64, is_causal=False, block_M=64, block_N=64,
            num_stages=1, threads=128, dtype="float16", kv_heads=None, sm_scale=None, return_lse=False,
            overlap=False, reverse_causal=True, diag_first=False):
    """The example protocol's PrimFunc: the eager kernel with its constants given explicitly."""
    return flash_attention.get_prim_func(
        batch=batch, heads=heads, seq_len=seq_len, dim=dim, kv_heads=kv_heads or heads, is_causal=is_causal,
        block_M=block_M, block_N=block_N, num_stages=num_stages, threads=threads, dtype=dtype,
        sm_scale=sm_scale, return_lse=return_lse, overlap=overlap, reverse_causal=reverse_causal,
        diag_first=diag_first)


def run(inputs, target="interp", **sizes):
    """The call a user makes: the kernel compiled for `target`, called with Q, K, V (the
    constants bind from their shapes) and the config entries of `sizes`."""
    kernel = tilecore.jit(flash_attention.fn, target=target)  # the same body, compiled for `target`
    return kernel(*inputs, **sizes_for(flash_attention.fn, sizes))


def main(target="interp"):
    for sizes in (dict(batch=1, heads=4, seq_len=256, dim=64, is_causal=False),
                  dict(batch=1, heads=4, kv_heads=1, seq_len=200, dim=128, is_causal=True, dtype="bfloat16")):
        # the measured-best tiles on Hopper, the defaults elsewhere
        tiles = tuned_config("fwd", target, sizes["dim"], sizes["is_causal"], sizes.get("dtype", "float16"),
                             seq_len=sizes["seq_len"])
        q, k, v = make_inputs(np.random.default_rng(0), **sizes_for(make_inputs, sizes))
        o, lse = run([q, k, v], target, return_lse=True, **sizes, **tiles)
        want_o, want_lse, _ = attention64(q, k, v, sizes["is_causal"])
        np.testing.assert_allclose(o.astype(np.float32), want_o.astype(np.float32), **TOLERANCE)
        np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-3)
        print(f"flash_attention_eager {sizes} on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
