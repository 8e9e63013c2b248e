"""W4A16 dequantizing GEMV (decoding with int4 weights): Y = X @ dequant(Wq, S), with X [M, K]
bfloat16 activations, int4 weights with one bfloat16 scale per group of `group_size` rows of K
per output column, fp32 accumulation, Y [M, N] bfloat16 (`dtype="float16"` for fp16 X, S, Y).

Weight format (symmetric int4 with an offset of 8, the convention of GPTQ and of torch's
`_weight_int4pack_mm` with zero points 0):
- packed bytes [ceil(K / 2), N] uint8: byte (j, n) holds rows k = 2j (low nibble) and k = 2j + 1
  (high nibble) of column n, each an unsigned code q in 0..15 (`pack` / `unpack` below);
- the kernel reads them as `Wq` [ceil(N / 32), ceil(K / 2), 8] int32 (`as_tiles`): strips of 32
  columns, each strip's rows contiguous, four columns to a little-endian word (byte i of word c
  of strip b is column 32 b + 4 c + i; N padded with zero codes to a multiple of 32), so that a
  block streams one contiguous run of memory instead of 32-byte pieces of rows N bytes apart;
- `S` [ceil(K / group_size), N]: the scale of rows g*group_size .. (g+1)*group_size-1;
- the weight is W[k, n] = (q - 8) * S[k // group_size, n], so codes 0..15 stand for -8..7.

The kernel streams the weights once: one block per strip of 32 columns (and `block_M` rows of
X); a `T.Pipelined` loop copies tiles of the strip's rows into shared memory (16-byte cp.async,
`num_stages` tiles in flight) and each thread reads one 16-byte run (4 words, 16 columns) of
`rows` consecutive packed rows per tile, all in one scale group. A nibble is never shifted into
place: its word is masked where it lies (`w & (15 << p)`, one operation) and converted to
float32, which is q * 2^p exactly, and the row's activation is scaled by 2^-p once for all of
the thread's columns, so each nibble costs a mask, a conversion and one fused multiply-add. The
offset 8 and the scale are applied once per tile and column: sum x (q - 8) s = s (sum x q - 8
sum x), the row sums of x kept per thread. The tiles' sums are reduced over the block's threads
once at the end (warp shuffles, then shared memory). `unpack="arith"` extracts the same codes
with `//` and `%` instead (no bit operations).

Measured on the H200: BENCHMARKS.md, "W4A16" (benchmarks/dequant.py).

Run: python examples/dequant_gemv_w4a16.py [target]
"""

import sys

import ml_dtypes
import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
# small shapes (every example runs on every target in CI): one exact shape, one ragged in K
# (odd, and not a multiple of a tile or of the group) and N (not a multiple of the 32-column strip)
# float16 and unpack="arith" here: Metal's default family (apple7) has no bfloat16, and the
# arithmetic spelling is covered by the generic tests; tests/test_dequant_gemv.py runs the
# defaults (bfloat16, unpack="bits") on interp, emu and cpu, and block_M > 1
TEST_SIZES = [dict(M=1, N=64, K=512, threads=64, rows=8, group_size=128, dtype="float16", unpack="arith"),
              dict(M=3, N=40, K=301, threads=64, rows=4, group_size=64, dtype="float16", unpack="arith")]
# exact: make_inputs draws X as small integers and S as powers of two, so every product and
# every partial sum is an integer multiple of a power of two below 2^24 (exact in float32 in any
# order) and the bfloat16 rounding of the exact sum is the reference's
TOLERANCE = dict(rtol=0, atol=0)


