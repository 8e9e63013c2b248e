"""W4A16 dequantizing GEMV (decoding with int4 weights): Y = X @ dequant(Wq, S), with X [M, K]
bfloat16 activations, int4 weights with one bfloat16 scale per group of `group_size` rows of K
per output column, fp32 accumulation, Y [M, N] bfloat16.

Weight format (symmetric int4 with an offset of 8, the convention of GPTQ and of torch's
`_weight_int4pack_mm` with zero points 0):
- `Wq` [ceil(K / 2), N] uint8: byte `Wq[j, n]` holds rows k = 2j (low nibble) and k = 2j + 1
  (high nibble) of column n, each an unsigned code q in 0..15;
- `S` [ceil(K / group_size), N] bfloat16: the scale of rows g*group_size .. (g+1)*group_size-1;
- the weight is W[k, n] = (q - 8) * S[k // group_size, n], so codes 0..15 stand for -8..7.

At M = 1 the product is bound by reading Wq once (K N / 2 bytes: 8 MiB at 4096^2), so the
kernel is built like examples/gemv.py: one block per `block_N` columns (and per row of X), each
thread loads 16-byte runs of packed bytes (16 columns, 2 rows of K) straight into registers, all
of a tile's loads issued before the first multiply-add waits for one; the block's partial sums
are reduced over its rows once at the end. Unpacking is integer work (`& 15`, `>> 4`) and the
two codes of a byte are converted to float32 with one conversion: the byte's value b = lo + 16 hi
is exact in float32, hi = floor(b / 16) is found with float additions (adding 1.5 * 2^23 rounds
to an integer in float32), and lo never needs a conversion of its own:

    x[2j] * lo + x[2j+1] * hi = x[2j] * b + hi * (x[2j+1] - 16 x[2j])

The offset of 8 is taken out of the sum per group: sum_k x_k (q_k - 8) = sum_k x_k q_k - 8 sum_k
x_k (the sums over X are per row, shared by every column). Conversions run at an eighth of the
rate of multiply-adds on sm_80/sm_90, so halving them matters: at 4096^2 they would otherwise
cost about as long as the weight stream.

Rows of X past the first each read Wq again (from L2): M up to 16 works and is checked, but the
kernel is a GEMV; larger M wants a tensor-core GEMM over a dequantized tile.

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
# float16 and unpack="float" here: Metal's default family (apple7) has no bfloat16 and the cpu
# target has no bit operations yet; tests/test_dequant_gemv.py runs the defaults (bfloat16,
# unpack="bits") and block_M > 1
TEST_SIZES = [dict(M=1, N=64, K=512, block_K=256, group_size=128, dtype="float16", unpack="float"),
              dict(M=3, N=40, K=301, block_K=256, group_size=64, dtype="float16", unpack="float")]
# exact: make_inputs draws X as small integers and S as powers of two, so every product and
# every partial sum is an integer multiple of a power of two below 2^24 (exact in float32 in any
# order) and the bfloat16 rounding of the exact sum is the reference's
TOLERANCE = dict(rtol=0, atol=0)

# 1.5 * 2^23: adding it to a float32 in [-2^22, 2^22] rounds that value to an integer
_ROUND = 12582912.0


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
        return x1 * hi + (x0 * lo - 8.0 * (x0 + x1))
    # "float": one conversion per byte (module docstring)
    b = T.cast(byte, "float32")  # lo + 16 hi, exact
    hi = (b * 0.0625 - 0.46875 + _ROUND) - _ROUND  # floor(b / 16), exact
    return hi * (x1 - 16.0 * x0) + (x0 * b - 8.0 * (x0 + x1))


def program(M=1, N=4096, K=4096, group_size=128, block_N=32, block_K=1024, threads=256, num_stages=2,
            dtype="bfloat16", unpack="bits", block_M=1):
    """Y = X @ dequant(Wq, S) (see the module docstring for the format). Each loop iteration
    loads a (block_K / 2) x block_N tile of packed bytes into registers (block_K * block_N /
    (2 threads) bytes per thread, in 16-byte runs); `block_K` must be a multiple of
    2 * group_size... or group_size a multiple of block_K ... (checked). Ragged N and K are
    guarded element by element (zeros add nothing)."""
    if unpack not in ("bits", "float"):
        raise ValueError(f"unpack={unpack!r}: use 'bits' or 'float'")
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
