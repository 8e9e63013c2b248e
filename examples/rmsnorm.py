"""RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, over each row of an M x N matrix.

Single pass when `block_M` rows fit in registers (the default whenever they do): each thread
loads its slice of the row once, the block reduces the sum of squares across its threads, and
the same registers are scaled and written, so X is read once and Y written once. Longer rows
stream through `block_N`-wide tiles twice (sum of squares, then scale and write).

Two shared-memory variants (`staged=True`: the rows copied to shared memory once and read from
there twice; `blocks=`: a persistent grid streaming row tiles through `T.Pipelined` cp.async
stages) keep no row in registers; BENCHMARKS.md (issue 9) has their H200 timings.

Run: python examples/rmsnorm.py [target]
"""

import sys

import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
# The fourth size forces the streaming (two-pass) kernel with a ragged last tile; the first is an
# exact single-pass row (N = threads * 8, M a multiple of block_M), the last the same through the
# T.copy path (eviction policies).
TEST_SIZES = [dict(M=6, N=1024, block_M=2, threads=128), dict(M=64, N=256), dict(M=37, N=200),
              dict(M=21, N=1000, block_N=256),
              dict(M=6, N=1024, block_M=2, threads=128, x_policy="evict_first", y_policy="evict_first")]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)
# Single-pass widths are padded to 8 elements per thread: one 16-byte run of fp16, which the default
# fragment layout deals to each thread (runs sized for the narrowest memory dtype).
VEC = 8
MAX_REGS = 64  # fp32 registers per thread a single-pass row may take


def row_width(N: int, threads: int) -> int:
    """N rounded up to VEC elements per thread: the single-pass fragment width."""
    step = threads * VEC
    return -(-N // step) * step


def program(M=4096, N=4096, block_M=1, block_N=None, threads=256, eps=1e-6, dtype="float16",
            x_policy=None, y_policy=None, hold="float32", blocks=None, num_stages=2, staged=False,
            l2_reread=False):
    """RMSNorm of each row. `block_N=None` picks the single-pass kernel when `block_M` rows of
    `row_width(N)` elements fit in MAX_REGS registers per thread, else the two-pass kernel with
    tiles of 16 elements per thread; an explicit `block_N` < N forces the two-pass kernel.
    `x_policy` / `y_policy`: the L2 eviction policy (T.copy's) of the single-pass kernel's read of
    X and write of Y when its rows are exact. `hold`: the dtype the single-pass row is held in
    between its two uses ("float32", or "storage": X's own dtype, half the registers, converted
    again for the output). `blocks`: a persistent grid of this many blocks, each streaming
    row tiles through `num_stages` cp.async shared-memory stages (`T.Pipelined`). `staged`: one
    block per row tile, the tile copied into shared memory and read from there twice (the
    registers then hold no row, so the bytes in flight per multiprocessor are bounded by shared
    memory, not by registers). `l2_reread`: the two-pass kernel as torch.compile's Triton kernel
    is built (pass 1 reads X at evict_last and accumulates the squares elementwise, one block
    reduction at the end; pass 2 re-reads X from L2 at evict_first); exact tiles only."""
    if hold not in ("float32", "storage"):
        raise ValueError(f"hold={hold!r}: \"float32\" or \"storage\"")
    width = row_width(N, threads)
    if staged:
        return _staged(M, N, block_M, width, threads, eps, dtype)
    if blocks is not None:
        return _persistent(M, N, block_M, width, threads, eps, dtype, blocks, num_stages)
    if block_N is None:
        block_N = width if block_M * width // threads <= MAX_REGS else threads * 16
    if l2_reread:
        return _two_pass_l2(M, N, block_M, block_N, threads, eps, dtype)
    if block_N >= N:
        return _single_pass(M, N, block_M, width, threads, eps, dtype, x_policy, y_policy, hold)
    return _two_pass(M, N, block_M, block_N, threads, eps, dtype)


def _single_pass(M, N, block_M, width, threads, eps, dtype, x_policy, y_policy, hold):
    """The whole row in registers. Loads and stores are T.Parallel element accesses (so that
    `block_M=1` lowers), unguarded, and so vectorized, when no row or column can fall outside the
    tensor (padding reads as 0); an exact row's X read with an eviction policy `x_policy`, or its
    Y write with `y_policy`, goes through T.copy (16 bytes per access) instead. Default neither:
    on the H200, against torch.compile in the same process, X at evict_first (as torch.compile's
    kernel reads it) ran at 0.95x, X and Y at 0.92x, the T.copy path without a policy at 0.97x
    and this kernel at 0.98-0.99x in earlier runs (BENCHMARKS.md, issue 9).
    The weight is read in the output loop, after the reduction: it is the same 2N bytes for
    every row (cache-resident), and not holding it keeps registers low."""
    exact = width == N and M % block_M == 0
    # which way each side of an exact row goes (trace-time constants)
    x_copy, y_copy = exact and x_policy is not None, exact and y_policy is not None
    x_plain, y_plain = exact and x_policy is None, exact and y_policy is None

    @T.prim_func
    def rmsnorm(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, width), dtype if hold == "storage" else "float32")
            sq = T.alloc_fragment((block_M, width), "float32")
            scale = T.alloc_fragment((block_M,), "float32")
            if x_copy:
                T.copy(X[bx * block_M, 0], x, eviction_policy=x_policy)
            # the first T.Parallel nest fixes x's layout; sq and scale follow it
            for i, j in T.Parallel(block_M, width):
                if x_plain:
                    x[i, j] = X[bx * block_M + i, j]
                elif not exact:  # padding reads as 0: it adds nothing to the sum of squares
                    x[i, j] = T.if_then_else(bx * block_M + i < M and j < N, X[bx * block_M + i, j], 0.0)
                sq[i, j] = T.cast(x[i, j], "float32") * T.cast(x[i, j], "float32")
            T.reduce_sum(sq, scale, dim=1)
            for i in T.Parallel(block_M):
                scale[i] = T.rsqrt(scale[i] * (1.0 / N) + eps)
            for i, j in T.Parallel(block_M, width):
                if y_copy:
                    x[i, j] = T.cast(x[i, j], "float32") * scale[i] * W[j]
                elif y_plain:
                    Y[bx * block_M + i, j] = T.cast(x[i, j], "float32") * scale[i] * W[j]
                elif bx * block_M + i < M and j < N:
                    Y[bx * block_M + i, j] = T.cast(x[i, j], "float32") * scale[i] * W[j]
            if y_copy:
                T.copy(x, Y[bx * block_M, 0], eviction_policy=y_policy)

    return rmsnorm