def _code(u, i: int, high: bool, unpack: str):
    """Nibble `high` of byte `i` of the uint32 word `u` as float32 (a kernel helper: Python code
    run at build time on kernel values). "bits": the masked word, q * 2^p with p = 8 i (+ 4),
    which the caller's activation scaled by 2^-p turns back into q; "arith": q itself."""
    p = 8 * i + 4 * high
    if unpack == "bits":
        return T.cast(u & T.cast(15 << p, "uint32"), "float32")
    return T.cast((u // T.cast(1 << p, "uint32")) % T.cast(16, "uint32"), "float32")


def _x(X, row, k, M: int, K: int, exact: bool):
    """X[row, k] in float32, 0 past the matrix (ragged M and K)."""
    if exact:
        return T.cast(X[row, k], "float32")
    return T.if_then_else(row < M and k < K, T.cast(X[row, k], "float32"), 0.0)


STRIP = 32  # columns per strip of the weight format and per block


def program(M=1, N=4096, K=4096, group_size=128, threads=256, rows=8, num_stages=2, dtype="bfloat16",
            unpack="bits", block_M=1):
    """Y = X @ dequant(Wq, S) (module docstring). Each T.Pipelined tile (`num_stages` in
    flight) holds threads / 2 * `rows` packed rows of a strip (two threads per row, 16 bytes
    each); `rows` must divide group_size / 2 (a thread's rows of a tile share one scale row).
    Ragged M, N and K are guarded element by element (the
    copies fill zeros past the matrix; zero activations and scales there). `unpack`: "bits"
    (`&`) or "arith" (`//`, `%`)."""
    if unpack not in ("bits", "arith"):
        raise ValueError(f"unpack={unpack!r}: use 'bits' or 'arith'")
    gp = group_size // 2  # packed rows per group
    if group_size % 2 or gp % rows:
        raise ValueError(f"group_size={group_size}, rows={rows}: group_size must be even (a byte "
                         "holds two rows of K) and rows must divide group_size / 2 (a thread's "
                         "rows of a tile lie in one scale group)")
    if threads % 2:
        raise ValueError(f"threads={threads}: two threads share a strip's row (16 bytes each)")
    Kp = (K + 1) // 2  # packed rows
    bw = STRIP // 4  # words per strip row
    G = (K + group_size - 1) // group_size
    NS = -(-N // STRIP)  # strips
    R = threads // 2  # threads along K
    TR = R * rows  # packed rows per tile
    exact = Kp % TR == 0 and K % 2 == 0 and N % STRIP == 0 and M % block_M == 0
    ms, b4, kos = list(range(block_M)), [0, 1, 2, 3], list(range(rows))
    cols4 = [(m, i) for m in ms for i in b4]  # (row of X, byte of the word)
    scale = [[2.0 ** -(8 * i), 2.0 ** -(8 * i + 4)] for i in b4] if unpack == "bits" else [[1.0, 1.0]] * 4

    @T.prim_func
    def dequant_gemv(X: T.Tensor((M, K), dtype), Wq: T.Tensor((NS, Kp, bw), "int32"),
                     S: T.Tensor((G, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(NS, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            w_s = T.alloc_shared((TR, bw), "int32")
            w = T.alloc_fragment((R, bw), "int32")
            sx = [T.alloc_fragment((R,), "float32") for _ in ms]  # the row sums of x
            raw = [T.alloc_fragment((R, bw), "float32") for _ in cols4]  # sum x q, per tile
            acc = [T.alloc_fragment((R, bw), "float32") for _ in cols4]
            sc = [T.alloc_fragment((R, bw), "float32") for _ in b4]
            col = [T.alloc_fragment((bw,), "float32") for _ in cols4]
            for a in acc:
                T.clear(a)
            for ko in T.Pipelined(T.ceildiv(Kp, TR), num_stages=num_stages):
                T.copy(Wq[bx, ko * TR:ko * TR + TR, 0:bw], w_s)  # contiguous; zeros past the matrix
                for s0 in sx:
                    T.clear(s0)
                for r0 in raw:
                    T.clear(r0)
                for j in kos:  # a thread's rows r * rows + j of the tile, one 16-byte run each
                    for r, c in T.Parallel(R, bw):
                        w[r, c] = w_s[r * rows + j, c]
                    for r, c in T.Parallel(R, bw):
                        k = 2 * (ko * TR + r * rows + j)
                        u = T.cast(w[r, c], "uint32")
                        for mi, ii in cols4:
                            x0 = _x(X, by * block_M + mi, k, M, K, exact)
                            x1 = _x(X, by * block_M + mi, k + 1, M, K, exact)
                            raw[mi * 4 + ii][r, c] = (raw[mi * 4 + ii][r, c]
                                                      + (x0 * scale[ii][0]) * _code(u, ii, False, unpack)) \
                                + (x1 * scale[ii][1]) * _code(u, ii, True, unpack)
                    for r in T.Parallel(R):
                        k = 2 * (ko * TR + r * rows + j)
                        for mj in ms:
                            sx[mj][r] += (_x(X, by * block_M + mj, k, M, K, exact)
                                          + _x(X, by * block_M + mj, k + 1, M, K, exact))
                for ij in b4:  # the scale row of the thread's rows, per byte of the word
                    for r, c in T.Parallel(R, bw):
                        g = (ko * TR + r * rows) // gp
                        n = (bx * bw + c) * 4 + ij
                        if exact:
                            sc[ij][r, c] = S[g, n]
                        else:
                            sc[ij][r, c] = T.if_then_else(g < G and n < N, S[g, n], 0.0)
                for mk, ik in cols4:
                    for r, c in T.Parallel(R, bw):
                        acc[mk * 4 + ik][r, c] += (raw[mk * 4 + ik][r, c] - 8.0 * sx[mk][r]) * sc[ik][r, c]
            for mo, io in cols4:
                T.reduce_sum(acc[mo * 4 + io], col[mo * 4 + io], dim=0)
                for c in T.Parallel(bw):
                    if exact or (by * block_M + mo < M and (bx * bw + c) * 4 + io < N):
                        Y[by * block_M + mo, (bx * bw + c) * 4 + io] = col[mo * 4 + io][c]

    return dequant_gemv


def pack(q: np.ndarray) -> np.ndarray:
    """Codes q [K, N] (integers 0..15) as Wq [ceil(K / 2), N] uint8: row 2j in the low nibble
    of byte row j, row 2j + 1 in the high one (an odd K's last high nibble is 0)."""
    q = q.astype(np.uint8)
    if q.shape[0] % 2:
        q = np.concatenate([q, np.zeros((1, q.shape[1]), np.uint8)])
    return q[0::2] | (q[1::2] << 4)


def as_tiles(wq: np.ndarray) -> np.ndarray:
    """The packed bytes [Kp, N] uint8 as the kernel's Wq [ceil(N / 32), Kp, 8] int32: N padded
    with zero bytes to a multiple of 32, then strip b = columns 32 b .. 32 b + 31, word c of a
    strip row = its columns 4 c .. 4 c + 3 (byte i, little-endian, is column 4 c + i)."""
    kp, n = wq.shape
    pad = -n % STRIP
    w = np.concatenate([wq, np.zeros((kp, pad), np.uint8)], axis=1) if pad else wq
    words = np.ascontiguousarray(w).view("<i4").reshape(kp, -1, STRIP // 4)
    return np.ascontiguousarray(words.transpose(1, 0, 2))


def bytes_of(wq: np.ndarray) -> np.ndarray:
    """The packed bytes [Kp, N'] uint8 of `as_tiles` output (N' = N padded to a multiple of 32),
    or `wq` itself when it is bytes already."""
    if wq.dtype == np.uint8:
        return wq
    _, kp, _ = wq.shape
    return np.ascontiguousarray(wq.transpose(1, 0, 2)).reshape(kp, -1).view(np.uint8)


def unpack(wq: np.ndarray, K: int) -> np.ndarray:
    """The codes [K, N] (0..15) of packed bytes (or of `as_tiles` output: N padded to a multiple
    of 32), the inverse of `pack`."""
    wq = bytes_of(wq)
    q = np.empty((2 * wq.shape[0], wq.shape[1]), np.uint8)
    q[0::2], q[1::2] = wq & 15, wq >> 4
    return q[:K]


def _np_dtype(dtype: str):
    return ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)


def make_inputs(rng, M=1, N=4096, K=4096, group_size=128, dtype="bfloat16"):
    """X, Wq (`as_tiles`), S with exact arithmetic (see TOLERANCE): X small integers, random codes,
    scales 2^-e for e in 0..6."""
    bf16 = _np_dtype(dtype)
    x = rng.integers(-4, 5, (M, K)).astype(bf16)
    wq = as_tiles(pack(rng.integers(0, 16, (K, N))))
    s = np.exp2(-rng.integers(0, 7, (-(-K // group_size), N)).astype(np.float32)).astype(bf16)
    return [x, wq, s]


def dequantize(wq, s, K, group_size=128):
    """W [K, N] float32: (q - 8) * S[k // group_size] (wq: bytes or `as_tiles` output)."""
    q = unpack(wq, K)[:, :s.shape[1]].astype(np.float32) - 8.0
    return q * np.repeat(s.astype(np.float32), group_size, axis=0)[:K]


def reference(x, wq, s, K=4096, group_size=128):
    """Y in bfloat16 from the float32 product with the dequantized weight (float64 sums, which
    equal float32's whenever the float32 sums are exact, as make_inputs arranges)."""
    w = dequantize(wq, s, K, group_size).astype(np.float64)
    return (x.astype(np.float64) @ w).astype(np.float32).astype(x.dtype)


def main(target="interp"):
    sizes = dict(M=2, N=72, K=520, group_size=128)
    kernel = tilecore.jit(program(**sizes), out_idx=OUT_IDX, target=target)
    x, wq, s = make_inputs(np.random.default_rng(0), **sizes)
    y = kernel(x, wq, s)
    np.testing.assert_array_equal(y, reference(x, wq, s, K=sizes["K"], group_size=128))
    print(f"dequant_gemv_w4a16 {sizes} on {kernel.target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
