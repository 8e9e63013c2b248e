"""Flash-decoding (split-KV decoding with a combine kernel, grouped-query heads, contiguous or
paged KV cache) in the eager style: each `@tilecore.jit` function is a kernel, its compile-time
constants bound from the tensors' shapes and its outputs allocated by the call and returned.

- `flash_decoding(Q, K, V)`: the split kernel on a contiguous cache (`kv_layout` "nhd" K, V
  [batch, seq_kv, kv_heads, dim] or "hnd" [batch, kv_heads, seq_kv, dim]); returns (O_partial
  [batch, heads, num_split, dim], LSE_partial [batch, heads, num_split]), or with `direct=True`
  (num_split=1) the output [batch, heads, dim] itself;
- `flash_decoding_paged(Q, K, V, BlockTable, SeqLens)`: the same on a paged cache (K, V
  [num_pages, page_size, kv_heads, dim]; page_size and max_pages bound from the shapes);
- `combine(O_partial, LSE_partial)`: the merged output (num_split bound from the shapes).

Same programs as examples/flash_decoding.py (the factory style): both split kernels inline one
module-level `@T.macro`, the factory's, its config passed as a SplitConfig.

Run: python examples/flash_decoding_eager.py [target]
"""

import math
import sys
from dataclasses import dataclass

import numpy as np
from flash_decoding import (  # noqa: F401
    LOG2E,
    TEST_SIZES,
    TOLERANCE,
    contiguous_cache,
    make_inputs,
    partials64,
    reference,
)

import tilecore
import tilecore.language as T
from tilecore.contrib.attention_configs import tuned_config
from tilecore.example_protocol import sizes_for

TWIN = "flash_decoding"  # the factory-style example whose `program` builds the same PrimFuncs
OUT_IDX = [-2, -1]
# the functions tests/test_eager_examples.py compares with the twin's of the same name, and the
# configs past the twin's TEST_SIZES it also compares them at (building only)
TWIN_PROGRAMS = ("program", "combine_program")
TWIN_SIZES = [dict(batch=2, heads=8, kv_heads=2, seq_kv=200, dim=64, num_split=1, direct=True, block_N=32),
              dict(batch=2, heads=8, kv_heads=2, seq_kv=200, dim=64, num_split=2, kv_layout="hnd",
                   kv_eviction="evict_first"),
              dict(batch=2, heads=4, kv_heads=1, seq_kv=100, dim=64, num_split=1, direct=True, paged=True,
                   page_size=32, block_N=32)]


@dataclass(frozen=True)
class SplitConfig:
    """The build-time values `split_kv` reads (a factory's macro gets them from its closure)."""

    block_H: int
    block_N: int
    dim: int
    dtype: str
    groups: int
    num_split: int
    num_stages: int
    scale: float
    direct: bool
    paged: bool
    hnd: bool
    page_size: int
    max_pages: int
    kv_eviction: object
    accum: str = "float32"


@T.macro
def split_kv(Q, K, V, O_partial, LSE_partial, kv_len, block_table, bx, by, bz, c):
    """One split of one KV head of one sequence (flash_decoding.py's macro, its closure passed
    as `c`, a SplitConfig): the partial output and LSE, or with `c.direct` the output."""
    block_H, block_N, dim, dtype, accum, groups = c.block_H, c.block_N, c.dim, c.dtype, c.accum, c.groups
    num_split, num_stages, scale, direct = c.num_split, c.num_stages, c.scale, c.direct
    paged, hnd, page_size, max_pages, kv_eviction = c.paged, c.hnd, c.page_size, c.max_pages, c.kv_eviction
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
                LSE_partial[bz, by * groups + i, bx] = T.if_then_else(
                    logsum[i] > 0, scores_max[i] * scale + T.log2(logsum[i]), -T.infinity(accum))
            logsum[i] = T.if_then_else(logsum[i] > 0, 1.0 / logsum[i], 0)
        for i, j in T.Parallel(block_H, dim):
            if i < groups:
                O_partial[bz, by * groups + i, bx, j] = acc_o[i, j] * logsum[i]



