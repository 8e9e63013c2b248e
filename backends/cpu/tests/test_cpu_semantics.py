"""cpu agrees with the interp oracle bit for bit wherever the oracle's semantics are exact.

Kernels take T.dynamic lengths where they can, so Hypothesis varies the data without compiling
a new kernel per example (numba compiles take seconds; the on-disk cache keeps reruns fast).
"""

import functools
import inspect

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tilecore_cpu import exprs as cpu_exprs
from tilecore_cpu import runtime

import tilecore
import tilecore.language as T
from tilecore import dtypes as dt
from tilecore import semantics as S
from tilecore.errors import TileRuntimeError


@functools.cache
def both(factory, *params, out_idx=(-1,)):
    """(cpu kernel, interp kernel) for `factory(*params)`, built once per test session."""
    func = factory(*params)
    return (tilecore.jit(func, out_idx=list(out_idx), target="cpu"),
            tilecore.jit(func, out_idx=list(out_idx), target="interp"))


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind in "iub":
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_array_equal(a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}"))


# ------------------------------------------------------------------ integer arithmetic


def int_ops(dtype):
    n = T.dynamic("n")

    @T.prim_func
    def int_ops(A: T.Tensor((n,), "int32"), B: T.Tensor((n,), "int32"), C: T.Tensor((n, 6), dtype)):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                k = bx * 64 + i
                if k < n:
                    C[k, 0] = A[k] // B[k]
                    C[k, 1] = A[k] % B[k]
                    C[k, 2] = A[k] * B[k] * 70000
                    C[k, 3] = T.max(A[k], B[k]) - T.min(A[k], -B[k])
                    C[k, 4] = T.if_then_else(A[k] > B[k], A[k] - B[k], B[k] * 3)
                    C[k, 5] = T.cast(T.cast(A[k], "float32") * 0.75, "int32")

    return int_ops


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint16"])
@settings(max_examples=25)
@given(st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(-1000, 1000).filter(bool)),
                min_size=1, max_size=300))
def test_integer_ops_wrap_and_truncate_like_c(dtype, pairs):
    a = np.array([p[0] for p in pairs], np.int32)
    b = np.array([p[1] for p in pairs], np.int32)
    cpu, oracle = both(int_ops, dtype)
    same_bits(cpu(a, b), oracle(a, b))


# ------------------------------------------------------------------ narrow floats


def narrow_ops(dtype):
    n = T.dynamic("n")

    @T.prim_func
    def narrow_ops(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n, 7), dtype)):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                k = bx * 32 + i
                if k < n:
                    C[k, 0] = A[k] + B[k]
                    C[k, 1] = A[k] * B[k] - A[k]
                    C[k, 2] = A[k] / B[k]
                    C[k, 3] = T.max(A[k], B[k]) * 0.1
                    C[k, 4] = T.cast(T.cast(A[k], "float32") * 1.0001, dtype)
                    C[k, 5] = T.sqrt(T.abs(A[k]))
                    C[k, 6] = -A[k] + T.floor(B[k])

    return narrow_ops


NARROW = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
          "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}


@pytest.mark.parametrize("dtype", list(NARROW))
@settings(max_examples=20)
@given(st.integers(0, 2**32 - 1), st.integers(1, 200))
def test_narrow_float_elementwise_is_bit_exact(dtype, seed, n):
    rng = np.random.default_rng(seed)
    bits = 8 * np.dtype(NARROW[dtype]).itemsize
    # every bit pattern is fair game: subnormals, infinities, NaNs, overflow on every op
    a = rng.integers(0, 2**bits, n, dtype=np.uint64).astype(f"u{bits // 8}").view(NARROW[dtype])
    b = rng.integers(0, 2**bits, n, dtype=np.uint64).astype(f"u{bits // 8}").view(NARROW[dtype])
    cpu, oracle = both(narrow_ops, dtype)
    got, want = cpu(a, b), oracle(a, b)
    g, w = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    same_bits(np.where(np.isnan(g), 0, g), np.where(np.isnan(w), 0, w))


