"""Eager-style `@tilecore.jit` (the kernel body in the jitted function): binding T.const from
shapes, one compile per binding, outputs from `return`, and the located mistakes."""

import numpy as np
import pytest
from optional_backends import needs_interp, target_params  # noqa: E402

import tilecore
import tilecore.language as T
from tilecore.errors import TileBindingError, TileCallError, TileError, TileSyntaxError

HERE = __file__


def _scale_add(target):
    @tilecore.jit(target=target)
    def scale_add(X, Y, alpha=2.0, block_M=16, block_N=16):
        """Out = alpha * X + Y and Neg = -X, two outputs."""
        M, N = T.const("M, N")
        X: T.Tensor((M, N), "float32")
        Y: T.Tensor[(M, N), T.float32]  # TileLang's subscript spelling
        Neg = T.empty((M, N), "float32")
        Out = T.empty((M, N), "float32")
        grid_m = T.ceildiv(M, block_M)  # a top-level alias of a compile-time value
        with T.Kernel(T.ceildiv(N, block_N), grid_m, threads=32) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                r = by * block_M + i
                c = bx * block_N + j
                if r < M and c < N:
                    Out[r, c] = alpha * X[r, c] + Y[r, c]
                    Neg[r, c] = -X[r, c]
        return Out, Neg

    return scale_add


@pytest.mark.parametrize("target", [pytest.param("interp", marks=needs_interp), "toy:w4"])
def test_call_binds_shapes_and_caches_per_binding(target):
    f = _scale_add(target)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((40, 24), dtype=np.float32), rng.standard_normal((40, 24), dtype=np.float32)
    out, neg = f(x, y)
    np.testing.assert_array_equal(out, np.float32(2.0) * x + y)
    np.testing.assert_array_equal(neg, -x)
    f(x + 1, y)
    assert len(f._cache) == 1  # same shapes and config: compiled once
    out3, _ = f(x[:8], y[:8], alpha=3.0)
    np.testing.assert_array_equal(out3, np.float32(3.0) * x[:8] + y[:8])
    assert len(f._cache) == 2


@needs_interp
def test_torch_tensors_bind_and_come_back_as_torch():
    torch = pytest.importorskip("torch")  # torch is optional for the core
    f = _scale_add("interp")
    x, y = torch.randn(20, 33), torch.randn(20, 33)
    out, neg = f(x, y)
    assert isinstance(out, torch.Tensor) and out.shape == (20, 33)
    torch.testing.assert_close(out, 2.0 * x + y, rtol=0, atol=0)
    torch.testing.assert_close(neg, -x, rtol=0, atol=0)


@needs_interp
def test_compile_prim_func_and_source():
    f = _scale_add("interp")
    k = f.compile(M=32, N=16)
    assert isinstance(k, tilecore.Kernel)
    assert [p.name for p in k.func.params] == ["X", "Y", "Out", "Neg"]  # outputs in return order
    assert [p.shape for p in k.func.params] == [(32, 16)] * 4
    assert k.out_idx == [2, 3]
    x = np.ones((32, 16), np.float32)
    out, neg = k(x, x)
    np.testing.assert_array_equal(out, np.full((32, 16), 3, np.float32))
    assert f.compile(M=32, N=16) is k  # the cache is shared by calls and compile()
    assert "def scale_add" in f.get_kernel_source(M=32, N=16)
    assert f.get_tir(M=8, N=8).params[0].shape == (8, 8)


@needs_interp
def test_factory_style_is_still_a_factory():
    @tilecore.jit(out_idx=[-1], target="interp")
    def factory(n):
        @T.prim_func
        def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=32) as _:
                for i in T.Parallel(n):
                    B[i] = A[i] * 2
        return k

    assert isinstance(factory(8), tilecore.Kernel)
    np.testing.assert_array_equal(factory(8)(np.ones(8, np.float32)), np.full(8, 2, np.float32))


