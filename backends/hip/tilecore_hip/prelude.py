"""The text every generated HIP kernel starts with: HIP's keywords without ROCm's headers.

The offline build uses `-nogpuinc -nogpulib` (no hip_runtime.h, no ocml/ockl device libraries,
which Debian lacks for gfx942+), so the few HIP spellings a kernel needs are defined here as
clang attributes and AMDGPU builtins, and the float32 functions LLVM cannot lower without a
device library (tanh, erf, pow) are written out. Kept as data so tests can compile it for the
host and check the math against NumPy.
"""

from __future__ import annotations

KEYWORDS = """\
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __launch_bounds__(n) __attribute__((amdgpu_flat_work_group_size(1, n)))"""

# A workgroup barrier as HIP defines it: release fence, s_barrier, acquire fence (the fences
# make LDS and global writes before the barrier visible to the workgroup after it).
BARRIER = """\
__device__ static inline void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}"""


def shuffles(wave: int) -> str:
    """`tilecore_shfl_xor` / `tilecore_shfl` over `ds_bpermute` (which addresses lanes in bytes)
    for 32- and 64-bit values, in groups of `width` lanes of a wave of `wave` lanes. Blocks are
    one-dimensional, so a lane's index is its work-item index modulo the wave size."""
    return f"""\
__device__ static inline int tilecore_lane() {{ return (int)__builtin_amdgcn_workitem_id_x() & {wave - 1}; }}
__device__ static inline int tilecore_bperm(int src, int v) {{
  return __builtin_amdgcn_ds_bpermute(src << 2, v);
}}
__device__ static inline int tilecore_xor_src(int mask, int width) {{
  const int self = tilecore_lane(), src = self ^ mask;
  return src >= ((self + width) & ~(width - 1)) ? self : src;
}}
__device__ static inline int tilecore_idx_src(int lane, int width) {{
  return (tilecore_lane() & ~(width - 1)) + (lane & (width - 1));
}}
__device__ static inline int tilecore_shfl_src(int src, int v) {{ return tilecore_bperm(src, v); }}
__device__ static inline unsigned tilecore_shfl_src(int src, unsigned v) {{
  return (unsigned)tilecore_bperm(src, (int)v);
}}
__device__ static inline float tilecore_shfl_src(int src, float v) {{
  return __builtin_bit_cast(float, tilecore_bperm(src, __builtin_bit_cast(int, v)));
}}
__device__ static inline unsigned long long tilecore_shfl_src(int src, unsigned long long v) {{
  const unsigned lo = (unsigned)tilecore_bperm(src, (int)(unsigned)v);
  const unsigned hi = (unsigned)tilecore_bperm(src, (int)(unsigned)(v >> 32));
  return ((unsigned long long)hi << 32) | lo;
}}
__device__ static inline long long tilecore_shfl_src(int src, long long v) {{
  return (long long)tilecore_shfl_src(src, (unsigned long long)v);
}}
__device__ static inline double tilecore_shfl_src(int src, double v) {{
  return __builtin_bit_cast(double, tilecore_shfl_src(src, __builtin_bit_cast(unsigned long long, v)));
}}
template <typename T> __device__ static inline T tilecore_shfl_xor(T v, int mask, int width) {{
  return tilecore_shfl_src(tilecore_xor_src(mask, width), v);
}}
template <typename T> __device__ static inline T tilecore_shfl(T v, int lane, int width) {{
  return tilecore_shfl_src(tilecore_idx_src(lane, width), v);
}}"""


# float32 functions with no LLVM lowering on AMDGPU without ocml. Accuracy (checked against
# NumPy on the host by tests/test_hip_prelude.py): tanh and erf within a few float32 ulp
# (odd Taylor series near 0, where the closed forms cancel; erf elsewhere Abramowitz-Stegun
# 7.1.26, |error| <= 1.5e-7); pow through exp2(y * log2|x|), relative error growing with
# |y * log2 x| (about 1e-5 at results near 2^100), with IEEE's special cases for signs, zeros
# and infinities.
MATH = {
    "tanh": """\
__device__ static inline float tilecore_tanhf(float x) {
  const float ax = __builtin_fabsf(x);
  if (ax < 0.25f) {
    const float x2 = x * x;
    return x * (1.0f + x2 * (-0.333333333f + x2 * (0.133333333f + x2 * (-0.0539682540f
             + x2 * 0.0218694885f))));
  }
  if (ax > 9.0f) return __builtin_copysignf(1.0f, x);
  const float t = 1.0f - 2.0f / (__builtin_expf(2.0f * ax) + 1.0f);
  return __builtin_copysignf(t, x);
}""",
    "erf": """\
__device__ static inline float tilecore_erff(float x) {
  const float ax = __builtin_fabsf(x);
  if (ax < 0.5f) {
    const float x2 = x * x;
    return x * 1.12837917f * (1.0f + x2 * (-0.333333333f + x2 * (0.1f + x2 * (-0.0238095238f
             + x2 * (0.00462962963f + x2 * -0.000757575758f)))));
  }
  if (ax >= 4.0f) return __builtin_copysignf(1.0f, x);
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  const float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f
                  + t * (-1.453152027f + t * 1.061405429f))));
  return __builtin_copysignf(1.0f - p * __builtin_expf(-ax * ax), x);
}""",
    "pow": """\
__device__ static inline float tilecore_powf(float x, float y) {
  if (y == 0.0f || x == 1.0f) return 1.0f;
  if (__builtin_isnan(x) || __builtin_isnan(y)) return x + y;
  float r = __builtin_exp2f(y * __builtin_log2f(__builtin_fabsf(x)));
  if (__builtin_signbit(x)) {
    if (__builtin_truncf(y) != y) return (x == 0.0f || __builtin_isinf(x)) ? r : __builtin_nanf("");
    if (__builtin_fmodf(__builtin_fabsf(y), 2.0f) == 1.0f) r = -r;
  }
  return r;
}""",
}

