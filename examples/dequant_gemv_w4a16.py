"""W4A16 dequantizing GEMV (decoding with int4 weights): Y = X @ dequant(Wq, S), with X [M, K]
bfloat16 activations, int4 weights with one bfloat16 scale per group of `group_size` rows of K
per output column, fp32 accumulation, Y [M, N] bfloat16 (`dtype="float16"` for fp16 X, S, Y).

Weight format (symmetric int4 with an offset of 8, the convention of GPTQ and of torch's
`_weight_int4pack_mm` with zero points 0):
- `Wq` [ceil(K / 2), N] uint8: byte `Wq[j, n]` holds rows k = 2j (low nibble) and k = 2j + 1
  (high nibble) of column n, each an unsigned code q in 0..15 (`pack` / `unpack` below);
- `S` [ceil(K / group_size), N]: the scale of rows g*group_size .. (g+1)*group_size-1;
- the weight is W[k, n] = (q - 8) * S[k // group_size, n], so codes 0..15 stand for -8..7.

The kernel: one block per `block_N` columns and `block_M` rows of X; a `T.Pipelined` loop over
K copies (block_K / 2) x block_N tiles of packed bytes and the tile's scale rows into shared
memory (cp.async stages on sm_80, TMA on sm_90a where the box fits), converts the tile's scales
to float32 once, moves the bytes into registers in 16-byte runs and unpacks each byte with
`& 15` and `>> 4` (`unpack="arith"`: `% 16` and `// 16`, the same codes without bit
operations). The offset is taken out of the sum per row: x0 (lo - 8) + x1 (hi - 8) =
x1 hi + (x0 lo - 8 (x0 + x1)), so each byte costs two conversions and three fused
multiply-adds. Partial sums stay per thread element and are reduced over the tile's rows once
at the end. With `block_M` > 1 a thread keeps the block_M sums of its elements and one
unpacking serves all of them.

Measured on the H200 (BENCHMARKS.md, benchmarks/dequant.py): 12.6 us at M = 1, N = K = 4096,
0.8x torch's `_weight_int4pack_mm` (10.5 us); it is bound by the per-byte work and the
per-tile synchronisation, not by the 8 MiB weight stream (2 us at the copy bandwidth). At
M = 16 it is 0.54x: a GEMV repeats the unpacking per column block and multiplies on CUDA cores;
the right kernel there dequantizes a tile into shared memory for tensor cores.

Run: python examples/dequant_gemv_w4a16.py [target]
"""

import sys

import ml_dtypes
import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
# small shapes (every example runs on every target in CI): one exact shape, one ragged in K
# (odd, and not a multiple of the tile or of the group) and N (not a multiple of block_N)
# float16 and unpack="arith" here: Metal's default family (apple7) has no bfloat16, and the
# arithmetic spelling keeps the generic tests' kernels as they were; tests/test_dequant_gemv.py
# runs the defaults (bfloat16, unpack="bits") on interp, emu and cpu, and block_M > 1
TEST_SIZES = [dict(M=1, N=64, K=512, block_K=256, group_size=128, dtype="float16", unpack="arith"),
              dict(M=3, N=40, K=301, block_K=256, group_size=64, dtype="float16", unpack="arith")]
# exact: make_inputs draws X as small integers and S as powers of two, so every product and
# every partial sum is an integer multiple of a power of two below 2^24 (exact in float32 in any
# order) and the bfloat16 rounding of the exact sum is the reference's
TOLERANCE = dict(rtol=0, atol=0)

def _x_pair(X, row, j, M: int, K: int, exact: bool):
    """(X[row, 2j], X[row, 2j + 1]) in float32, 0 past the matrix (ragged M and K)."""
    if exact:
        return T.cast(X[row, 2 * j], "float32"), T.cast(X[row, 2 * j + 1], "float32")
    return (T.if_then_else(row < M and 2 * j < K, T.cast(X[row, 2 * j], "float32"), 0.0),
            T.if_then_else(row < M and 2 * j + 1 < K, T.cast(X[row, 2 * j + 1], "float32"), 0.0))


