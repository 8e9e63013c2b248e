"""Tiled GEMM: fp16 inputs, fp32 accumulation, fp16 output; M, N, K need not be tile multiples.

Run: python examples/gemm.py [target]
"""

import sys

import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
TEST_SIZES = [dict(M=128, N=128, K=64), dict(M=200, N=136, K=100)]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)


def program(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32, dtype="float16",
            accum_dtype="float32", num_stages=3, threads=128, panel=0, out_dtype=None, split_k=1,
            b_eviction=None, split_reduce="atomic", stream_k=False):
    """C = A @ B with a block per (block_M, block_N) output tile; `panel` > 0 runs the blocks in
    panels of that many grid rows (T.use_swizzle), so neighbouring blocks share A and B in L2.
    C has `out_dtype` (default: the inputs' dtype).

    `split_k` > 1 (small M, where N / block_N blocks cannot fill the machine): a third grid
    dimension splits the k tiles into that many runs, each block adds its partial product into
    C atomically, so C must hold zeros before the call (an output the call allocates does).
    Each split's partial is rounded to C's dtype before its add: an element's error is that of
    its largest partial (fp16: ~1e-3 relative to it), not of the result.
    `split_reduce="workspace"` sums the splits without atomics on C and without a zeroed C:
    the program is `(A, B, W, Counts, C)` (shapes from `workspace_shapes`), each block stores
    its float32 partial tile in W, counts itself in on its output tile's counter (an acq_rel
    atomic), and the tile's last block adds the partials in split order (deterministic, one
    rounding to C's dtype) and writes C, then resets the counter: Counts must hold zeros
    before the first call and the kernel leaves them so. Calls that may run at the same time
    (other streams) need workspaces of their own.
    `b_eviction` is B's T.copy eviction_policy ("evict_first": B is streamed once, so its lines
    are the ones L2 drops first).
    `stream_k=True` (large GEMMs whose tiles leave a partial last wave on a persistent grid):
    the program is `(A, B, W, Flags, C)` (shapes from `stream_k_shapes`) and calls
    `T.stream_k(W, Flags)`: the compiler splits the k steps of the last wave's tiles over every
    multiprocessor, handing partial tiles over through W and the per-tile counters in Flags
    (zeros before the first call; each call leaves them zero). Calls that may run at the same
    time need workspaces of their own."""
    out_dtype = out_dtype or dtype
    if split_k < 1 or (split_k > 1 and panel):
        raise ValueError(f"split_k={split_k} with panel={panel}: split_k must be >= 1, and the "
                         "split-K grid (small M) is not rasterized: leave panel at 0")
    if split_reduce not in ("atomic", "workspace"):
        raise ValueError(f"split_reduce={split_reduce!r}: use 'atomic' or 'workspace'")
    k_tiles = (K + block_K - 1) // block_K
    per_split = (k_tiles + split_k - 1) // split_k  # k tiles of one split (the last may read past K: zeros)

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            if panel:
                T.use_swizzle(panel)
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared, eviction_policy=b_eviction)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    @T.prim_func
    def gemm_split_k(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                     C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(per_split, num_stages=num_stages):
                T.copy(A[by * block_M, (bz * per_split + k) * block_K], A_shared)
                T.copy(B[(bz * per_split + k) * block_K, bx * block_N], B_shared, eviction_policy=b_eviction)
                T.gemm(A_shared, B_shared, C_local)
            T.atomic_add(C[by * block_M, bx * block_N], C_local)

    (_, m_pad, n_pad), _ = workspace_shapes(M, N, block_M, block_N, split_k)[0]
    n_tiles = n_pad // block_N

    @T.prim_func
    def gemm_split_k_workspace(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                               W: T.Tensor((split_k, m_pad, n_pad), "float32"),
                               Counts: T.Tensor((m_pad // block_M * n_tiles,), "int32"),
                               C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=threads) as (bx, by, bz):
            tx = T.get_thread_binding()
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            arrived = T.alloc_shared((1,), "int32")  # the tile's count before this block's
            T.clear(C_local)
            for k in T.Pipelined(per_split, num_stages=num_stages):
                T.copy(A[by * block_M, (bz * per_split + k) * block_K], A_shared)
                T.copy(B[(bz * per_split + k) * block_K, bx * block_N], B_shared, eviction_policy=b_eviction)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, W[bz, by * block_M, bx * block_N])  # W is padded: no guard, no clipping
            T.sync_threads()  # every thread's partial is stored before the count publishes them
            if tx == 0:
                arrived[0] = T.atomic_add(Counts[by * n_tiles + bx], 1, memory_order="acq_rel",
                                          return_prev=True)
            T.sync_threads()
            if arrived[0] == split_k - 1:  # the tile's last block: every partial is in W
                total = T.alloc_fragment((block_M, block_N), "float32")
                T.clear(total)
                for s in T.serial(split_k):
                    for i, j in T.Parallel(block_M, block_N):
                        total[i, j] += W[s, by * block_M + i, bx * block_N + j]
                T.copy(total, C[by * block_M, bx * block_N])
                if tx == 0:
                    Counts[by * n_tiles + bx] = 0  # ready for the next call

    w_len, f_len = (shape[0] for shape, _ in stream_k_shapes(M, N, block_M, block_N))

    @T.prim_func
    def gemm_stream_k(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                      W: T.Tensor((w_len,), "float32"), Flags: T.Tensor((f_len,), "int32"),
                      C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            if panel:
                T.use_swizzle(panel)
            T.stream_k(W, Flags)
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared, eviction_policy=b_eviction)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    if stream_k:
        if split_k > 1:
            raise ValueError("stream_k=True with split_k > 1: choose one")
        return gemm_stream_k
    if split_k == 1:
        return gemm
    return gemm_split_k if split_reduce == "atomic" else gemm_split_k_workspace


def workspace_shapes(M: int, N: int, block_M: int, block_N: int, split_k: int, **_) -> list:
    """[(shape, dtype)] of `program(split_reduce="workspace")`'s W (float32 partial tiles, rows
    and columns padded to whole tiles) and Counts (one int32 per output tile, zeros), the
    program's third and fourth arguments; other config keys are ignored."""
    m_pad, n_pad = -(-M // block_M) * block_M, -(-N // block_N) * block_N
    return [((split_k, m_pad, n_pad), "float32"), ((m_pad // block_M * (n_pad // block_N),), "int32")]


def stream_k_shapes(M: int, N: int, block_M: int, block_N: int, sms: int = 132, **_) -> list:
    """[(shape, dtype)] of `program(stream_k=True)`'s W (one float32 tile accumulator per
    multiprocessor) and Flags (one int32 per output tile, zeros), its third and fourth
    arguments; other config keys are ignored."""
    tiles = -(-M // block_M) * -(-N // block_N)
    return [((sms * block_M * block_N,), "float32"), ((tiles,), "int32")]


def small_m_config(M: int, N: int, K: int, sms: int = 132) -> dict:
    """The `program` config for a small M (decode-like, M <= 64) on `sms` multiprocessors.

    These GEMMs read B once and are bound by memory bandwidth, so (measured on the H200,
    BENCHMARKS.md, issue 10): B is read with evict_first (its lines are the ones L2 drops, so
    the kernel does not pay for writing back the dirty lines other work left in L2: 1.6-4 us of
    15-40); the grid keeps every multiprocessor streaming B through deep TMA stages, with
    mma.sync on 16-row tiles of A (the tensor cores idle either way): 32-column tiles (128 blocks
    at N = 4096) while one wave of blocks covers N, else 64-column tiles (N = 14336: 224 blocks
    beat 448 by 10%). k is split only when even 32-column tiles leave more than half of the
    multiprocessors idle, into as many runs as fill them once (runs of >= 8 k tiles), summed
    through the workspace (`split_reduce="workspace"`: no zeroed C, whose separate zeroing cost
    3-4 us; N = 1024, K = 16384: 16.1 us against 17.4 us with atomics into a zeroed C and 33 us
    unsplit). Split configs are therefore programs `(A, B, W, Counts, C)`: `workspace_shapes`
    gives W and Counts (Counts zero before the first call). At N >= 4096 splitting lost either
    way (more blocks than one wave, or thinner ones: BENCHMARKS.md)."""
    block_M = 16 if M <= 16 else 32 if M <= 32 else 64
    m_blocks = -(-M // block_M)
    narrow = -(-N // 32) * m_blocks
    block_N = 32 if narrow <= sms else 64
    blocks = -(-N // block_N) * m_blocks
    k_tiles = -(-K // 256)
    split = 1
    while 2 * blocks <= sms and blocks * split * 2 <= sms and k_tiles // (split * 2) >= 8:
        split *= 2
    cfg = dict(block_M=block_M, block_N=block_N, block_K=256, num_stages=4, threads=128, split_k=split,
               b_eviction="evict_first")
    if split > 1:
        cfg["split_reduce"] = "workspace"
    return cfg


# The large-GEMM choice (M > 64) measured on the H200 (BENCHMARKS.md, issue 10): two consumer
# warpgroups on 128x256 tiles (one m64n256k16 wgmma per warpgroup and k16, the fewest shared-memory
# bytes per flop a cluster-free tile gets: 48 B of L2 -> shared memory per 2 MFLOP k step against 64
# for 128x128), 3 stages so the whole C tile fits beside them and leaves by TMA store, and panels of
# 16 grid rows (rasterization: 4096x28672x8192 went 0.74x -> 1.0x). The grid runs persistently
# where it has more tiles than multiprocessors (tilecore.lower.warp_specialize).
LARGE_CONFIG = dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, panel=16)


def config(M: int, N: int, K: int, sms: int = 132) -> dict:
    """The `program` config for an M x N x K GEMM on `sms` multiprocessors, chosen by shape:
    `small_m_config` for M <= 64 (bandwidth-bound: B streamed once), else LARGE_CONFIG, with
    `stream_k=True` where `stream_k_pays` (a partial last wave whose split saves more than the
    fix-up costs: 8192^3, the LLM shapes; not 4096^3, whose 64 k steps a tile save only 7.8),
    so the program is then `(A, B, W, Flags, C)` (`stream_k_shapes`)."""
    if M <= 64:
        return small_m_config(M, N, K, sms)
    cfg = dict(LARGE_CONFIG)
    if stream_k_pays(M, N, K, cfg["block_M"], cfg["block_N"], cfg["block_K"], sms):
        cfg["stream_k"] = True
    return cfg


# k steps a stream-K schedule must save per block before it is chosen: its fix-up (a 128 KB
# float32 partial tile stored by a contributor, read back by the finisher) cost about 13 k steps
# of a 128x256x64 tile on the H200 (4096^3, BENCHMARKS.md "stream-K": 7.8 saved, 2% slower)
STREAM_K_MIN_SAVED = 16


def stream_k_pays(M: int, N: int, K: int, block_M: int, block_N: int, block_K: int, sms: int = 132) -> bool:
    """Whether stream-K is chosen: the tiles run persistently (more than `sms`) with a partial
    last wave of r tiles, and splitting it saves each block at least STREAM_K_MIN_SAVED k steps
    ((1 - r / sms) x the k steps of a tile: the idle share of the last wave)."""
    tiles = -(-M // block_M) * -(-N // block_N)
    r = tiles % sms
    return tiles > sms and r > 0 and (1 - r / sms) * -(-K // block_K) >= STREAM_K_MIN_SAVED


def make_inputs(rng, M=1024, N=1024, K=1024, dtype="float16"):
    return [rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)]


def reference(a, b):
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(a.dtype)


def main(target="interp"):
    sizes = dict(M=1000, N=520, K=300)
    kernel = tilecore.jit(program(**sizes), out_idx=OUT_IDX, target=target)
    a, b = make_inputs(np.random.default_rng(0), **sizes)
    c = kernel(a, b)
    np.testing.assert_allclose(c.astype(np.float32), reference(a, b).astype(np.float32), **TOLERANCE)
    print(f"gemm {sizes} on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