def float_casts():
    n = T.dynamic("n")

    @T.prim_func
    def float_casts(A: T.Tensor((n,), "float32"), C: T.Tensor((n, 6), "int32")):
        with T.Kernel(T.ceildiv(n, 16), threads=16) as bx:
            for i in T.Parallel(16):
                k = bx * 16 + i
                if k < n:
                    C[k, 0] = T.cast(T.cast(A[k], "float16"), "float32") == A[k]
                    C[k, 1] = T.cast(A[k], "int32")
                    C[k, 2] = T.cast(T.cast(A[k], "bfloat16"), "float32") < A[k]
                    C[k, 3] = T.cast(T.cast(A[k], "float8_e4m3fn"), "float32") > A[k]
                    C[k, 4] = T.cast(T.cast(A[k], "float8_e5m2"), "float32") == A[k]
                    C[k, 5] = T.cast(A[k], "int8")

    return float_casts


@settings(max_examples=30)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=200))
def test_float_to_narrow_and_int_casts_match(values):
    a = np.array(values, np.float32)
    cpu, oracle = both(float_casts)
    same_bits(cpu(a), oracle(a))


# ------------------------------------------------------------------ tile operations


def tile_ops(block_m, block_n):
    m, n = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def tile_ops(A: T.Tensor((m, n), "float32"), Out: T.Tensor((m, n), "float32"),
                 Stats: T.Tensor((m, 5), "float32")):
        with T.Kernel(T.ceildiv(m, block_m), threads=64) as bx:
            t = T.alloc_shared((block_m, block_n), "float32")
            h = T.alloc_fragment((block_m, block_n), "float16")
            s = T.alloc_fragment((block_m,), "float32")
            mx = T.alloc_fragment((block_m,), "float32")
            am = T.alloc_fragment((block_m,), "float32")
            c = T.alloc_fragment((block_m, block_n), "float32")
            T.fill(s, 0.5)
            T.fill(mx, -T.infinity("float32"))
            for k in T.serial(T.ceildiv(n, block_n)):
                T.copy(A[bx * block_m, k * block_n], t)
                T.reduce_sum(t, s, dim=1, clear=False)
                T.reduce_max(t, mx, dim=1, clear=False)
                T.copy(t, h)
                T.cumsum(h, dim=1)
                T.copy(h, c)
                T.copy(c, Out[bx * block_m, k * block_n])
            T.reduce_absmax(t, am, dim=1)
            for i in T.Parallel(block_m):
                if bx * block_m + i < m:
                    Stats[bx * block_m + i, 0] = s[i]
                    Stats[bx * block_m + i, 1] = mx[i]
                    Stats[bx * block_m + i, 2] = am[i]
                    Stats[bx * block_m + i, 3] = T.min(s[i], mx[i])
                    Stats[bx * block_m + i, 4] = t[i, block_n - 1]

    return tile_ops


@settings(max_examples=15)
@given(st.integers(1, 40), st.integers(1, 50), st.integers(0, 2**32 - 1))
def test_partial_tiles_reduce_and_scan_exactly(m, n, seed):
    """Dyadic inputs make every sum exact in any order; copies read 0 past the tensor's edge and
    drop writes there; float16 cumsum rounds once per element."""
    rng = np.random.default_rng(seed)
    a = (rng.integers(-64, 64, (m, n)) / 8).astype(np.float32)
    cpu, oracle = both(tile_ops, 8, 16, out_idx=(-2, -1))
    for got, want in zip(cpu(a), oracle(a)):
        same_bits(got, want)


def gemm_kernel(dtype, accum, ta, tb):
    m = T.dynamic("m")

    @T.prim_func
    def gemm_t(A: T.Tensor((m, 24) if not ta else (24, m), dtype),
               B: T.Tensor((24, 40) if not tb else (40, 24), dtype), C: T.Tensor((m, 40), accum)):
        with T.Kernel(T.ceildiv(m, 16), threads=64) as bx:
            a_s = T.alloc_shared((16, 8) if not ta else (8, 16), dtype)
            b_s = T.alloc_shared((8, 40) if not tb else (40, 8), dtype)
            c_l = T.alloc_fragment((16, 40), accum)
            T.clear(c_l)
            for k in T.Pipelined(3, num_stages=2):
                if ta:
                    T.copy(A[k * 8, bx * 16], a_s)
                else:
                    T.copy(A[bx * 16, k * 8], a_s)
                if tb:
                    T.copy(B[0, k * 8], b_s)
                else:
                    T.copy(B[k * 8, 0], b_s)
                T.gemm(a_s, b_s, c_l, transpose_A=ta, transpose_B=tb)
            T.copy(c_l, C[bx * 16, 0])

    return gemm_t