def _dot(byte, x0, x1, unpack: str):
    """x0 (lo - 8) + x1 (hi - 8) for the two codes lo, hi of `byte` (a kernel helper: Python
    code run at build time on kernel values). The offset's per-row term is added first, so that
    every remaining operation is a fused multiply-add."""
    if unpack == "bits":
        lo = T.cast(byte & 15, "float32")  # the codes, 0..15
        hi = T.cast(byte >> 4, "float32")
    else:  # "arith": the same codes by integer division and remainder
        lo = T.cast(byte % 16, "float32")
        hi = T.cast(byte // 16, "float32")
    return x1 * hi + (x0 * lo - 8.0 * (x0 + x1))


def program(M=1, N=4096, K=4096, group_size=128, block_N=16, block_K=512, threads=512, num_stages=3,
            dtype="bfloat16", unpack="bits", block_M=1):
    """Y = X @ dequant(Wq, S) (module docstring). Each T.Pipelined iteration (`num_stages`
    stages) handles block_K rows of K: block_K must be a multiple of the (even) group_size, so a
    tile holds whole groups. Ragged M, N and K are guarded element by element (the copies fill
    zeros past the matrix; a zero scale adds nothing). `unpack`: "bits" (`&`, `>>`) or "arith"
    (`%`, `//`)."""
    if unpack not in ("bits", "arith"):
        raise ValueError(f"unpack={unpack!r}: use 'bits' or 'arith'")
    if group_size % 2 or block_K % group_size:
        raise ValueError(f"group_size={group_size}, block_K={block_K}: group_size must be even (a "
                         "byte holds two rows of K) and block_K a multiple of it (a tile holds whole "
                         "groups)")
    Kp = (K + 1) // 2  # packed rows
    bkp = block_K // 2
    gp = group_size // 2  # packed rows per group
    exact = N % block_N == 0 and K % block_K == 0 and M % block_M == 0

    @T.prim_func
    def dequant_gemv(X: T.Tensor((M, K), dtype), Wq: T.Tensor((Kp, N), "uint8"),
                     S: T.Tensor(((K + group_size - 1) // group_size, N), dtype),
                     Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            w_s = T.alloc_shared((bkp, block_N), "uint8")
            s_s = T.alloc_shared((bkp // gp, block_N), dtype)
            s_f = T.alloc_shared((bkp // gp, block_N), "float32")
            w = T.alloc_fragment((bkp, block_N), "uint8")
            sc = T.alloc_fragment((bkp, block_N), "float32")
            if block_M == 1:
                acc1 = T.alloc_fragment((bkp, block_N), "float32")
                col1 = T.alloc_fragment((block_N,), "float32")
                T.clear(acc1)
            else:
                acc = T.alloc_fragment((block_M, bkp, block_N), "float32")
                col = T.alloc_fragment((block_M, block_N), "float32")
                T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(Kp, bkp), num_stages=num_stages):
                T.copy(Wq[ko * bkp, bx * block_N], w_s)  # zeros past the matrix
                T.copy(S[ko * (bkp // gp), bx * block_N], s_s)  # zero scales there: nothing added
                # the tile's scales to float32 once (each thread's rows of a tile lie in
                # different groups: converting per element would cost an operation per byte)
                for g, c in T.Parallel(bkp // gp, block_N):
                    s_f[g, c] = s_s[g, c]
                for r, c in T.Parallel(bkp, block_N):  # 16-byte runs from shared into registers
                    w[r, c] = w_s[r, c]
                    sc[r, c] = s_f[r // gp, c]
                if block_M == 1:  # 2-D fragments: the layout keeps 16-byte runs of the bytes
                    for r, c in T.Parallel(bkp, block_N):
                        x0, x1 = _x_pair(X, by, ko * bkp + r, M, K, exact)
                        acc1[r, c] += _dot(w[r, c], x0, x1, unpack) * sc[r, c]
                else:  # a thread holds all block_M sums of its (r, c): one unpacking serves them
                    for m, r, c in T.Parallel(block_M, bkp, block_N):
                        x0, x1 = _x_pair(X, by * block_M + m, ko * bkp + r, M, K, exact)
                        acc[m, r, c] += _dot(w[r, c], x0, x1, unpack) * sc[r, c]
            if block_M == 1:
                T.reduce_sum(acc1, col1, dim=0)
                for c in T.Parallel(block_N):
                    if exact or bx * block_N + c < N:
                        Y[by, bx * block_N + c] = col1[c]
            else:
                T.reduce_sum(acc, col, dim=1)
                for m, c in T.Parallel(block_M, block_N):
                    if exact or (by * block_M + m < M and bx * block_N + c < N):
                        Y[by * block_M + m, bx * block_N + c] = col[m, c]

    return dequant_gemv


def pack(q: np.ndarray) -> np.ndarray:
    """Codes q [K, N] (integers 0..15) as Wq [ceil(K / 2), N] uint8: row 2j in the low nibble
    of byte row j, row 2j + 1 in the high one (an odd K's last high nibble is 0)."""
    q = q.astype(np.uint8)
    if q.shape[0] % 2:
        q = np.concatenate([q, np.zeros((1, q.shape[1]), np.uint8)])
    return q[0::2] | (q[1::2] << 4)


def unpack(wq: np.ndarray, K: int) -> np.ndarray:
    """The codes [K, N] (0..15) of Wq, the inverse of `pack`."""
    q = np.empty((2 * wq.shape[0], wq.shape[1]), np.uint8)
    q[0::2], q[1::2] = wq & 15, wq >> 4
    return q[:K]


def _np_dtype(dtype: str):
    return ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)


def make_inputs(rng, M=1, N=4096, K=4096, group_size=128, dtype="bfloat16"):
    """X, Wq, S with exact arithmetic (see TOLERANCE): X small integers, random codes, scales
    2^-e for e in 0..6."""
    bf16 = _np_dtype(dtype)
    x = rng.integers(-4, 5, (M, K)).astype(bf16)
    wq = pack(rng.integers(0, 16, (K, N)))
    s = np.exp2(-rng.integers(0, 7, (-(-K // group_size), N)).astype(np.float32)).astype(bf16)
    return [x, wq, s]


def dequantize(wq, s, K, group_size=128):
    """W [K, N] float32: (q - 8) * S[k // group_size]."""
    q = unpack(wq, K).astype(np.float32) - 8.0
    return q * np.repeat(s.astype(np.float32), group_size, axis=0)[:K]


def reference(x, wq, s, K=4096, group_size=128):
    """Y in bfloat16 from the float32 product with the dequantized weight (float64 sums, which
    equal float32's whenever the float32 sums are exact, as make_inputs arranges)."""
    w = dequantize(wq, s, K, group_size).astype(np.float64)
    return (x.astype(np.float64) @ w).astype(np.float32).astype(x.dtype)


def main(target="interp"):
    sizes = dict(M=2, N=72, K=520, group_size=128)
    kernel = tilecore.jit(program(**sizes, block_K=256), out_idx=OUT_IDX, target=target)
    x, wq, s = make_inputs(np.random.default_rng(0), **sizes)
    y = kernel(x, wq, s)
    np.testing.assert_array_equal(y, reference(x, wq, s, K=sizes["K"], group_size=128))
    print(f"dequant_gemv_w4a16 {sizes} on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