def _config(heads, kv_heads, dim, num_split, block_N, block_H, num_stages, dtype, sm_scale, direct, paged,
            hnd=False, page_size=1, max_pages=1, kv_eviction=None) -> SplitConfig:
    """The SplitConfig of a split kernel, its arguments checked as flash_decoding.program does."""
    if direct and num_split != 1:
        raise ValueError(f"direct=True writes the output of one split: num_split must be 1, not {num_split}")
    if heads % kv_heads or heads // kv_heads > block_H:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads}), at most "
                         f"block_H ({block_H}) per KV head")
    if paged and page_size % block_N:
        raise ValueError(f"page_size ({page_size}) must be a multiple of block_N ({block_N})")
    scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim)) * LOG2E
    return SplitConfig(block_H, block_N, dim, dtype, heads // kv_heads, num_split, num_stages, scale, direct,
                       paged, hnd, page_size, max_pages, kv_eviction)


@tilecore.jit
def flash_decoding(Q, K, V, num_split=8, block_N=64, block_H=16, num_stages=2, threads=128, dtype="float16",
                   sm_scale=None, direct=False, kv_eviction=None, kv_layout="nhd"):
    """The split kernel on a contiguous cache: one block per (split, KV head, sequence)."""
    batch, heads, dim, seq_kv, kv_heads = T.const("batch, heads, dim, seq_kv, kv_heads")
    Q: T.Tensor((batch, heads, dim), dtype)
    K: T.Tensor((batch, kv_heads, seq_kv, dim) if kv_layout == "hnd" else (batch, seq_kv, kv_heads, dim),
                dtype)
    V: T.Tensor((batch, kv_heads, seq_kv, dim) if kv_layout == "hnd" else (batch, seq_kv, kv_heads, dim),
                dtype)
    if direct:
        Output = T.empty((batch, heads, dim), dtype)
    else:
        O_partial = T.empty((batch, heads, num_split, dim), "float32")
        LSE_partial = T.empty((batch, heads, num_split), "float32")
    assert kv_layout in ("nhd", "hnd"), 'kv_layout is "nhd" or "hnd"'
    c = _config(heads, kv_heads, dim, num_split, block_N, block_H, num_stages, dtype, sm_scale, direct,
                False, hnd=kv_layout == "hnd", kv_eviction=kv_eviction)
    with T.Kernel(num_split, kv_heads, batch, threads=threads) as (bx, by, bz):
        if direct:
            split_kv(Q, K, V, Output, None, seq_kv, None, bx, by, bz, c)
        else:
            split_kv(Q, K, V, O_partial, LSE_partial, seq_kv, None, bx, by, bz, c)
    if direct:  # decided when the kernel is built
        return Output
    else:
        return O_partial, LSE_partial


@tilecore.jit
def flash_decoding_paged(Q, K, V, BlockTable, SeqLens, num_split=8, block_N=64, block_H=16, num_stages=2,
                         threads=128, dtype="float16", sm_scale=None, direct=False, kv_eviction=None):
    """The split kernel on a paged cache: sequence b's position p is in page
    BlockTable[b, p // page_size]; SeqLens[b] is its length."""
    batch, heads, dim, pages, page_size, kv_heads, max_pages = T.const(
        "batch, heads, dim, pages, page_size, kv_heads, max_pages")
    Q: T.Tensor((batch, heads, dim), dtype)
    K: T.Tensor((pages, page_size, kv_heads, dim), dtype)
    V: T.Tensor((pages, page_size, kv_heads, dim), dtype)
    BlockTable: T.Tensor((batch, max_pages), "int32")
    SeqLens: T.Tensor((batch,), "int32")
    if direct:
        Output = T.empty((batch, heads, dim), dtype)
    else:
        O_partial = T.empty((batch, heads, num_split, dim), "float32")
        LSE_partial = T.empty((batch, heads, num_split), "float32")
    c = _config(heads, kv_heads, dim, num_split, block_N, block_H, num_stages, dtype, sm_scale, direct,
                True, page_size=page_size, max_pages=max_pages, kv_eviction=kv_eviction)
    with T.Kernel(num_split, kv_heads, batch, threads=threads) as (bx, by, bz):
        if direct:
            split_kv(Q, K, V, Output, None, SeqLens[bz], BlockTable, bx, by, bz, c)
        else:
            split_kv(Q, K, V, O_partial, LSE_partial, SeqLens[bz], BlockTable, bx, by, bz, c)
    if direct:
        return Output
    else:
        return O_partial, LSE_partial