@pytest.mark.parametrize("dtype,accum", [("float32", "float32"), ("float16", "float32"),
                                         ("int8", "int32"), ("float64", "float64"),
                                         ("bfloat16", "float32"), ("float8_e4m3fn", "float16")])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_gemm_matches_oracle_exactly_on_small_integers(dtype, accum, ta, tb):
    rng = np.random.default_rng(0)
    m = 37
    npd = tilecore.dtypes.as_dtype(dtype).np
    a = rng.integers(-4, 5, (24, m) if ta else (m, 24)).astype(npd)
    b = rng.integers(-4, 5, (40, 24) if tb else (24, 40)).astype(npd)
    cpu, oracle = both(gemm_kernel, dtype, accum, ta, tb)
    same_bits(cpu(a, b), oracle(a, b))


def histogram(bins):
    n = T.dynamic("n")

    @T.prim_func
    def histogram(X: T.Tensor((n,), "int32"), H: T.Tensor((bins,), "int32")):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    T.atomic_add(H[X[bx * 32 + i] % bins], 1)

    return histogram


@settings(max_examples=10)
@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=500))
def test_global_atomic_add_counts_every_update(xs):
    x = np.array(xs, np.int32)
    cpu, _ = both(histogram, 7)
    np.testing.assert_array_equal(cpu(x), np.bincount(x % 7, minlength=7).astype(np.int32))


# ------------------------------------------------------------------ faults


