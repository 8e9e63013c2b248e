"""Flash-decoding: one query token per sequence against a long KV cache, split over the KV length
(split-KV) so that a small batch still fills the GPU, then a combine kernel merging the splits.

Grouped-query heads: one block computes all `heads // kv_heads` query heads of one KV head (they
share every K/V tile), padded to `block_H` rows for the matrix instructions. Q is [batch, heads,
dim]. The split kernel (`program`) writes each split's normalized partial output O_partial
[batch, heads, num_split, dim] and its base-2 log-sum-exp LSE_partial [batch, heads, num_split]
(float32; -inf for a split with no keys); `combine_program` turns them into Output [batch,
heads, dim]; with `fuse_combine=True` the split kernel merges them itself (the last block of each
(sequence, KV head) to finish, counted on a global counter: one launch, `workspace_shapes`).
Two cache layouts:

- contiguous: K, V [batch, seq_kv, kv_heads, dim] (`kv_layout="nhd"`, the default) or [batch,
  kv_heads, seq_kv, dim] (`kv_layout="hnd"`: each KV head's keys contiguous, the layout torch's
  SDPA and cuDNN take), every sequence seq_kv long;
- paged (`paged=True`): K, V [num_pages, page_size, kv_heads, dim], BlockTable [batch,
  max_pages] int32 (the page holding positions p*page_size.. of a sequence) and SeqLens [batch]
  int32 (each sequence's own length).

Run: python examples/flash_decoding.py [target]
"""

import math
import sys

import numpy as np

import tilecore
import tilecore.language as T
from tilecore.contrib.attention_configs import tuned_config
from tilecore.example_protocol import sizes_for

OUT_IDX = [-2, -1]
TEST_SIZES = [dict(batch=1, heads=4, kv_heads=2, seq_kv=150, dim=64, num_split=2, block_N=32),
              dict(batch=2, heads=2, kv_heads=1, seq_kv=96, dim=64, num_split=3, paged=True, page_size=32,
                   block_N=32)]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)
LOG2E = 1.4426950408889634


