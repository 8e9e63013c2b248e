"""Row softmax in base 2 (exp2): one pass over memory when a row fits in registers, the online
(running max / rescaled sum) two-pass algorithm when it does not.

Single pass (the default whenever `block_M` padded rows fit in `MAX_REGS` fp32 registers per
thread): each thread loads its slice of the row once into a fragment, the block reduces the max
and the sum of exponentials across its threads (warp shuffles, then shared memory), and the
same registers are scaled and written back, so X is read once and Y written once -- the
memory-traffic floor. Rows too long for that stream through `block_N`-wide tiles twice.

Run: python examples/softmax.py [target]
"""

import sys

import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
# The last size forces the streaming (two-pass) kernel with a ragged last tile.
TEST_SIZES = [dict(M=64, N=256), dict(M=50, N=300), dict(M=37, N=1000, block_N=256)]
TOLERANCE = dict(rtol=1e-2, atol=1e-3)
LOG2E = 1.4426950408889634
# Single-pass widths are padded to 8 elements per thread: one 16-byte run of fp16, which the default
# fragment layout deals to each thread (runs sized for the narrowest memory dtype).
VEC = 8
MAX_REGS = 64  # fp32 registers per thread a single-pass row may take (no spills at 255)


def row_width(N: int, threads: int) -> int:
    """N rounded up to VEC elements per thread: the single-pass fragment width."""
    step = threads * VEC
    return -(-N // step) * step


def program(M=4096, N=4096, block_M=1, block_N=None, threads=256, dtype="float16"):
    """Softmax over each row of an M x N matrix.

    `block_N=None` picks the single-pass kernel when `block_M` rows of `row_width(N)` elements
    fit in MAX_REGS registers per thread, else the two-pass kernel with tiles of 16 elements
    per thread; an
    explicit `block_N` < N forces the two-pass kernel."""
    width = row_width(N, threads)
    if block_N is None:
        block_N = width if block_M * width // threads <= MAX_REGS else threads * 16
    if block_N >= N:
        return _single_pass(M, N, block_M, width, threads, dtype)
    return _two_pass(M, N, block_M, block_N, threads, dtype)


def _single_pass(M, N, block_M, width, threads, dtype):
    """The whole row in registers: one read of X, one write of Y.

    Loads and stores are T.Parallel element accesses rather than T.copy, so that `block_M=1`
    (a (1, width) fragment against a squeezed 1-row region) lowers too; when no row or column
    can fall outside the tensor (`exact`) they are unguarded and vectorize."""
    exact = width == N and M % block_M == 0  # Python bools: the guards exist only when needed

    @T.prim_func
    def softmax(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, width), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            # This first T.Parallel nest fixes x's layout; row_max and row_sum get its row
            # slices, so both reductions stay in registers, shuffles and one shared exchange.
            for i, j in T.Parallel(block_M, width):
                if exact:
                    x[i, j] = X[bx * block_M + i, j]
                else:  # padding reads as -inf: it changes neither the max nor the sum
                    x[i, j] = T.if_then_else(bx * block_M + i < M and j < N, X[bx * block_M + i, j],
                                             -T.infinity("float32"))
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, width):
                # one FFMA + EX2 per element: x * log2(e) - max * log2(e), the product hoisted
                x[i, j] = T.exp2(x[i, j] * LOG2E - row_max[i] * LOG2E)
            T.reduce_sum(x, row_sum, dim=1)
            for i in T.Parallel(block_M):
                row_sum[i] = 1.0 / row_sum[i]  # one division per row, a multiply per element
            for i, j in T.Parallel(block_M, width):
                if exact:
                    Y[bx * block_M + i, j] = x[i, j] * row_sum[i]
                elif bx * block_M + i < M and j < N:
                    Y[bx * block_M + i, j] = x[i, j] * row_sum[i]

    return softmax


def _two_pass(M, N, block_M, block_N, threads, dtype):
    """Pass 1 keeps a running max and rescaled sum per row; pass 2 writes exp2(x - max) / sum.
    Guarded element accesses (padding reads as -inf) unless every tile is interior."""
    exact = N % block_N == 0 and M % block_M == 0

    @T.prim_func
    def softmax(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            prev_max = T.alloc_fragment((block_M,), "float32")
            tile_sum = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    if exact:
                        x[i, j] = X[bx * block_M + i, k * block_N + j] * LOG2E
                    else:
                        x[i, j] = T.if_then_else(bx * block_M + i < M and k * block_N + j < N,
                                                 X[bx * block_M + i, k * block_N + j] * LOG2E,
                                                 -T.infinity("float32"))
                T.reduce_max(x, tile_sum, dim=1)
                for i in T.Parallel(block_M):
                    prev_max[i] = T.if_then_else(k == 0, tile_sum[i], row_max[i])
                    row_max[i] = T.max(prev_max[i], tile_sum[i])
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.exp2(x[i, j] - row_max[i])
                T.reduce_sum(x, tile_sum, dim=1)
                for i in T.Parallel(block_M):
                    row_sum[i] = T.if_then_else(k == 0, tile_sum[i],
                                                row_sum[i] * T.exp2(prev_max[i] - row_max[i]) + tile_sum[i])
            for i in T.Parallel(block_M):
                row_sum[i] = 1.0 / row_sum[i]
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    if exact:
                        Y[bx * block_M + i, k * block_N + j] = \
                            T.exp2(X[bx * block_M + i, k * block_N + j] * LOG2E - row_max[i]) * row_sum[i]
                    elif bx * block_M + i < M and k * block_N + j < N:
                        Y[bx * block_M + i, k * block_N + j] = \
                            T.exp2(X[bx * block_M + i, k * block_N + j] * LOG2E - row_max[i]) * row_sum[i]

    return softmax


def make_inputs(rng, M=4096, N=4096, dtype="float16"):
    return [(rng.standard_normal((M, N)) * 2).astype(dtype)]


def reference(x):
    x32 = x.astype(np.float64)
    e = np.exp(x32 - x32.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(x.dtype)


def main(target="interp"):
    sizes = dict(M=300, N=1000)
    (x,) = make_inputs(np.random.default_rng(0), **sizes)
    for kind, extra in (("single pass", {}), ("two pass", dict(block_N=256))):
        kernel = tilecore.jit(program(**sizes, **extra), out_idx=OUT_IDX, target=target)
        y = kernel(x)
        np.testing.assert_allclose(y.astype(np.float32), reference(x).astype(np.float32), **TOLERANCE)
        print(f"softmax {sizes} ({kind}) on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