@tilecore.jit
def combine(O_partial, LSE_partial, dtype="float16", threads=128):
    """Output[b, h] = sum_s 2^(lse_s - max) O_s / sum_s 2^(lse_s - max): one block per (head,
    sequence)."""
    batch, heads, num_split, dim = T.const("batch, heads, num_split, dim")
    accum = "float32"
    O_partial: T.Tensor((batch, heads, num_split, dim), accum)
    LSE_partial: T.Tensor((batch, heads, num_split), accum)
    Output = T.empty((batch, heads, dim), dtype)
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

    return Output


def program(batch=32, heads=32, kv_heads=8, seq_kv=4096, dim=128, num_split=8, block_N=64, block_H=16,
            num_stages=2, threads=128, dtype="float16", paged=False, page_size=64, num_pages=None,
            sm_scale=None, direct=False, kv_eviction=None, kv_layout="nhd"):
    """The example protocol's PrimFunc: the split kernel (paged or not) with its constants given
    explicitly (paged: max_pages = ceil(seq_kv / page_size), num_pages batch * max_pages)."""
    config = dict(num_split=num_split, block_N=block_N, block_H=block_H, num_stages=num_stages,
                  threads=threads, dtype=dtype, sm_scale=sm_scale, direct=direct, kv_eviction=kv_eviction)
    if paged:
        max_pages = -(-seq_kv // page_size)
        return flash_decoding_paged.get_prim_func(batch=batch, heads=heads, dim=dim, kv_heads=kv_heads,
                                                  pages=num_pages or batch * max_pages, page_size=page_size,
                                                  max_pages=max_pages, **config)
    return flash_decoding.get_prim_func(batch=batch, heads=heads, dim=dim, seq_kv=seq_kv, kv_heads=kv_heads,
                                        kv_layout=kv_layout, **config)


def combine_program(batch=32, heads=32, num_split=8, dim=128, dtype="float16", threads=128):
    """The combine kernel's PrimFunc with its constants given explicitly."""
    return combine.get_prim_func(batch=batch, heads=heads, num_split=num_split, dim=dim, dtype=dtype,
                                 threads=threads)


def run(inputs, target="interp", **sizes):
    """The call a user makes: the split kernel (paged when `sizes` say so) compiled for `target`,
    called with the tensors (the constants bind from their shapes) and the config entries of
    `sizes`; returns (O_partial, LSE_partial), or the output with direct=True."""
    fn = flash_decoding_paged if sizes.get("paged") else flash_decoding
    kernel = tilecore.jit(fn.fn, target=target)  # the same body, compiled for `target`
    return kernel(*inputs, **sizes_for(fn.fn, sizes))


def main(target="interp"):
    for sizes in (dict(batch=2, heads=8, kv_heads=2, seq_kv=1000, dim=128, num_split=4),
                  dict(batch=3, heads=8, kv_heads=2, seq_kv=700, dim=64, num_split=3, paged=True,
                       page_size=64)):
        inputs = make_inputs(np.random.default_rng(0), **sizes_for(make_inputs, sizes))
        # Hopper: the measured-best tiles (one launch writing the output: direct=True)
        sizes = dict(sizes, **tuned_config("decode", target, seq_len=sizes["seq_kv"]))
        if sizes.get("direct"):
            out = run(inputs, target, **sizes)
        else:  # the combine's num_split binds from the partials' shapes
            out = tilecore.jit(combine.fn, target=target)(*run(inputs, target, **sizes))
        q, k, v = inputs[:3]
        lens = inputs[4] if sizes.get("paged") else [sizes["seq_kv"]] * q.shape[0]
        if sizes.get("paged"):
            k, v = (contiguous_cache(x, inputs[3], lens, sizes["seq_kv"]) for x in (k, v))
        o, _ = partials64(q, k, v, lens, 1)
        np.testing.assert_allclose(out.astype(np.float32), o[:, :, 0].astype(np.float32), **TOLERANCE)
        print(f"flash_decoding_eager {sizes} on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
