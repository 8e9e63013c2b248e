"""The oracle's defined semantics: rounding, C integer arithmetic, poisoning, partial tiles,
block-order independence, dynamic shapes, reductions, atomics."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.errors import TileRuntimeError


def run(func, *args, out_idx=(-1,)):
    return tilecore.jit(func, out_idx=list(out_idx), target="interp")(*args)


def binop_kernel(op, dtype, n=64):
    @T.prim_func
    def k(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(n):
                if op == "add":
                    C[i] = A[i] + B[i]
                elif op == "mul":
                    C[i] = A[i] * B[i]
                elif op == "div":
                    C[i] = A[i] / B[i]
                else:
                    C[i] = A[i] % B[i]

    return k


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["add", "mul", "div"])
def test_narrow_float_ops_round_once_per_op(dtype, op):
    rng = np.random.default_rng(0)
    npd = np.dtype(getattr(ml_dtypes, dtype)) if dtype == "bfloat16" else np.dtype(dtype)
    a = rng.standard_normal(64).astype(npd)
    b = (rng.standard_normal(64) + 3).astype(npd)
    c = run(binop_kernel(op, dtype), a, b)
    f = {"add": np.add, "mul": np.multiply, "div": np.divide}[op]
    expect = f(a.astype(np.float32), b.astype(np.float32)).astype(npd)
    np.testing.assert_array_equal(c.view(np.uint16), expect.view(np.uint16))


@given(st.lists(st.tuples(st.integers(-1000, 1000), st.integers(-50, 50).filter(bool)),
                min_size=64, max_size=64))
@settings(max_examples=25, deadline=None)
def test_int_division_and_remainder_are_c_style(pairs):
    a = np.array([p[0] for p in pairs], np.int32)
    b = np.array([p[1] for p in pairs], np.int32)
    q = run(binop_kernel("div", "int32"), a, b)
    r = run(binop_kernel("mod", "int32"), a, b)
    expect_q = np.trunc(a / b).astype(np.int32)
    np.testing.assert_array_equal(q, expect_q)
    np.testing.assert_array_equal(r, a - expect_q * b)


def test_uninitialized_fragment_is_nan(monkeypatch):
    monkeypatch.setenv("TILECORE_CHECK_UNINIT", "0")  # the poison itself is under test
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((16,), "float32")
            T.copy(f, A)

    out = run(k)
    assert np.isnan(out).all()


def test_forgotten_clear_poisons_gemm(monkeypatch):
    monkeypatch.setenv("TILECORE_CHECK_UNINIT", "0")  # the poison itself is under test
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_shared((16, 16), "float16")
            c = T.alloc_fragment((16, 16), "float32")
            T.copy(A, a)
            T.gemm(a, a, c)
            T.copy(c, C)

    assert np.isnan(run(k, np.ones((16, 16), np.float16))).all()


def test_partial_tiles_read_zero_and_drop_writes():
    @T.prim_func
    def k(A: T.Tensor((10, 10), "float32"), B: T.Tensor((10, 10), "float32")):
        with T.Kernel(2, 2, threads=32) as (bx, by):
            s = T.alloc_shared((8, 8), "float32")
            T.copy(A[by * 8, bx * 8], s)
            for i, j in T.Parallel(8, 8):
                s[i, j] = s[i, j] + 1.0
            T.copy(s, B[by * 8, bx * 8])

    a = np.arange(100, dtype=np.float32).reshape(10, 10)
    np.testing.assert_array_equal(run(k, a), a + 1)


def test_block_order_shuffle_does_not_change_independent_results():
    import gemm
    from tilecore_interp.runner import options

    func = gemm.program(M=64, N=64, K=32, block_M=16, block_N=16, block_K=16)
    k = tilecore.jit(func, out_idx=[-1], target="interp")
    a, b = gemm.make_inputs(np.random.default_rng(0), M=64, N=64, K=32)
    base = k(a, b)
    for seed in (1, 2):
        with options(seed=seed):
            np.testing.assert_array_equal(k(a, b), base)


def test_block_order_shuffle_exposes_order_dependent_program():
    from tilecore_interp.runner import options

    @T.prim_func
    def k(A: T.Tensor((1,), "int32")):
        with T.Kernel(8, threads=32) as bx:
            A[0] = bx  # last block wins: order dependent

    kernel = tilecore.jit(k, target="interp")
    results = set()
    for seed in range(6):
        a = np.zeros(1, np.int32)
        with options(seed=seed):
            kernel(a)
        results.add(int(a[0]))
    assert len(results) > 1


def test_dynamic_shapes_bind_at_call():
    import elementwise_add

    k = tilecore.jit(elementwise_add.program(block=64), out_idx=[-1], target="interp")
    for n in (1, 63, 64, 65, 1000):
        a = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(k(a, a), 2 * a)


@pytest.mark.parametrize("kind", ["sum", "max", "min", "abssum", "absmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_reductions_exact_on_integers(kind, dim):
    @T.prim_func
    def k(A: T.Tensor((8, 16), "float32"), R: T.Tensor((16 if dim == 0 else 8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((8, 16), "float32")
            r = T.alloc_fragment((16 if dim == 0 else 8,), "float32")
            T.copy(A, f)
            if kind == "sum":
                T.reduce_sum(f, r, dim=dim)
            elif kind == "max":
                T.reduce_max(f, r, dim=dim)
            elif kind == "min":
                T.reduce_min(f, r, dim=dim)
            elif kind == "abssum":
                T.reduce_abssum(f, r, dim=dim)
            else:
                T.reduce_absmax(f, r, dim=dim)
            T.copy(r, R)

    a = np.random.default_rng(0).integers(-20, 20, (8, 16)).astype(np.float32)
    ref = {"sum": a.sum(dim), "max": a.max(dim), "min": a.min(dim), "abssum": np.abs(a).sum(dim),
           "absmax": np.abs(a).max(dim)}[kind]
    np.testing.assert_array_equal(run(k, a), ref)


def test_cumsum_and_atomic_add():
    @T.prim_func
    def k(A: T.Tensor((4, 32), "int32"), S: T.Tensor((32,), "int32"), C: T.Tensor((4, 32), "int32")):
        with T.Kernel(4, threads=32) as bx:
            f = T.alloc_shared((32,), "int32")
            T.copy(A[bx, 0], f)
            T.cumsum(f, dim=0)
            T.copy(f, C[bx, 0])
            for i in T.Parallel(32):
                T.atomic_add(S[i], A[bx, i])

    a = np.random.default_rng(0).integers(-9, 9, (4, 32)).astype(np.int32)
    s = np.zeros(32, np.int32)
    c = tilecore.jit(k, out_idx=[2], target="interp")(a, s)
    np.testing.assert_array_equal(c, np.cumsum(a, axis=1))
    np.testing.assert_array_equal(s, a.sum(0))


def test_alloc_var_and_serial_loop():
    @T.prim_func
    def k(A: T.Tensor((16,), "int32"), B: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            acc = T.alloc_var("int32")
            acc = 0
            for i in T.serial(16):
                if A[i] > 0:
                    acc = acc + A[i]
            B[0] = acc

    a = np.arange(-8, 8, dtype=np.int32)
    assert run(k, a)[0] == a[a > 0].sum()


def test_if_then_else_only_evaluates_taken_side():
    @T.prim_func
    def k(A: T.Tensor((10,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(16):
                B[i] = T.if_then_else(i < 10, A[T.min(i, 15)], -1.0)

    a = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(run(k, a), np.r_[a, -np.ones(6, np.float32)])


def test_out_of_bounds_shared_tile_raises():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), off: T.int32):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((8,), "float32")
            for i in T.Parallel(16):
                s[i + off] = 1.0  # a run-time offset: a constant one fails to compile

    with pytest.raises(TileRuntimeError):
        run(k, np.zeros(16, np.float32), 0, out_idx=())


def test_torch_cpu_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    import gemm

    k = tilecore.jit(gemm.program(M=32, N=32, K=32, block_M=16, block_N=16, block_K=16),
                     out_idx=[-1], target="interp")
    a = torch.randn(32, 32, dtype=torch.float16)
    b = torch.randn(32, 32, dtype=torch.float16)
    c = k(a, b)
    assert isinstance(c, torch.Tensor) and c.dtype == torch.float16
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), rtol=1e-2, atol=1e-2)


def test_macro_inlines():
    @T.macro
    def scale_into(dst, src, factor):
        for i in T.Parallel(16):
            dst[i] = src[i] * factor

    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            scale_into(B, A, 3.0)

    a = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(run(k, a), a * 3)


def test_poison_modes_differ_for_ints_and_bools(monkeypatch):
    monkeypatch.setenv("TILECORE_CHECK_UNINIT", "0")  # the poison itself is under test
    from tilecore_interp.runner import options

    @T.prim_func
    def k(A: T.Tensor((4,), "int32"), B: T.Tensor((4,), "bool")):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((4,), "int32")
            g = T.alloc_fragment((4,), "bool")
            T.copy(f, A)
            T.copy(g, B)

    kernel = tilecore.jit(k, out_idx=[0, 1], target="interp")
    a1, b1 = kernel()
    with options(poison="garbage"):
        a2, b2 = kernel()
    assert (a1 != a2).all() and (b1 != b2).all()