def _located(exc, match):
    """The error names this test file and a line in it."""
    assert HERE in str(exc.value) or (exc.value.loc is not None and exc.value.loc.file == HERE), exc.value
    assert match in str(exc.value), exc.value


@needs_interp
def test_shape_disagreement_is_located():
    f = _scale_add("interp")
    with pytest.raises(TileCallError) as e:
        f(np.zeros((4, 4), np.float32), np.zeros((4, 5), np.float32))
    _located(e, "T.const N is 4 from X.shape[1] but 5 from Y.shape[1]")


@needs_interp
def test_argument_count_and_kind_are_located():
    f = _scale_add("interp")
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(TileCallError) as e:
        f(x)
    _located(e, "missing argument 'Y'")
    with pytest.raises(TileCallError) as e:
        f(x, x, 1.0, 16, 16, 99)
    _located(e, "too many positional arguments")
    with pytest.raises(TileCallError) as e:
        f(x, 3.0)
    _located(e, "Y is declared as a tensor")
    with pytest.raises(TileCallError) as e:
        f(x, x, M=4)
    _located(e, "unexpected keyword 'M'")
    with pytest.raises(TileCallError) as e:
        f(x.astype(np.float64), x)
    _located(e, "dtype")


@needs_interp
def test_unbound_constant_needs_compile_keyword():
    @tilecore.jit(target="interp")
    def fill(A):
        n, m = T.const("n m")
        A: T.Tensor((n,), "float32")
        B = T.empty((m,), "float32")
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(m):
                B[i] = A[0]
        return B

    with pytest.raises(TileCallError) as e:
        fill(np.ones(4, np.float32))
    _located(e, "T.const m is not bound")
    assert fill.compile(n=4, m=6)(np.full(4, 7, np.float32)).tolist() == [7.0] * 6


@needs_interp
def test_body_mistakes_are_located():
    @tilecore.jit(target="interp")
    def unreturned(A):
        n = T.const("n")
        A: T.Tensor((n,), "float32")
        B = T.empty((n,), "float32")  # noqa: F841 - the mistake under test
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(n):
                A[i] = A[i] + 1

    with pytest.raises(TileBindingError, match="'B' is not returned") as e:
        unreturned(np.ones(4, np.float32))
    assert e.value.loc.file == HERE

    @tilecore.jit(target="interp")
    def early_use(A):
        n = T.const("n")
        m = A.shape[0]  # noqa: F841 - the mistake under test
        A: T.Tensor((n,), "float32")
        with T.Kernel(1, threads=32) as _:
            pass

    with pytest.raises(TileBindingError, match="used before it is declared") as e:
        early_use(np.ones(4, np.float32))
    assert e.value.loc.file == HERE


def test_out_idx_on_an_eager_kernel_is_an_error():
    def k(A):
        n = T.const("n")
        A: T.Tensor((n,), "float32")
        with T.Kernel(1, threads=32) as _:
            pass

    with pytest.raises(TileError, match="eager kernel"):
        tilecore.jit(k, out_idx=[-1])


@needs_interp
def test_const_outside_an_eager_body_is_a_syntax_error():
    with pytest.raises(TileSyntaxError, match="T.const is only valid"):
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as _:
                n = T.const("n")  # noqa: F841 - the mistake under test


@pytest.mark.parametrize("target", [pytest.param("interp", marks=needs_interp), "toy:w4",
                                    *target_params("cpu")])
def test_integer_annotated_parameters_are_run_time_scalars(target):
    @tilecore.jit(target=target)
    def head(A, limit: T.int32, block=32):
        """Out[i] = A[i] for i < limit (the grid covers only `limit`), 0 elsewhere."""
        n = T.const("n")
        A: T.Tensor((n,), "float32")
        Out = T.empty((n,), "float32")
        with T.Kernel(T.ceildiv(limit, block), threads=32) as bx:
            for i in T.Parallel(block):
                k = bx * block + i
                if k < limit:
                    Out[k] = A[k]
        return Out

    a = np.arange(1, 101, dtype=np.float32)
    for limit in (100, 37, 1):
        want = np.where(np.arange(100) < limit, a, 0).astype(np.float32)
        np.testing.assert_array_equal(head(a, limit), want)
    assert len(head._cache) == 1  # a run-time scalar is not part of the cache key
    with pytest.raises(TileCallError) as e:
        head(a, 2.5)
    _located(e, "a scalar")