# Integer min / max as functions, so each operand is evaluated once (see HipRenderer.expr_BinOp).
INT_MINMAX = {op: f"template <typename T> __device__ static inline T tilecore_{op}(T a, T b) "
                  f"{{ return a {cmp} b ? a : b; }}" for op, cmp in (("min", "<"), ("max", ">"))}

# a ** b for integers as the oracle computes it: wrapped mod 2**64; a negative exponent gives
# 1 / a**-b truncated (0 unless |a| == 1).
IPOW = """\
__device__ static inline long long tilecore_ipow(long long a, long long b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
  unsigned long long r = 1, base = (unsigned long long)a, e = (unsigned long long)b;
  while (e) { if (e & 1) r *= base; base *= base; e >>= 1; }
  return (long long)r;
}"""


# fp8 formats stored as `unsigned char` bit patterns: (mantissa bits, exponent bias, largest
# finite encoding, what overflow gives). The oracle (ml_dtypes) rounds to nearest even and
# overflows to NaN (e4m3fn, which has no infinity) or to infinity (e5m2).
FP8 = {"float8_e4m3fn": ("e4m3", 3, 7, 0x7E, 0x7F), "float8_e5m2": ("e5m2", 2, 15, 0x7B, 0x7C)}


def fp8_decoder(dtype: str) -> tuple[str, str]:
    """(name, text) of the exact fp8 -> float32 conversion of `dtype`."""
    short, m, bias, _, _ = FP8[dtype]
    emax = (1 << (7 - m)) - 1
    nan, inf = '__builtin_nanf("")', "__builtin_inff()"
    special = (f"if (e == {emax} && mm == {(1 << m) - 1}) return {nan};" if short == "e4m3"
               else f"if (e == {emax}) return mm ? {nan} : (s ? -{inf} : {inf});")
    name = f"tilecore_{short}_to_f32"
    return name, f"""\
__device__ static inline float {name}(unsigned char v) {{
  const unsigned s = (unsigned)(v & 0x80) << 24, e = (v >> {m}) & {emax}, mm = v & {(1 << m) - 1};
  {special}
  if (e == 0) {{ const float f = (float)mm * {2.0 ** -(bias - 1 + m)!r}f; return s ? -f : f; }}
  return __builtin_bit_cast(float, s | ((e + {127 - bias}) << 23) | (mm << {23 - m}));
}}"""


def fp8_encoder(dtype: str, source: str) -> tuple[str, str]:
    """(name, text) of the one-rounding float32 / float64 (`source`) -> fp8 conversion: round to
    nearest even on the source's bits (subnormals by an exact power-of-two scaling and rint),
    overflow to the format's NaN or infinity."""
    short, m, bias, max_enc, over = FP8[dtype]
    f64 = source == "float64"
    ctype, utype, f = ("double", "unsigned long long", "") if f64 else ("float", "unsigned", "f")
    fbits, fman, fbias = (64, 52, 1023) if f64 else (32, 23, 127)
    shift = fman - m
    name = f"tilecore_{'f64' if f64 else 'f32'}_to_{short}"
    return name, f"""\
__device__ static inline unsigned char {name}({ctype} x) {{
  const {utype} u = __builtin_bit_cast({utype}, x);
  const unsigned char s = (unsigned char)((u >> {fbits - 8}) & 0x80);
  const {ctype} a = __builtin_fabs{f}(x);
  if (a != a) return s | 0x7F;
  if (a < {2.0 ** (1 - bias)!r}{f})
    return s | (unsigned char)__builtin_rint{f}(a * {2.0 ** (bias - 1 + m)!r}{f});
  const {utype} ua = __builtin_bit_cast({utype}, a);
  const {utype} r = (ua + ((({utype})1 << {shift - 1}) - 1) + ((ua >> {shift}) & 1)) >> {shift};
  const {utype} enc = r - {(fbias - bias) << m};
  return enc > {max_enc} ? (unsigned char)(s | {over}) : (unsigned char)(s | enc);
}}"""
