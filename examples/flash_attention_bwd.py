"""FlashAttention backward in the FlashAttention-2 structure: a preprocess kernel computes
delta = rowsum(dO * O); the main kernel owns one K/V tile, loops over the query tiles (of every
query head of its KV group) and accumulates dK and dV in registers, while dQ is accumulated in
float32 with atomic adds.

Layouts as in flash_attention.py: Q, dO [batch, seq, heads, dim]; K, V [batch, seq, kv_heads,
dim]; LSE (natural log, from flash_attention(return_lse=True)) and Delta [batch, heads, seq]
float32. Outputs: dQ float32 (starts at zero: the kernel adds into it), dK and dV in the input
dtype. Run: python examples/flash_attention_bwd.py [target]
"""

import math
import sys

import numpy as np

import tilecore
import tilecore.language as T
from tilecore.contrib.attention_configs import tuned_config

OUT_IDX = [-3, -2, -1]
# one size (each costs ~10 s on the toy targets): causal, grouped, ragged (fp16: Metal's apple7
# has no bfloat); the non-causal path runs in backends/emu/tests/test_emu_attention.py and
# bf16 in backends/interp/tests/test_torch_attention.py
TEST_SIZES = [dict(batch=1, heads=2, kv_heads=1, seq_len=80, dim=64, is_causal=True, threads=128)]
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
LOG2E = 1.4426950408889634


def preprocess_program(batch=1, heads=8, seq_len=1024, dim=64, dtype="float16", block_M=64, threads=128):
    """Delta[b, h, s] = sum over d of O * dO, in float32 (one block per row tile)."""
    shape = (batch, seq_len, heads, dim)

    @T.prim_func
    def flash_bwd_preprocess(O: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype),
                             Delta: T.Tensor((batch, heads, seq_len), "float32")):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            o = T.alloc_fragment((block_M, dim), dtype)
            do = T.alloc_fragment((block_M, dim), dtype)
            prod = T.alloc_fragment((block_M, dim), "float32")
            delta = T.alloc_fragment((block_M,), "float32")
            T.copy(O[bz, bx * block_M:(bx + 1) * block_M, by, :], o)
            T.copy(dO[bz, bx * block_M:(bx + 1) * block_M, by, :], do)
            for i, j in T.Parallel(block_M, dim):
                prod[i, j] = T.cast(o[i, j], "float32") * T.cast(do[i, j], "float32")
            T.reduce_sum(prod, delta, dim=1)
            T.copy(delta, Delta[bz, by, bx * block_M:(bx + 1) * block_M])

    return flash_bwd_preprocess