def _persistent(M, N, block_M, width, threads, eps, dtype, blocks, num_stages):
    """A persistent grid of `blocks` blocks; block b takes row tiles b, b + blocks, ... (so the
    grid's tiles in flight are adjacent in memory). Each tile is copied into a shared stage by
    cp.async (`T.Pipelined`: the copies of the next `num_stages - 1` tiles are in flight while
    this one is reduced and written), then read into registers once. Exact rows only (N a
    multiple of threads * VEC and M of block_M): a tile past the end is skipped. Size `blocks`
    to the blocks that are resident at once (two per H200 multiprocessor at t512, 48-50
    registers): more run as a second round. On the H200 these grids ran 8-16% slower than the
    single-pass kernel (BENCHMARKS.md): each tile is one serial chain per block."""
    if width != N or M % block_M:
        raise ValueError(f"rmsnorm(blocks=...) needs N a multiple of threads * {VEC} and M of block_M")
    tiles = M // block_M
    per_block = -(-tiles // blocks)

    @T.prim_func
    def rmsnorm(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(blocks, threads=threads) as bx:
            xs = T.alloc_shared((block_M, N), dtype)
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            scale = T.alloc_fragment((block_M,), "float32")
            for t in T.Pipelined(per_block, num_stages=num_stages):
                T.copy(X[(bx + t * blocks) * block_M, 0], xs)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = xs[i, j]
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, scale, dim=1)
                for i in T.Parallel(block_M):
                    scale[i] = T.rsqrt(scale[i] * (1.0 / N) + eps)
                if bx + t * blocks < tiles:  # block-uniform: the stores stay 16-byte vectors
                    for i, j in T.Parallel(block_M, N):
                        Y[(bx + t * blocks) * block_M + i, j] = x[i, j] * scale[i] * W[j]

    return rmsnorm


def _staged(M, N, block_M, width, threads, eps, dtype):
    """The block's rows copied into shared memory once (16-byte copies), the sum of squares and
    the output both read from there: no row is held in registers. Exact rows only."""
    if width != N or M % block_M:
        raise ValueError(f"rmsnorm(staged=True) needs N a multiple of threads * {VEC} and M of block_M")

    @T.prim_func
    def rmsnorm(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M // block_M, threads=threads) as bx:
            xs = T.alloc_shared((block_M, N), dtype)
            sq = T.alloc_fragment((block_M, N), "float32")
            scale = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], xs)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = T.cast(xs[i, j], "float32") * T.cast(xs[i, j], "float32")
            T.reduce_sum(sq, scale, dim=1)
            for i in T.Parallel(block_M):
                scale[i] = T.rsqrt(scale[i] * (1.0 / N) + eps)
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = T.cast(xs[i, j], "float32") * scale[i] * W[j]

    return rmsnorm