def program(batch=32, heads=32, kv_heads=8, seq_kv=4096, dim=128, num_split=8, block_N=64, block_H=16,
            num_stages=2, threads=128, dtype="float16", paged=False, page_size=64, num_pages=None,
            sm_scale=None, direct=False, kv_eviction=None, kv_layout="nhd", fuse_combine=False):
    """The split kernel: one block per (split, KV head, sequence). `seq_kv` is the cache length
    (contiguous) or the longest sequence (paged: max_pages = ceil(seq_kv / page_size));
    `num_pages` defaults to batch * max_pages. `direct=True` (with num_split=1) writes the
    attention output itself, Output [batch, heads, dim] in the input dtype, in place of the
    partials: one launch and no combine (batch x kv_heads blocks must fill the GPU: 256 at
    batch 32 with 8 KV heads); call it with out_idx=[-1]. `kv_eviction` is the L2 eviction policy
    of the K/V tile reads ("evict_first": the cache is read once; honoured where the pipeline
    stages the tiles by TMA, i.e. block_H=64 on sm_90, ignored elsewhere). `kv_layout` (contiguous
    caches): "nhd" K/V [batch, seq_kv, kv_heads, dim], "hnd" [batch, kv_heads, seq_kv, dim].
    `fuse_combine=True` (num_split > 1): one launch writing Output [batch, heads, dim] with the
    combine done by the last split block of each (sequence, KV head) to finish; the program is
    (Q, K, V[, BlockTable, SeqLens], O_partial, LSE_partial, Counts, Output) with the
    workspaces of `workspace_shapes` (Counts zero before the first call; the kernel leaves them
    so; calls that may overlap need workspaces of their own); call it with out_idx=[-1]."""
    if fuse_combine and (direct or num_split < 2):
        raise ValueError(f"fuse_combine=True merges splits: num_split must be > 1 (not {num_split}) and "
                         "direct False")
    if direct and num_split != 1:
        raise ValueError(f"direct=True writes the output of one split: num_split must be 1, not {num_split}")
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    groups = heads // kv_heads
    if groups > block_H:
        raise ValueError(f"block_H ({block_H}) must hold the {groups} query heads of a KV head")
    if kv_layout not in ("nhd", "hnd"):
        raise ValueError(f"kv_layout {kv_layout!r}: \"nhd\" or \"hnd\"")
    if paged and kv_layout != "nhd":
        raise ValueError("a paged cache is [num_pages, page_size, kv_heads, dim]: kv_layout must be \"nhd\"")
    if paged and page_size % block_N:
        raise ValueError(f"page_size ({page_size}) must be a multiple of block_N ({block_N})")
    scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim)) * LOG2E
    max_pages = -(-seq_kv // page_size)
    pages = num_pages or batch * max_pages
    hnd = kv_layout == "hnd"
    kv_shape = (pages, page_size, kv_heads, dim) if paged else \
        (batch, kv_heads, seq_kv, dim) if hnd else (batch, seq_kv, kv_heads, dim)
    accum = "float32"

    @T.macro
    def split_kv(Q, K, V, O_partial, LSE_partial, kv_len, block_table, bx, by, bz):
        Q_shared = T.alloc_shared((block_H, dim), dtype)
        K_shared = T.alloc_shared((block_N, dim), dtype)
        V_shared = T.alloc_shared((block_N, dim), dtype)
        acc_s = T.alloc_fragment((block_H, block_N), accum)
        acc_s_cast = T.alloc_fragment((block_H, block_N), dtype)
        acc_o = T.alloc_fragment((block_H, dim), accum)
        scores_max = T.alloc_fragment((block_H,), accum)
        scores_max_prev = T.alloc_fragment((block_H,), accum)
        scores_scale = T.alloc_fragment((block_H,), accum)
        scores_sum = T.alloc_fragment((block_H,), accum)
        logsum = T.alloc_fragment((block_H,), accum)

        # rows past this group's heads read the next group's (or zero-filled) queries and are
        # never stored
        T.copy(Q[bz, by * groups:by * groups + block_H, :], Q_shared)
        T.fill(acc_o, 0)
        T.fill(logsum, 0)
        T.fill(scores_max, -T.infinity(accum))
        n_tiles = T.ceildiv(kv_len, block_N)
        per_split = T.ceildiv(n_tiles, num_split)
        first = bx * per_split
        for k in T.Pipelined(T.max(T.min(per_split, n_tiles - first), 0), num_stages=num_stages):
            if paged:
                # the page and row are written out, not bound to names: a copy whose address
                # depends on a name bound inside the loop is not issued stages ahead (cp.async);
                # the table index is clamped because the pipeline also computes the addresses
                # of the (predicated-off) tiles past the end
                T.copy(K[block_table[bz, T.min((first + k) * block_N // page_size, max_pages - 1)],
                         (first + k) * block_N % page_size:(first + k) * block_N % page_size + block_N,
                         by, :], K_shared, eviction_policy=kv_eviction)
            elif hnd:
                T.copy(K[bz, by, (first + k) * block_N:(first + k + 1) * block_N, :], K_shared,
                       eviction_policy=kv_eviction)
            else:
                T.copy(K[bz, (first + k) * block_N:(first + k + 1) * block_N, by, :], K_shared,
                       eviction_policy=kv_eviction)
            for i, j in T.Parallel(block_H, block_N):
                acc_s[i, j] = T.if_then_else((first + k) * block_N + j < kv_len, 0, -T.infinity(accum))
            T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            if paged:
                T.copy(V[block_table[bz, T.min((first + k) * block_N // page_size, max_pages - 1)],
                         (first + k) * block_N % page_size:(first + k) * block_N % page_size + block_N,
                         by, :], V_shared, eviction_policy=kv_eviction)
            elif hnd:
                T.copy(V[bz, by, (first + k) * block_N:(first + k + 1) * block_N, :], V_shared,
                       eviction_policy=kv_eviction)
            else:
                T.copy(V[bz, (first + k) * block_N:(first + k + 1) * block_N, by, :], V_shared,
                       eviction_policy=kv_eviction)
            T.copy(scores_max, scores_max_prev)
            T.reduce_max(acc_s, scores_max, dim=1, clear=False)
            for i in T.Parallel(block_H):
                scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] *= scores_scale[i]
            for i, j in T.Parallel(block_H, block_N):
                acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
            T.copy(acc_s, acc_s_cast)
            T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            T.reduce_sum(acc_s, scores_sum, dim=1)
            for i in T.Parallel(block_H):
                logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
        if direct:
            # the whole sequence in one split: normalize and store the output (a sequence of
            # length 0 has logsum 0 and gets zeros)
            for i in T.Parallel(block_H):
                logsum[i] = T.if_then_else(logsum[i] > 0, 1.0 / logsum[i], 0)
            for i, j in T.Parallel(block_H, dim):
                if i < groups:
                    O_partial[bz, by * groups + i, j] = acc_o[i, j] * logsum[i]
        else:
            # a split past the end of a short sequence has no keys: LSE -inf, output 0
            for i in T.Parallel(block_H):
                if i < groups:
                    if fuse_combine:  # [batch, kv_heads, lse_pad]: split-major within the group
                        LSE_partial[bz, by, bx * groups + i] = T.if_then_else(
                            logsum[i] > 0, scores_max[i] * scale + T.log2(logsum[i]), -T.infinity(accum))
                    else:
                        LSE_partial[bz, by * groups + i, bx] = T.if_then_else(
                            logsum[i] > 0, scores_max[i] * scale + T.log2(logsum[i]), -T.infinity(accum))
                logsum[i] = T.if_then_else(logsum[i] > 0, 1.0 / logsum[i], 0)
            for i, j in T.Parallel(block_H, dim):
                if i < groups:
                    O_partial[bz, by * groups + i, bx, j] = acc_o[i, j] * logsum[i]

    part_shapes = ((batch, heads, num_split, dim), (batch, heads, num_split))
    if fuse_combine:
        return _fused_kernel(split_kv, batch=batch, heads=heads, kv_heads=kv_heads, num_split=num_split,
                             dim=dim, dtype=dtype, kv_shape=kv_shape, max_pages=max_pages, seq_kv=seq_kv,
                             threads=threads, paged=paged)
    if direct:
        return _direct_kernel(split_kv, batch, heads, dim, dtype, kv_shape, max_pages, seq_kv, kv_heads,
                              threads, paged)
    if paged:
        @T.prim_func
        def flash_decoding_paged(Q: T.Tensor((batch, heads, dim), dtype), K: T.Tensor(kv_shape, dtype),
                                 V: T.Tensor(kv_shape, dtype),
                                 BlockTable: T.Tensor((batch, max_pages), "int32"),
                                 SeqLens: T.Tensor((batch,), "int32"),
                                 O_partial: T.Tensor(part_shapes[0], accum),
                                 LSE_partial: T.Tensor(part_shapes[1], accum)):
            with T.Kernel(num_split, kv_heads, batch, threads=threads) as (bx, by, bz):
                split_kv(Q, K, V, O_partial, LSE_partial, SeqLens[bz], BlockTable, bx, by, bz)

        return flash_decoding_paged

    @T.prim_func
    def flash_decoding(Q: T.Tensor((batch, heads, dim), dtype), K: T.Tensor(kv_shape, dtype),
                       V: T.Tensor(kv_shape, dtype), O_partial: T.Tensor(part_shapes[0], accum),
                       LSE_partial: T.Tensor(part_shapes[1], accum)):
        with T.Kernel(num_split, kv_heads, batch, threads=threads) as (bx, by, bz):
            split_kv(Q, K, V, O_partial, LSE_partial, seq_kv, None, bx, by, bz)

    return flash_decoding


def _direct_kernel(split_kv, batch, heads, dim, dtype, kv_shape, max_pages, seq_kv, kv_heads, threads,
                   paged):
    """The prim_func of `program(direct=True)`: one split per (KV head, sequence) writing
    Output [batch, heads, dim] (the macro's O_partial argument; LSE_partial is unused)."""
    if paged:
        @T.prim_func
        def flash_decoding_paged_direct(Q: T.Tensor((batch, heads, dim), dtype), K: T.Tensor(kv_shape, dtype),
                                        V: T.Tensor(kv_shape, dtype),
                                        BlockTable: T.Tensor((batch, max_pages), "int32"),
                                        SeqLens: T.Tensor((batch,), "int32"),
                                        Output: T.Tensor((batch, heads, dim), dtype)):
            with T.Kernel(1, kv_heads, batch, threads=threads) as (bx, by, bz):
                split_kv(Q, K, V, Output, None, SeqLens[bz], BlockTable, bx, by, bz)

        return flash_decoding_paged_direct

    @T.prim_func
    def flash_decoding_direct(Q: T.Tensor((batch, heads, dim), dtype), K: T.Tensor(kv_shape, dtype),
                              V: T.Tensor(kv_shape, dtype), Output: T.Tensor((batch, heads, dim), dtype)):
        with T.Kernel(1, kv_heads, batch, threads=threads) as (bx, by, bz):
            split_kv(Q, K, V, Output, None, seq_kv, None, bx, by, bz)

    return flash_decoding_direct


def workspace_shapes(batch=32, heads=32, kv_heads=8, num_split=8, dim=128, **_) -> list:
    """[(shape, dtype)] of `program(fuse_combine=True)`'s workspaces: O_partial [batch, heads,
    num_split, dim] and LSE_partial [batch, kv_heads, lse_pad] (float32; a group's splits x query
    heads, split-major, padded to 32 floats: one 128-byte line per (sequence, KV head), so no
    block's L1 holds a line that another group's splits are still writing), and Counts
    [batch * kv_heads] (int32, zeros). Other config keys are ignored."""
    lse_pad = -(-(heads // kv_heads) * num_split // 32) * 32
    return [((batch, heads, num_split, dim), "float32"), ((batch, kv_heads, lse_pad), "float32"),
            ((batch * kv_heads,), "int32")]


def _fused_kernel(split_kv, *, batch, heads, kv_heads, num_split, dim, dtype, kv_shape, max_pages, seq_kv,
                  threads, paged):
    """The prim_func of `program(fuse_combine=True)`: the split kernel, then each block counts
    itself in on its (sequence, KV head) counter (acq_rel: its partials are visible to whoever
    counts after it) and the group's last block merges the num_split partials into Output (the
    combine of `combine_program`, for the group's query heads) and resets the counter."""
    accum = "float32"
    groups = heads // kv_heads
    (op_shape, _), (lse_shape, _), (cnt_shape, _) = workspace_shapes(batch, heads, kv_heads, num_split, dim)

    @T.macro
    def merge(O_partial, LSE_partial, Counts, Output, tx, by, bz):
        arrived = T.alloc_shared((1,), "int32")  # the group's count before this block's
        T.sync_threads()  # every thread's partial is stored before the count publishes them
        if tx == 0:
            arrived[0] = T.atomic_add(Counts[bz * kv_heads + by], 1, memory_order="acq_rel", return_prev=True)
        T.sync_threads()
        if arrived[0] == num_split - 1:  # the group's last block: every partial is written
            lse_max = T.alloc_fragment((groups, dim), accum)
            weight = T.alloc_fragment((groups, dim), accum)
            total = T.alloc_fragment((groups, dim), accum)
            out = T.alloc_fragment((groups, dim), accum)
            T.fill(lse_max, -T.infinity(accum))
            T.clear(total)
            T.clear(out)
            # each element reads its head's num_split LSEs itself: no cross-thread reduction
            for s in T.serial(num_split):
                for i, j in T.Parallel(groups, dim):
                    lse_max[i, j] = T.max(lse_max[i, j], LSE_partial[bz, by, s * groups + i])
            for s in T.serial(num_split):
                for i, j in T.Parallel(groups, dim):
                    # a split without keys (LSE -inf) weighs 0, also when every split is empty
                    lse = LSE_partial[bz, by, s * groups + i]
                    weight[i, j] = T.if_then_else(lse == -T.infinity(accum), 0, T.exp2(lse - lse_max[i, j]))
                    total[i, j] += weight[i, j]
                    out[i, j] += weight[i, j] * O_partial[bz, by * groups + i, s, j]
            for i, j in T.Parallel(groups, dim):
                Output[bz, by * groups + i, j] = T.if_then_else(total[i, j] > 0, out[i, j] / total[i, j], 0)
            if tx == 0:
                Counts[bz * kv_heads + by] = 0  # ready for the next call

    if paged:
        @T.prim_func
        def flash_decoding_paged_fused(Q: T.Tensor((batch, heads, dim), dtype), K: T.Tensor(kv_shape, dtype),
                                       V: T.Tensor(kv_shape, dtype),
                                       BlockTable: T.Tensor((batch, max_pages), "int32"),
                                       SeqLens: T.Tensor((batch,), "int32"),
                                       O_partial: T.Tensor(op_shape, accum),
                                       LSE_partial: T.Tensor(lse_shape, accum),
                                       Counts: T.Tensor(cnt_shape, "int32"),
                                       Output: T.Tensor((batch, heads, dim), dtype)):
            with T.Kernel(num_split, kv_heads, batch, threads=threads) as (bx, by, bz):
                tx = T.get_thread_binding()
                split_kv(Q, K, V, O_partial, LSE_partial, SeqLens[bz], BlockTable, bx, by, bz)
                merge(O_partial, LSE_partial, Counts, Output, tx, by, bz)

        return flash_decoding_paged_fused

    @T.prim_func
    def flash_decoding_fused(Q: T.Tensor((batch, heads, dim), dtype), K: T.Tensor(kv_shape, dtype),
                             V: T.Tensor(kv_shape, dtype), O_partial: T.Tensor(op_shape, accum),
                             LSE_partial: T.Tensor(lse_shape, accum), Counts: T.Tensor(cnt_shape, "int32"),
                             Output: T.Tensor((batch, heads, dim), dtype)):
        with T.Kernel(num_split, kv_heads, batch, threads=threads) as (bx, by, bz):
            tx = T.get_thread_binding()
            split_kv(Q, K, V, O_partial, LSE_partial, seq_kv, None, bx, by, bz)
            merge(O_partial, LSE_partial, Counts, Output, tx, by, bz)

    return flash_decoding_fused


def combine_program(batch=32, heads=32, num_split=8, dim=128, dtype="float16", threads=128):
    """Output[b, h] = sum_s 2^(lse_s - max) O_s / sum_s 2^(lse_s - max): one block per (head,
    sequence)."""
    accum = "float32"

    @T.prim_func
    def flash_decoding_combine(O_partial: T.Tensor((batch, heads, num_split, dim), accum),
                               LSE_partial: T.Tensor((batch, heads, num_split), accum),
                               Output: T.Tensor((batch, heads, dim), dtype)):
        with T.Kernel(heads, batch, threads=threads) as (bx, by):
            lse = T.alloc_fragment((1, num_split), accum)
            lse_max = T.alloc_fragment((1,), accum)
            total = T.alloc_fragment((1,), accum)
            parts = T.alloc_fragment((num_split, dim), accum)
            out = T.alloc_fragment((dim,), accum)
            T.copy(LSE_partial[by, bx:bx + 1, :], lse)
            T.copy(O_partial[by, bx, :, :], parts)
            T.reduce_max(lse, lse_max, dim=1)
            for i, s in T.Parallel(1, num_split):
                lse[i, s] = T.exp2(lse[i, s] - lse_max[i])
            T.reduce_sum(lse, total, dim=1)
            for s, j in T.Parallel(num_split, dim):
                parts[s, j] *= lse[0, s]
            T.reduce_sum(parts, out, dim=0)
            for j in T.Parallel(dim):
                Output[by, bx, j] = out[j] / total[0]

    return flash_decoding_combine


def _np_dtype(dtype):
    return T.bfloat16.np if dtype == "bfloat16" else np.dtype(dtype)


def make_inputs(rng, batch=32, heads=32, kv_heads=8, seq_kv=4096, dim=128, dtype="float16",
                paged=False, page_size=64, kv_layout="nhd"):
    """Q, K, V (standard normal; contiguous K/V in `kv_layout`); paged: the cache scattered over
    shuffled pages, a block table and per-sequence lengths between seq_kv / 2 and seq_kv (the
    first sequence is seq_kv long)."""
    npd = _np_dtype(dtype)
    q = rng.standard_normal((batch, heads, dim)).astype(npd)
    if not paged:
        k, v = (rng.standard_normal((batch, seq_kv, kv_heads, dim)).astype(npd) for _ in range(2))
        if kv_layout == "hnd":
            k, v = (np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (k, v))
        return [q, k, v]
    max_pages = -(-seq_kv // page_size)
    perm = rng.permutation(batch * max_pages).astype(np.int32)
    table = perm.reshape(batch, max_pages)
    k, v = (rng.standard_normal((batch * max_pages, page_size, kv_heads, dim)).astype(npd) for _ in range(2))
    lens = rng.integers(seq_kv // 2, seq_kv + 1, size=batch).astype(np.int32)
    lens[0] = seq_kv
    return [q, k, v, table, lens]


def contiguous_cache(k, table, lens, seq_kv):
    """The paged cache `k` as [batch, seq_kv, kv_heads, dim] (positions past a length zeroed)."""
    out = k[table].reshape(table.shape[0], -1, *k.shape[2:])[:, :seq_kv].copy()
    for b, n in enumerate(lens):
        out[b, n:] = 0
    return out


def partials64(q, k, v, lens, num_split, block_N=64, sm_scale=None):
    """float64 split-KV partials on contiguous [b, s, kvh, d] caches: (O_partial, base-2 LSE)."""
    b, h, d = q.shape
    groups = h // k.shape[2]
    scale = sm_scale if sm_scale is not None else 1 / np.sqrt(d)
    o = np.zeros((b, h, num_split, d))
    lse = np.full((b, h, num_split), -np.inf)
    for bi in range(b):
        n_tiles = -(-int(lens[bi]) // block_N)
        per = -(-n_tiles // num_split)
        kk = np.repeat(k[bi].astype(np.float64), groups, axis=1)  # [s, h, d]
        vv = np.repeat(v[bi].astype(np.float64), groups, axis=1)
        for s in range(num_split):
            lo, hi = s * per * block_N, min((s + 1) * per * block_N, int(lens[bi]))
            if lo >= hi:
                continue
            sc = np.einsum("hd,shd->hs", q[bi].astype(np.float64), kk[lo:hi]) * scale
            m = sc.max(-1, keepdims=True)
            e = np.exp(sc - m)
            o[bi, :, s] = np.einsum("hs,shd->hd", e, vv[lo:hi]) / e.sum(-1, keepdims=True)
            lse[bi, :, s] = (m[:, 0] + np.log(e.sum(-1))) * LOG2E
    return o, lse


def reference(q, k, v, *paged_args, seq_kv=4096, num_split=8, block_N=64, sm_scale=None, kv_layout="nhd"):
    """float64 partials (float32), for the contiguous (in `kv_layout`) or the paged cache."""
    if paged_args:
        table, lens = paged_args
        k, v = contiguous_cache(k, table, lens, seq_kv), contiguous_cache(v, table, lens, seq_kv)
    else:
        if kv_layout == "hnd":
            k, v = (x.transpose(0, 2, 1, 3) for x in (k, v))
        lens = [k.shape[1]] * q.shape[0]
    o, lse = partials64(q, k, v, lens, num_split, block_N, sm_scale)
    return [o.astype(np.float32), lse.astype(np.float32)]


def decode(target, inputs, **sizes):
    """Split kernel then combine on `target` (one kernel when sizes say direct=True or
    fuse_combine=True: then with fresh workspaces, O_partial NaN so that a partial read before
    it is written shows): the attention output [batch, heads, dim]."""
    if sizes.get("fuse_combine"):
        work = [np.full(shape, np.nan if dt == "float32" else 0, dt)
                for shape, dt in workspace_shapes(**sizes_for(workspace_shapes, sizes))]
        return tilecore.jit(program(**sizes_for(program, sizes)), out_idx=[-1], target=target)(*inputs, *work)
    if sizes.get("direct"):
        return tilecore.jit(program(**sizes_for(program, sizes)), out_idx=[-1], target=target)(*inputs)
    split = tilecore.jit(program(**sizes_for(program, sizes)), out_idx=OUT_IDX, target=target)
    merge = tilecore.jit(combine_program(**sizes_for(combine_program, sizes)), out_idx=[-1], target=target)
    return merge(*split(*inputs))


def main(target="interp"):
    for sizes in (dict(batch=2, heads=8, kv_heads=2, seq_kv=1000, dim=128, num_split=4),
                  dict(batch=3, heads=8, kv_heads=2, seq_kv=700, dim=64, num_split=3, paged=True,
                       page_size=64)):
        inputs = make_inputs(np.random.default_rng(0), **sizes_for(make_inputs, sizes))
        # Hopper: the measured-best tiles (one launch writing the output: direct=True)
        sizes = dict(sizes, **tuned_config("decode", target, seq_len=sizes["seq_kv"]))
        out = decode(target, inputs, **sizes)
        q, k, v = inputs[:3]
        lens = inputs[4] if sizes.get("paged") else [sizes["seq_kv"]] * q.shape[0]
        if sizes.get("paged"):
            k, v = (contiguous_cache(x, inputs[3], lens, sizes["seq_kv"]) for x in (k, v))
        o, _ = partials64(q, k, v, lens, 1)
        np.testing.assert_allclose(out.astype(np.float32), o[:, :, 0].astype(np.float32), **TOLERANCE)
        print(f"flash_decoding {sizes} on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