def program(batch=1, heads=8, seq_len=1024, dim=64, is_causal=False, block_M=32, block_N=64,
            num_stages=2, threads=256, dtype="float16", kv_heads=None, sm_scale=None, stagger=False,
            dq_tma=False, dq_early=False):
    """dQ (atomics), dK, dV: one block per (KV tile, KV head, batch). Scores are computed
    transposed (S^T = K Q^T) so that P^T and dS^T are the A operands of dV += P^T dO and
    dK += dS^T Q without a transpose; dQ += dS K reads dS^T from shared memory transposed.
    `stagger=True` starts each block's walk over the query tiles at its own offset (key tile
    bx at query tile bx, wrapping around): the blocks running together then add into different
    dQ tiles instead of all into the same one (the same sums, in another order).
    `dq_tma=True` adds each dQ tile with one bulk TMA reduce-add through shared memory
    (`T.atomic_add(use_tma=True)`, tilecore.lower.tma_reduce; TMA targets only) instead of a
    global atomic per element pair and thread. `dq_early=True` stores dS before the dV and dK
    products, so that dQ's product is issued with them instead of after them."""
    kv_heads = kv_heads or heads
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    groups = heads // kv_heads
    sm = sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim)
    scale = sm * LOG2E
    q_shape, kv_shape = (batch, seq_len, heads, dim), (batch, seq_len, kv_heads, dim)
    row_shape = (batch, heads, seq_len)
    accum = "float32"
    n_q = (seq_len + block_M - 1) // block_M

    def qt(t, bx, q_first, count):
        """The query tile of iteration t of key tile bx (`count` of them from `q_first`, per
        head). q_first and count are the kernel's names for them: written out here instead,
        the causal copies were no longer staged by TMA (measured: 2.0 -> 3.4 ms)."""
        return q_first + ((t % count + bx) % count if stagger else t % count)

    @T.prim_func
    def flash_attention_bwd(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype),
                            V: T.Tensor(kv_shape, dtype), dO: T.Tensor(q_shape, dtype),
                            LSE: T.Tensor(row_shape, accum), Delta: T.Tensor(row_shape, accum),
                            dQ: T.Tensor(q_shape, accum), dK: T.Tensor(kv_shape, dtype),
                            dV: T.Tensor(kv_shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_N), kv_heads, batch, threads=threads) as (bx, by, bz):
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            dO_shared = T.alloc_shared((block_M, dim), dtype)
            dS_shared = T.alloc_shared((block_N, block_M), dtype)
            lse_shared = T.alloc_shared((block_M,), accum)
            delta_shared = T.alloc_shared((block_M,), accum)
            s_t = T.alloc_fragment((block_N, block_M), accum)
            dp_t = T.alloc_fragment((block_N, block_M), accum)
            p_cast = T.alloc_fragment((block_N, block_M), dtype)
            ds_cast = T.alloc_fragment((block_N, block_M), dtype)
            dk = T.alloc_fragment((block_N, dim), accum)
            dv = T.alloc_fragment((block_N, dim), accum)
            dq = T.alloc_fragment((block_M, dim), accum)

            T.copy(K[bz, bx * block_N:(bx + 1) * block_N, by, :], K_shared)
            T.copy(V[bz, bx * block_N:(bx + 1) * block_N, by, :], V_shared)
            T.clear(dk)
            T.clear(dv)
            # causal: query tiles wholly above this key tile's first row see none of its keys
            q_first = (bx * block_N) // block_M if is_causal else 0
            count = n_q - q_first
            for t in T.Pipelined(groups * count, num_stages=num_stages):
                # (the tile's head and row are written out, not bound to names: a copy whose
                # address depends on a name bound inside the loop cannot be issued stages ahead)
                T.copy(Q[bz, qt(t, bx, q_first, count) * block_M:(qt(t, bx, q_first, count) + 1) * block_M,
                         by * groups + t // count, :], Q_shared)
                T.copy(LSE[bz, by * groups + t // count,
                           qt(t, bx, q_first, count) * block_M:(qt(t, bx, q_first, count) + 1) * block_M],
                       lse_shared)
                T.clear(s_t)
                T.clear(dp_t)
                # the two score products back to back: on sm_90 their wgmma groups are in flight
                # together (one wait; tilecore.lower.wgmma_groups)
                T.gemm(K_shared, Q_shared, s_t, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(dO[bz, qt(t, bx, q_first, count) * block_M:(qt(t, bx, q_first, count) + 1) * block_M,
                          by * groups + t // count, :], dO_shared)
                T.copy(Delta[bz, by * groups + t // count,
                             qt(t, bx, q_first, count) * block_M:(qt(t, bx, q_first, count) + 1) * block_M],
                       delta_shared)
                T.gemm(V_shared, dO_shared, dp_t, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                # P^T = exp(S^T * sm_scale - lse); past-the-end rows read lse = 0 and dO = 0,
                # so they add nothing (no mask needed for ragged lengths)
                if is_causal:
                    # only query tiles starting above this key tile's last row need the mask
                    if qt(t, bx, q_first, count) * block_M < (bx + 1) * block_N - 1:
                        for i, j in T.Parallel(block_N, block_M):
                            s_t[i, j] = T.if_then_else(
                                qt(t, bx, q_first, count) * block_M + j >= bx * block_N + i,
                                T.exp2(s_t[i, j] * scale - lse_shared[j] * LOG2E), 0)
                    else:
                        for i, j in T.Parallel(block_N, block_M):
                            s_t[i, j] = T.exp2(s_t[i, j] * scale - lse_shared[j] * LOG2E)
                else:
                    for i, j in T.Parallel(block_N, block_M):
                        s_t[i, j] = T.exp2(s_t[i, j] * scale - lse_shared[j] * LOG2E)
                # both casts before either product: S^T and dP^T (float32) die here, so the two
                # 16-bit A tiles and dK, dV are what is live across the products (on sm_90 the
                # four float32 tiles at once left wgmma too few registers: ptxas serialized it)
                T.copy(s_t, p_cast)
                for i, j in T.Parallel(block_N, block_M):
                    ds_cast[i, j] = s_t[i, j] * (dp_t[i, j] - delta_shared[j]) * sm
                if not dq_early:
                    T.gemm(p_cast, dO_shared, dv, policy=T.GemmWarpPolicy.FullRow)
                    T.gemm(ds_cast, Q_shared, dk, policy=T.GemmWarpPolicy.FullRow)
                    T.copy(ds_cast, dS_shared)
                    T.clear(dq)
                    T.gemm(dS_shared, K_shared, dq, transpose_A=True)
                else:
                    # dS to shared memory first: the three products in flight together (one
                    # wgmma wait on sm_90, tilecore.lower.wgmma_groups)
                    T.copy(ds_cast, dS_shared)
                    T.clear(dq)
                    T.gemm(p_cast, dO_shared, dv, policy=T.GemmWarpPolicy.FullRow)
                    T.gemm(ds_cast, Q_shared, dk, policy=T.GemmWarpPolicy.FullRow)
                    T.gemm(dS_shared, K_shared, dq, transpose_A=True)
                T.atomic_add(dQ[bz, qt(t, bx, q_first, count) * block_M:
                                (qt(t, bx, q_first, count) + 1) * block_M,
                                by * groups + t // count, :], dq, use_tma=dq_tma)
            T.copy(dv, dV[bz, bx * block_N:(bx + 1) * block_N, by, :])
            T.copy(dk, dK[bz, bx * block_N:(bx + 1) * block_N, by, :])

    return flash_attention_bwd


def _np_dtype(dtype):
    return T.bfloat16.np if dtype == "bfloat16" else np.dtype(dtype)


def _attention64(q, k, v, is_causal, sm_scale=None):
    """float64 forward on [b, s, h, d] (KV heads repeated): (O [b,h,s,d], LSE [b,h,s], P, q, k, v
    as [b, h, s, d] float64)."""
    groups = q.shape[2] // k.shape[2]
    q64 = q.astype(np.float64).transpose(0, 2, 1, 3)
    k64, v64 = (np.repeat(x.astype(np.float64), groups, axis=2).transpose(0, 2, 1, 3) for x in (k, v))
    s = q64 @ k64.transpose(0, 1, 3, 2) * (sm_scale if sm_scale is not None else 1 / np.sqrt(q.shape[-1]))
    if is_causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    e = np.exp(s - mx)
    den = e.sum(axis=-1, keepdims=True)
    p = e / den
    return p @ v64, (mx + np.log(den))[..., 0], p, q64, k64, v64


def make_inputs(rng, batch=1, heads=8, seq_len=1024, dim=64, is_causal=False, dtype="float16",
                kv_heads=None, sm_scale=None):
    """Q, K, V, dO (standard normal), and the LSE and Delta the forward and preprocess give
    (from a float64 forward whose output is rounded to the dtype, as the kernels see it)."""
    kvh = kv_heads or heads
    npd = _np_dtype(dtype)
    q = rng.standard_normal((batch, seq_len, heads, dim)).astype(npd)
    k, v = (rng.standard_normal((batch, seq_len, kvh, dim)).astype(npd) for _ in range(2))
    do = rng.standard_normal((batch, seq_len, heads, dim)).astype(npd)
    o, lse, *_ = _attention64(q, k, v, is_causal, sm_scale)
    o_rounded = o.astype(npd).astype(np.float64)
    delta = (o_rounded * do.astype(np.float64).transpose(0, 2, 1, 3)).sum(-1)
    return [q, k, v, do, lse.astype(np.float32), delta.astype(np.float32)]


def gradients64(q, k, v, do, is_causal=False, sm_scale=None):
    """float64 dQ, dK, dV ([b, s, h, d] / [b, s, kv_heads, d]; dK and dV summed over each KV
    group's query heads)."""
    sm = sm_scale if sm_scale is not None else 1 / np.sqrt(q.shape[-1])
    o, _, p, q64, k64, v64 = _attention64(q, k, v, is_causal, sm_scale)
    do64 = do.astype(np.float64).transpose(0, 2, 1, 3)
    dv = p.transpose(0, 1, 3, 2) @ do64
    dp = do64 @ v64.transpose(0, 1, 3, 2)
    ds = p * (dp - (o * do64).sum(-1, keepdims=True)) * sm
    dq, dk = ds @ k64, ds.transpose(0, 1, 3, 2) @ q64
    b, h, s, d = dk.shape
    kvh = k.shape[2]
    dk, dv = (x.reshape(b, kvh, h // kvh, s, d).sum(2) for x in (dk, dv))
    return tuple(x.transpose(0, 2, 1, 3) for x in (dq, dk, dv))


def reference(q, k, v, do, lse, delta, is_causal=False, sm_scale=None):
    """float64 gradients: dQ as float32, dK and dV rounded to the input dtype."""
    dq, dk, dv = gradients64(q, k, v, do, is_causal, sm_scale)
    return [dq.astype(np.float32), dk.astype(q.dtype), dv.astype(q.dtype)]


def backward(q, k, v, o, do, lse, is_causal=False, target="interp", **config):
    """The whole backward on `target`: preprocess (delta), then the dQ/dK/dV kernel."""
    b, s, h, d = q.shape
    dtype = "bfloat16" if q.dtype == T.bfloat16.np else str(q.dtype)
    pre = tilecore.jit(preprocess_program(b, h, s, d, dtype), out_idx=[-1], target=target)
    main_k = tilecore.jit(program(b, h, s, d, is_causal, dtype=dtype, kv_heads=k.shape[2], **config),
                          out_idx=OUT_IDX, target=target)
    return main_k(q, k, v, do, lse, pre(o, do))


def main(target="interp"):
    import flash_attention

    for causal in (False, True):
        sizes = dict(batch=1, heads=4, kv_heads=2, seq_len=160, dim=64)
        q, k, v = flash_attention.make_inputs(np.random.default_rng(0), **sizes)
        do = np.random.default_rng(1).standard_normal(q.shape).astype(q.dtype)
        # the measured-best tiles on Hopper (tuned_config), the defaults elsewhere
        fwd = tilecore.jit(flash_attention.program(**sizes, is_causal=causal, return_lse=True,
                                                   **tuned_config("fwd", target, sizes["dim"], causal)),
                           out_idx=[-2, -1], target=target)
        o, lse = fwd(q, k, v)
        tiles = tuned_config("bwd", target, sizes["dim"], causal)
        got = backward(q, k, v, o, do, lse, causal, target, **tiles)
        for g, w in zip(got, gradients64(q, k, v, do, causal)):
            np.testing.assert_allclose(np.asarray(g, np.float32), w.astype(np.float32), **TOLERANCE)
        print(f"flash_attention_bwd {sizes} causal={causal} on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