def oob_kernel():
    @T.prim_func
    def oob_read(A: T.Tensor((16,), "float32"), D: T.Tensor((1,), "int32"),
                 B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                B[i] = A[i + D[0]]  # the faulting line (a constant offset fails to compile)

    return oob_read


def test_out_of_bounds_access_raises_naming_the_users_line():
    # by default the load outside A reads 0 (TileLang's safe memory, tests/test_safe_memory.py)
    a = np.arange(16, dtype=np.float32)
    out = tilecore.jit(oob_kernel(), out_idx=[-1], target="cpu")(a, np.full(1, 4, np.int32))
    np.testing.assert_array_equal(out, np.concatenate([a[4:], np.zeros(4, np.float32)]))
    cpu = tilecore.jit(oob_kernel(), out_idx=[-1], target="cpu",
                       pass_configs={"tl.disable_safe_memory_legalize": True})  # reported
    with pytest.raises(TileRuntimeError) as info:
        cpu(np.zeros(16, np.float32), np.ones(1, np.int32))
    src, first = inspect.getsourcelines(oob_kernel)
    line = first + next(i for i, t in enumerate(src) if "the faulting line" in t)
    assert info.value.loc.line == line and info.value.loc.file == __file__
    assert "A(16,)" in str(info.value) and "(16,)" in str(info.value)


def divide(A_dtype="int32"):
    @T.prim_func
    def divide(A: T.Tensor((8,), A_dtype), B: T.Tensor((8,), A_dtype), C: T.Tensor((8,), A_dtype)):
        with T.Kernel(1, threads=8) as bx:
            for i in T.Parallel(8):
                C[i] = A[i] // B[i]

    return divide


def test_integer_division_by_zero_raises():
    cpu, _ = both(divide)
    with pytest.raises(TileRuntimeError, match="division by zero"):
        cpu(np.ones(8, np.int32), np.array([1, 2, 3, 0, 1, 1, 1, 1], np.int32))


def overlap():
    @T.prim_func
    def overlap(A: T.Tensor((32,), "int32"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((32,), "int32")
            T.copy(A, s)
            T.copy(s[0:24], s[8:32])
            T.copy(s, B)

    return overlap


def test_copy_between_overlapping_regions_reads_the_source_first():
    a = np.arange(32, dtype=np.int32)
    cpu, oracle = both(overlap)
    want = np.concatenate([a[:8], a[:24]])
    np.testing.assert_array_equal(oracle(a), want)
    np.testing.assert_array_equal(cpu(a), want)


def guards():
    n = T.dynamic("n")

    @T.prim_func
    def guards(A: T.Tensor((n,), "int32"), C: T.Tensor((n, 3), "int32")):
        with T.Kernel(T.ceildiv(n, 16), threads=16) as bx:
            for i in T.Parallel(16):
                idx = bx * 16 + i
                if idx < n and idx >= 3 and bx != 1 and n - 2 > idx:
                    C[idx, 0] = A[idx] + 1
            for i in T.serial(16):
                if 2 < bx * 16 + i and bx * 16 + i <= n - 1:
                    C[bx * 16 + i, 1] = A[bx * 16 + i] * 2
            for i in T.Parallel(16):
                if bx * 16 + i < n:  # (`and` evaluates both sides, so the load needs its own if)
                    if A[bx * 16 + i] > 0:
                        C[bx * 16 + i, 2] = 7

    return guards


@settings(max_examples=20)
@given(st.lists(st.integers(-5, 5), min_size=1, max_size=70))
def test_loops_guarded_by_linear_conditions_visit_exactly_the_guarded_iterations(xs):
    a = np.array(xs, np.int32)
    cpu, oracle = both(guards)
    same_bits(cpu(a), oracle(a))
    src = cpu.get_kernel_source()
    assert "min(" in src and "max(" in src  # the first two loops were narrowed, not masked


def gemm_rows():
    @T.prim_func
    def gemm_rows(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32"),
                  K: T.Tensor((1,), "int32"), C: T.Tensor((8, 16), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a_s = T.alloc_shared((16, 16), "float32")
            b_s = T.alloc_shared((16, 16), "float32")
            c_l = T.alloc_fragment((8, 16), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.clear(c_l)
            for k in T.serial(K[0]):
                T.gemm(a_s[k * 8:(k + 1) * 8, :], b_s, c_l)
            T.copy(c_l, C[0, 0])

    return gemm_rows


def test_gemm_on_a_region_outside_its_buffer_raises():
    a = np.arange(256, dtype=np.float32).reshape(16, 16) % 7
    b = np.eye(16, dtype=np.float32)
    cpu, oracle = both(gemm_rows)
    k = np.array([2], np.int32)
    same_bits(cpu(a, b, k), oracle(a, b, k))
    np.testing.assert_array_equal(cpu(a, b, k), a[:8] + a[8:])
    for kernel in (cpu, oracle):
        with pytest.raises(TileRuntimeError, match="outside shared buffer a_s"):
            kernel(a, b, np.array([3], np.int32))


# ------------------------------------------------------------------ tables against tilecore.semantics
# The generated code's scalar pieces (casts, rounding helpers, C division, float -> int) are
# evaluated directly, without compiling a kernel, and compared with the one definition.

_SAMPLES = {
    "int": [0, 1, -3, 7, 127, -128, 255, 300, 40000, -(2**31), 2**31 - 1, 2**31 + 5, 2**53 + 1],
    "float": [0.0, 1.5, -2.75, 255.9, -129.5, 3.0e9, 1e30, float("nan"), float("inf"), 65519.0,
              # just past a tie of float16 / bfloat16 / e4m3 / e5m2: one rounding goes up, two go down
              1.0 + 2.0**-11 + 2.0**-30, 1.0 + 2.0**-8 + 2.0**-30, 1.0 + 2.0**-4 + 2.0**-30,
              1.0 + 2.0**-3 + 2.0**-30],
}


def _values(d):
    vals = _SAMPLES["int"] if d.is_int else [True, False] if d.is_bool else _SAMPLES["float"]
    out = []
    for v in vals:
        if d.is_int:
            v = S.wrap_int(v, d)
        elif d.is_float:
            v = S.round_to(np.float64(v), d)
        out.append(v)
    return out


class _NumbaNumPy:
    """`np` as numba-compiled code sees it: integer constructors wrap (C conversion) where
    NumPy's raise on out-of-range Python ints."""

    def __getattr__(self, name):
        f = getattr(np, name)
        if isinstance(f, type) and issubclass(f, np.integer):
            return lambda v: np.asarray(v).astype(np.int64).astype(f)[()]
        return f


def _cpu_cast(x, src, dst):
    code = cpu_exprs.convert("x", src, dst)
    env = {"np": _NumbaNumPy(), "x": S.compute_np(src).type(x),
           **{n: getattr(runtime, n) for n in dir(runtime) if n.startswith(("rnd_", "f2i", "odd_"))}}
    return eval(code, env)  # noqa: S307 - the backend's own generated expression


_PAIRS = [(a, b) for a in dt.ALL for b in dt.ALL if a != b]


@pytest.mark.parametrize("src, dst", [pytest.param(a, b, id=f"{a}->{b}") for a, b in _PAIRS])
def test_cpu_casts_match_semantics(src, dst):
    """Including float64 -> bfloat16 / float8 just past a tie (one rounding, not two)."""
    for x in _values(src):
        got = _cpu_cast(x, src, dst)
        want = S.cast_value(x, src, dst)
        assert np.asarray(got).tolist() == np.asarray(want).tolist() or (
            np.isnan(np.float64(got)) and np.isnan(np.float64(want))), (x, got, want)


@pytest.mark.parametrize("d", [d for d in dt.ALL if d.is_narrow_float], ids=str)
def test_cpu_rounding_helpers_match_semantics(d):
    rnd = getattr(runtime, f"rnd_{d.name}")
    rng = np.random.default_rng(3)
    xs = (rng.standard_normal(300) * np.exp2(rng.integers(-30, 20, 300))).astype(np.float32)
    xs[:4] = [1e6, -1e6, np.inf, np.nan]
    for x in xs:
        got, want = np.float32(rnd(x)), S.round_to(x, d)
        assert got == want or (np.isnan(got) and np.isnan(want)), (x, got, want)


def test_cpu_c_division_and_float_to_int_match_semantics():
    err = np.zeros(5, dtype=np.int64)
    for a in (-7, 7, -(2**40), 13):
        for b in (2, -2, 3, -5):
            assert runtime.cdiv(np.int64(a), np.int64(b), err, 1) == S.c_div(a, b)
            assert runtime.cmod(np.int64(a), np.int64(b), err, 1) == S.c_mod(a, b)
    for x in _SAMPLES["float"]:
        assert runtime.f2i(x) == S.cast_value(x, dt.float64, dt.int64)


def test_cpu_math_table_is_semantics_table():
    for name, spelling in cpu_exprs._UNARY_NP.items():
        assert eval(spelling, {"np": np}) is S.UNARY_FUNCS[name]  # noqa: S307


def int32_overflow_program():
    @T.prim_func
    def ovf(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32"), C: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                C[i] = (A[i] * B[i]) // 4

    return ovf


def test_cpu_int32_intermediate_overflow_wraps_like_c():
    """(A * B) // 4 with A * B past 2**31: the product wraps to int32 before the division."""
    cpu, interp = both(int32_overflow_program)
    a = np.full(8, 2**20 + 3, np.int32)
    b = np.full(8, 2**12 + 1, np.int32)
    same_bits(cpu(a, b), interp(a, b))


def int32_wrap_seen_program():
    """Where a wrapped int32 value is seen whole: a comparison, min, abs and a cast to float64."""
    @T.prim_func
    def seen(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32"), C: T.Tensor((8,), "int32"),
             D: T.Tensor((8,), "float64")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                C[i] = T.if_then_else(A[i] * B[i] < 0, T.min(A[i] + B[i], 7), T.abs(A[i] - B[i]))
                D[i] = T.cast(A[i] * B[i] + A[i], "float64")

    return seen


def test_cpu_int32_wraps_where_the_whole_value_is_seen():
    cpu, interp = both(int32_wrap_seen_program, out_idx=(-2, -1))
    a = np.array([2**20 + 3, 2**30, -(2**31), 5, 2**31 - 1, -7, 46341, 0], np.int32)
    b = np.array([2**12 + 1, 4, -1, -3, 1, 2**31 - 1, 46341, -(2**31)], np.int32)
    for got, want in zip(cpu(a, b), interp(a, b)):
        same_bits(got, want)


def test_cpu_index_arithmetic_stays_unwrapped(monkeypatch):
    """Proven-in-range index arithmetic is not wrapped (a wrap in an index blocks vectorization):
    the elementwise kernel's block body is what it was before ints wrapped like C."""
    import importlib

    monkeypatch.setenv("TILECORE_COMPILE_CACHE", "0")  # generate the source, do not load it

    from tilecore_cpu import artifact

    mod = importlib.import_module("elementwise_add")
    sources = []

    def capture(src):
        sources.append(src)
        raise RuntimeError("captured")

    orig, artifact.load = artifact.load, capture
    try:
        with pytest.raises(RuntimeError, match="captured"):
            tilecore.compile(mod.program(), out_idx=mod.OUT_IDX, target="cpu")
    finally:
        artifact.load = orig
    block = sources[0].split("def block(")[1].split("@njit")[0]
    assert "for i in range" in block and "np.int32(" not in block
