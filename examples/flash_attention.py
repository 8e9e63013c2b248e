"""FlashAttention forward (online softmax over K/V tiles): causal or not, grouped-query heads,
any sequence length, optionally returning the log-sum-exp the backward pass needs.

Q is [batch, seq, heads, dim], K and V are [batch, seq, kv_heads, dim] (heads a multiple of
kv_heads: query head h reads KV head h // (heads // kv_heads)); Output has Q's shape. With
`return_lse=True` the kernel takes a fifth tensor, LSE [batch, heads, seq] float32: each row's
natural-log log-sum-exp of the scaled scores (torch's convention); call it with out_idx=[-2, -1].
Run: python examples/flash_attention.py [target]
"""

import math
import sys

import numpy as np

import tilecore
import tilecore.language as T
from tilecore.contrib.attention_configs import tuned_config
from tilecore.example_protocol import sizes_for as sizes_of

OUT_IDX = [-1]
TEST_SIZES = [dict(batch=1, heads=2, seq_len=128, dim=64, is_causal=False),
              dict(batch=1, heads=2, kv_heads=1, seq_len=96, dim=64, is_causal=True)]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)
LOG2E = 1.4426950408889634


def program(batch=1, heads=8, seq_len=1024, dim=64, is_causal=False, block_M=64, block_N=64,
            num_stages=1, threads=128, dtype="float16", kv_heads=None, sm_scale=None, return_lse=False,
            overlap=False, reverse_causal=True, diag_first=False, o_in_q=False):
    """One block per (query tile, head, batch). `sm_scale` defaults to 1/sqrt(dim); the softmax
    runs in base 2 (exp2 of scores pre-multiplied by log2(e) * sm_scale). `overlap=True` orders
    the loop as FlashAttention-3 does (the next tile's scores and this tile's P V in flight
    together, asynchronous gemms on sm_90a; the same values everywhere); `overlap="masked"`
    is that order in one loop body (on the H200 the overlap is faster at d=128 without a mask,
    slower causal and at d=64: tilecore.contrib.attention_configs picks it). `reverse_causal`
    launches causal query tiles longest first. `diag_first` (causal, `overlap=True`, block_N a
    multiple of block_M; ignored otherwise) walks the key tiles last to first, so the one masked
    tile is the peeled first iteration's and the overlapped body carries no mask. `o_in_q`
    stages the output tile in the query tile's shared buffer (free once the last Q K^T is
    done) instead of a buffer of its own: 32 KB less shared memory at 128x128 d=128, room for
    wider key tiles or a third stage. One tile per block only: under the persistent schedule
    (`tilecore.ws_persistent_any`) the next tile's query load overwrites the buffer with no
    barrier after the epilogue's reads (emu:sm_90a reports the race).
    """
    kv_heads = kv_heads or heads
    # in the reversed walk each row's first tile must hold one of its keys (its diagonal one):
    # true when every query tile lies inside one key tile (block_N a multiple of block_M);
    # otherwise a row masked across its whole first tile would take exp2(-inf - -inf)
    diag_first = bool(diag_first and is_causal and overlap is True and block_N % block_M == 0)
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    groups = heads // kv_heads
    scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim)) * LOG2E
    q_shape, kv_shape = (batch, seq_len, heads, dim), (batch, seq_len, kv_heads, dim)
    # key columns past the end exist only in the last tile of a ragged length; causal rows never
    # reach them (a row's keys stop at its own index, which is inside the sequence)
    mask_tail = seq_len % block_N != 0 and not is_causal
    accum = "float32"

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
        O_shared = Q_shared if o_in_q else T.alloc_shared((block_M, dim), dtype)
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
                # the row sums before P V (TileLang's example_mha_fwd order): the float32
                # scores die at the cast instead of living through the gemm beside P and the
                # output accumulators (sm_80 128x64 d=128: 64 fewer live registers there)
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

    n_q = -(-seq_len // block_M)

    def q_block(bx):
        """The query tile of block bx: causal tiles run longest first (the last query tile
        attends to every key tile), so the short ones fill the tail of the grid."""
        return n_q - 1 - bx if is_causal and reverse_causal else bx

    if return_lse:
        @T.prim_func
        def flash_attention_lse(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype),
                                V: T.Tensor(kv_shape, dtype), Output: T.Tensor(q_shape, dtype),
                                LSE: T.Tensor((batch, heads, seq_len), accum)):
            with T.Kernel(n_q, heads, batch, threads=threads) as (bx, by, bz):
                attention(Q, K, V, Output, LSE, q_block(bx), by, bz)

        return flash_attention_lse

    @T.prim_func
    def flash_attention(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype),
                        V: T.Tensor(kv_shape, dtype), Output: T.Tensor(q_shape, dtype)):
        with T.Kernel(n_q, heads, batch, threads=threads) as (bx, by, bz):
            attention(Q, K, V, Output, None, q_block(bx), by, bz)

    return flash_attention