def _two_pass_l2(M, N, block_M, block_N, threads, eps, dtype):
    """Two passes over `block_N`-wide tiles with few registers (so many rows in flight per
    multiprocessor); the row is kept in L2 between them by the eviction policies."""
    if N % block_N or M % block_M:
        raise ValueError("rmsnorm(l2_reread=True) needs N a multiple of block_N and M of block_M")

    @T.prim_func
    def rmsnorm(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M // block_M, threads=threads) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            scale = T.alloc_fragment((block_M,), "float32")
            T.clear(acc)
            for k in T.serial(N // block_N):
                T.copy(X[bx * block_M, k * block_N], x, eviction_policy="evict_last")
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = acc[i, j] + x[i, j] * x[i, j]
            T.reduce_sum(acc, scale, dim=1)
            for i in T.Parallel(block_M):
                scale[i] = T.rsqrt(scale[i] * (1.0 / N) + eps)
            for k in T.serial(N // block_N):
                T.copy(X[bx * block_M, k * block_N], x, eviction_policy="evict_first")
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = x[i, j] * scale[i] * W[k * block_N + j]
                T.copy(x, Y[bx * block_M, k * block_N])

    return rmsnorm


def _two_pass(M, N, block_M, block_N, threads, eps, dtype):
    """Pass 1 accumulates the sum of squares per row in fp32; pass 2 scales and writes. The
    accesses are guarded element accesses unless every tile is interior (`exact`)."""
    exact = N % block_N == 0 and M % block_M == 0

    @T.prim_func
    def rmsnorm(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            sq = T.alloc_fragment((block_M, block_N), "float32")
            ssum = T.alloc_fragment((block_M,), "float32")
            scale = T.alloc_fragment((block_M,), "float32")
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    if exact:
                        x[i, j] = X[bx * block_M + i, k * block_N + j]
                    else:
                        x[i, j] = T.if_then_else(bx * block_M + i < M and k * block_N + j < N,
                                                 X[bx * block_M + i, k * block_N + j], 0.0)
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, scale, dim=1)
                for i in T.Parallel(block_M):
                    ssum[i] = T.if_then_else(k == 0, scale[i], ssum[i] + scale[i])
            for i in T.Parallel(block_M):
                scale[i] = T.rsqrt(ssum[i] * (1.0 / N) + eps)
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    if exact:
                        Y[bx * block_M + i, k * block_N + j] = \
                            X[bx * block_M + i, k * block_N + j] * scale[i] * W[k * block_N + j]
                    elif bx * block_M + i < M and k * block_N + j < N:
                        Y[bx * block_M + i, k * block_N + j] = \
                            X[bx * block_M + i, k * block_N + j] * scale[i] * W[k * block_N + j]

    return rmsnorm


def make_inputs(rng, M=4096, N=4096, dtype="float16"):
    return [rng.standard_normal((M, N)).astype(dtype), rng.uniform(0.5, 1.5, N).astype(dtype)]


def reference(x, w, eps=1e-6):
    x64 = x.astype(np.float64)
    r = 1.0 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps)
    return (x64 * r * w.astype(np.float64)).astype(x.dtype)


def main(target="interp"):
    sizes = dict(M=300, N=1000)
    args = make_inputs(np.random.default_rng(0), **sizes)
    for kind, extra in (("single pass", {}), ("two pass", dict(block_N=256))):
        kernel = tilecore.jit(program(**sizes, **extra), out_idx=OUT_IDX, target=target)
        y = kernel(*args)
        np.testing.assert_allclose(y.astype(np.float32), reference(*args).astype(np.float32), **TOLERANCE)
        print(f"rmsnorm {sizes} ({kind}) on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