@needs_interp
def test_tensor_subscript_spelling_in_a_prim_func_signature():
    @T.prim_func
    def k(A: T.Tensor[(4,), T.float16], B: T.Tensor[[4], T.float32]):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(4):
                B[i] = A[i] * 2

    assert k.params[1].shape == (4,) and str(k.params[1].dtype) == "float32"
    out = tilecore.jit(k, out_idx=[-1], target="interp")(np.arange(4, dtype=np.float16))
    assert out.tolist() == [0.0, 2.0, 4.0, 6.0]
    assert T.Tensor[8] == T.Tensor((8,), "float32")


@needs_interp
def test_compile_time_python_below_the_declarations_and_a_macro_in_the_body():
    import math

    @tilecore.jit(target="interp")
    def scaled(A, with_neg=False, block=16):
        """Out = A / sqrt(n) (+ Neg = -Out): a macro defined in the body reads n and block."""
        n = T.const("n")
        A: T.Tensor((n,), "float32")
        Out = T.empty((n,), "float32")
        if with_neg:
            Neg = T.empty((n,), "float32")
        inv = 1.0 / math.sqrt(n)  # Python on a constant: read by the build only, where n is an int

        @T.macro
        def tile(dst, bx, sign):
            for i in T.Parallel(block):
                if bx * block + i < n:
                    dst[bx * block + i] = A[bx * block + i] * (sign * inv)

        with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
            tile(Out, bx, 1.0)
            if with_neg:
                tile(Neg, bx, -1.0)
        if with_neg:  # decided when the kernel is built
            return Out, Neg
        else:
            return Out

    a = np.arange(40, dtype=np.float32)
    np.testing.assert_allclose(scaled(a), a / np.float32(math.sqrt(40)), rtol=1e-6)
    out, neg = scaled(a, with_neg=True)
    np.testing.assert_array_equal(neg, -out)


@needs_interp
def test_python_only_lines_above_a_declaration_and_plain_defs_are_located():
    import math

    @tilecore.jit(target="interp")
    def early(A, B):
        n = T.const("n")
        A: T.Tensor((n,), "float32")
        inv = 1.0 / math.sqrt(n)  # noqa: F841 - the mistake under test: above B's declaration
        B: T.Tensor((n,), "float32")
        with T.Kernel(1, threads=32) as _:
            pass

    with pytest.raises(TileSyntaxError) as e:
        early(np.ones(4, np.float32), np.ones(4, np.float32))
    _located(e, "sqrt")
    assert "move it below the last declaration" in str(e.value)

    @tilecore.jit(target="interp")
    def plain_def(A):
        n = T.const("n")
        A: T.Tensor((n,), "float32")

        def helper(x):  # the mistake under test: not a @T.macro
            return x

        with T.Kernel(1, threads=32) as _:
            pass

    with pytest.raises(TileSyntaxError) as e:
        plain_def(np.ones(4, np.float32))
    _located(e, "'helper' in an eager kernel body is not a @T.macro")

    @tilecore.jit(target="interp")
    def ceiling(A, block=16):
        n = T.const("n")
        A: T.Tensor((n,), "float32")
        tiles = -(-n // block)  # the mistake under test: C rounding makes this a floor
        with T.Kernel(tiles, threads=32) as _:
            pass

    with pytest.raises(TileSyntaxError) as e:
        ceiling(np.ones(40, np.float32))
    _located(e, "-40 // 16 rounds toward zero")
    assert "T.ceildiv" in str(e.value)