def _np_dtype(dtype):
    return T.bfloat16.np if dtype == "bfloat16" else np.dtype(dtype)


def make_inputs(rng, batch=1, heads=8, seq_len=1024, dim=64, is_causal=False, dtype="float16", kv_heads=None):
    """Q, K, V with standard-normal entries (K and V with kv_heads heads); `is_causal` is
    accepted (and unused) so a full size dict can be passed."""
    kvh = kv_heads or heads
    shapes = ((batch, seq_len, heads, dim), (batch, seq_len, kvh, dim), (batch, seq_len, kvh, dim))
    return [rng.standard_normal(s).astype(_np_dtype(dtype)) for s in shapes]


def attention64(q, k, v, is_causal=False, sm_scale=None):
    """float64 attention of [batch, seq, heads, dim] inputs (KV heads repeated for grouped
    queries): (output [b, s, h, d], natural-log LSE [b, h, s], probabilities [b, h, s, s])."""
    groups = q.shape[2] // k.shape[2]
    q64 = q.astype(np.float64).transpose(0, 2, 1, 3)
    k64, v64 = (np.repeat(x.astype(np.float64), groups, axis=2).transpose(0, 2, 1, 3) for x in (k, v))
    s = q64 @ k64.transpose(0, 1, 3, 2) * (sm_scale if sm_scale is not None else 1 / np.sqrt(q.shape[-1]))
    if is_causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    denom = e.sum(axis=-1, keepdims=True)
    p = e / denom
    return (p @ v64).transpose(0, 2, 1, 3), (m + np.log(denom))[..., 0], p


def reference(q, k, v, is_causal=False, sm_scale=None):
    """The float64 reference, rounded to Q's dtype."""
    return attention64(q, k, v, is_causal, sm_scale)[0].astype(q.dtype)


def main(target="interp"):
    for sizes in (dict(batch=1, heads=4, seq_len=256, dim=64, is_causal=False),
                  dict(batch=1, heads=4, kv_heads=1, seq_len=200, dim=128, is_causal=True, dtype="bfloat16")):
        # the measured-best tiles on Hopper, the defaults elsewhere
        tiles = tuned_config("fwd", target, sizes["dim"], sizes["is_causal"], sizes.get("dtype", "float16"),
                             seq_len=sizes["seq_len"])
        kernel = tilecore.jit(program(**sizes, **tiles, return_lse=True), out_idx=[-2, -1], target=target)
        q, k, v = make_inputs(np.random.default_rng(0), **sizes_of(make_inputs, sizes))
        o, lse = kernel(q, k, v)
        want_o, want_lse, _ = attention64(q, k, v, sizes["is_causal"])
        np.testing.assert_allclose(o.astype(np.float32), want_o.astype(np.float32), **TOLERANCE)
        np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-3)
        print(f"flash_attention {sizes} on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
