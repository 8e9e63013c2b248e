"""LayerNorm: y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias, over each row.

Single pass when `block_M` rows fit in registers (the default whenever they do): each thread
loads its slice of the row once; the block reduces the sum (the mean), then the sum of squared
deviations from it (the variance, computed from centred values, so no cancellation), and the
same registers are normalized and written: X is read once and Y written once. Longer rows
stream through `block_N`-wide tiles twice (sum and sum of squares in fp32, then normalize).

Run: python examples/layernorm.py [target]
"""

import sys

import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
# The last size forces the streaming (two-pass) kernel with a ragged last tile.
TEST_SIZES = [dict(M=64, N=256), dict(M=37, N=200), dict(M=21, N=1000, block_N=256)]
TOLERANCE = dict(rtol=1e-2, atol=1e-2)
# Single-pass widths are padded to 8 elements per thread: one 16-byte run of fp16, which the default
# fragment layout deals to each thread (runs sized for the narrowest memory dtype).
VEC = 8
MAX_REGS = 64  # fp32 registers per thread a single-pass row may take


def row_width(N: int, threads: int) -> int:
    """N rounded up to VEC elements per thread: the single-pass fragment width."""
    step = threads * VEC
    return -(-N // step) * step


def program(M=4096, N=4096, block_M=1, block_N=None, threads=256, eps=1e-5, dtype="float16"):
    """LayerNorm of each row. `block_N=None` picks the single-pass kernel when `block_M` rows
    of `row_width(N)` elements fit in MAX_REGS registers per thread, else the two-pass kernel
    with tiles of 16 elements per thread; an explicit `block_N` < N forces the two-pass kernel."""
    width = row_width(N, threads)
    if block_N is None:
        block_N = width if block_M * width // threads <= MAX_REGS else threads * 16
    if block_N >= N:
        return _single_pass(M, N, block_M, width, threads, eps, dtype)
    return _two_pass(M, N, block_M, block_N, threads, eps, dtype)


def _single_pass(M, N, block_M, width, threads, eps, dtype):
    """The whole row in registers. Loads and stores are T.Parallel element accesses (not
    T.copy) so that `block_M=1` lowers; unguarded, and so vectorized, when no row or column can
    fall outside the tensor. Weight and bias are read in the output loop, after the reductions
    (the same bytes for every row, cache-resident), so they hold no registers meanwhile."""
    exact = width == N and M % block_M == 0

    @T.prim_func
    def layernorm(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
                  Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, width), "float32")
            sq = T.alloc_fragment((block_M, width), "float32")
            mean = T.alloc_fragment((block_M,), "float32")
            rstd = T.alloc_fragment((block_M,), "float32")
            # the first T.Parallel nest fixes x's layout; sq, mean and rstd follow it
            for i, j in T.Parallel(block_M, width):
                if exact:
                    x[i, j] = X[bx * block_M + i, j]
                else:  # padding reads as 0: it adds nothing to the sum
                    x[i, j] = T.if_then_else(bx * block_M + i < M and j < N, X[bx * block_M + i, j], 0.0)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] * (1.0 / N)
            for i, j in T.Parallel(block_M, width):
                if exact:
                    x[i, j] = x[i, j] - mean[i]
                else:  # padding stays 0, out of the variance
                    x[i, j] = T.if_then_else(j < N, x[i, j] - mean[i], 0.0)
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_M):
                rstd[i] = T.rsqrt(rstd[i] * (1.0 / N) + eps)
            for i, j in T.Parallel(block_M, width):
                if exact:
                    Y[bx * block_M + i, j] = x[i, j] * rstd[i] * W[j] + B[j]
                elif bx * block_M + i < M and j < N:
                    Y[bx * block_M + i, j] = x[i, j] * rstd[i] * W[j] + B[j]

    return layernorm


def _two_pass(M, N, block_M, block_N, threads, eps, dtype):
    """Pass 1 accumulates sum and sum of squares per row in fp32 (var = E[x^2] - mean^2);
    pass 2 normalizes and writes. Guarded element accesses unless every tile is interior."""
    exact = N % block_N == 0 and M % block_M == 0

    @T.prim_func
    def layernorm(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
                  Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            sq = T.alloc_fragment((block_M, block_N), "float32")
            tile_sum = T.alloc_fragment((block_M,), "float32")
            tile_sq = T.alloc_fragment((block_M,), "float32")
            mean = T.alloc_fragment((block_M,), "float32")
            rstd = T.alloc_fragment((block_M,), "float32")
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    if exact:
                        x[i, j] = X[bx * block_M + i, k * block_N + j]
                    else:
                        x[i, j] = T.if_then_else(bx * block_M + i < M and k * block_N + j < N,
                                                 X[bx * block_M + i, k * block_N + j], 0.0)
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x, tile_sum, dim=1)
                T.reduce_sum(sq, tile_sq, dim=1)
                for i in T.Parallel(block_M):
                    mean[i] = T.if_then_else(k == 0, tile_sum[i], mean[i] + tile_sum[i])
                    rstd[i] = T.if_then_else(k == 0, tile_sq[i], rstd[i] + tile_sq[i])
            for i in T.Parallel(block_M):
                mean[i] = mean[i] * (1.0 / N)
                rstd[i] = T.rsqrt(T.max(rstd[i] * (1.0 / N) - mean[i] * mean[i], 0.0) + eps)
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    if exact:
                        Y[bx * block_M + i, k * block_N + j] = \
                            (X[bx * block_M + i, k * block_N + j] - mean[i]) * rstd[i] * W[k * block_N + j] \
                            + B[k * block_N + j]
                    elif bx * block_M + i < M and k * block_N + j < N:
                        Y[bx * block_M + i, k * block_N + j] = \
                            (X[bx * block_M + i, k * block_N + j] - mean[i]) * rstd[i] * W[k * block_N + j] \
                            + B[k * block_N + j]

    return layernorm


def make_inputs(rng, M=4096, N=4096, dtype="float16"):
    return [(rng.standard_normal((M, N)) + 0.5).astype(dtype), rng.uniform(0.5, 1.5, N).astype(dtype),
            rng.uniform(-0.5, 0.5, N).astype(dtype)]


def reference(x, w, b, eps=1e-5):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    return ((x64 - mean) / np.sqrt(var + eps) * w.astype(np.float64) + b.astype(np.float64)).astype(x.dtype)


def main(target="interp"):
    sizes = dict(M=300, N=1000)
    args = make_inputs(np.random.default_rng(0), **sizes)
    for kind, extra in (("single pass", {}), ("two pass", dict(block_N=256))):
        kernel = tilecore.jit(program(**sizes, **extra), out_idx=OUT_IDX, target=target)
        y = kernel(*args)
        np.testing.assert_allclose(y.astype(np.float32), reference(*args).astype(np.float32), **TOLERANCE)
        print(f"layernorm {sizes} ({kind}) on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
