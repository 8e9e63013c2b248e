"""The oracle checked against independent references on random programs (Hypothesis).

Random expression trees are rendered as kernel source, parsed by the frontend, run by interp,
and compared exactly with a direct evaluation: Python integers with C division for ints,
float64 NumPy for dyadic float32 values whose results are exactly representable.
"""

import importlib.util
import itertools
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilecore

_counter = itertools.count()


def load_kernel(tmp_path, src: str, name: str):
    path = tmp_path / f"gen_{next(_counter)}.py"
    path.write_text("import tilecore.language as T\n\n" + src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


# ------------------------------------------------------------------ integer expressions

def int_exprs():
    leaf = st.sampled_from(["a", "b", "i"]) | st.integers(-9, 9).map(str)

    def extend(children):
        return st.tuples(st.sampled_from(["+", "-", "*", "//", "%", "min", "max"]), children, children)

    return st.recursive(leaf, extend, max_leaves=8)


def render(e) -> str:
    if isinstance(e, str):
        return e if not e.startswith("-") else f"({e})"
    op, x, y = e
    if op in ("min", "max"):
        return f"T.{op}({render(x)}, {render(y)})"
    if op in ("//", "%"):
        # keep divisors non-zero: |y| + 1
        return f"({render(x)} {op} (T.abs({render(y)}) + 1))"
    return f"({render(x)} {op} {render(y)})"


def c_eval(e, env):
    if isinstance(e, str):
        return env[e] if e in env else int(e)
    op, x, y = e
    a, b = c_eval(x, env), c_eval(y, env)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    d = abs(b) + 1
    q = abs(a) // d * (1 if a >= 0 else -1)
    return q if op == "//" else a - q * d


@given(e=int_exprs(), data=st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_integer_expressions_match_c_semantics(tmp_path, e, data):
    n = 16
    a = np.array(data.draw(st.lists(st.integers(-50, 50), min_size=n, max_size=n)), np.int64)
    b = np.array(data.draw(st.lists(st.integers(-50, 50), min_size=n, max_size=n)), np.int64)
    src = f"""
@T.prim_func
def k(A: T.Tensor(({n},), "int64"), B: T.Tensor(({n},), "int64"), C: T.Tensor(({n},), "int64")):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel({n}):
            a = A[i]
            b = B[i]
            C[i] = {render(e)}
"""
    func = load_kernel(tmp_path, src, "k")
    out = tilecore.jit(func, out_idx=[-1], target="interp")(a, b)
    expect = [c_eval(e, {"a": int(a[i]), "b": int(b[i]), "i": i}) for i in range(n)]
    assert out.tolist() == expect


# ------------------------------------------------------------------ float expressions

def float_exprs():
    leaf = st.sampled_from(["x", "y", "0.5", "2.0", "-1.25"])

    def extend(children):
        return (st.tuples(st.sampled_from(["+", "-", "*", "min", "max"]), children, children)
                | st.tuples(st.sampled_from(["abs", "neg"]), children))

    return st.recursive(leaf, extend, max_leaves=6)


def render_f(e) -> str:
    if isinstance(e, str):
        return e if not e.startswith("-") else f"({e})"
    if len(e) == 2:
        return f"T.abs({render_f(e[1])})" if e[0] == "abs" else f"(-{render_f(e[1])})"
    op, x, y = e
    if op in ("min", "max"):
        return f"T.{op}({render_f(x)}, {render_f(y)})"
    return f"({render_f(x)} {op} {render_f(y)})"


def f_eval(e, env):
    if isinstance(e, str):
        return env.get(e, None) if e in env else float(e)
    if len(e) == 2:
        v = f_eval(e[1], env)
        return abs(v) if e[0] == "abs" else -v
    op, x, y = e
    a, b = f_eval(x, env), f_eval(y, env)
    return {"+": a + b, "-": a - b, "*": a * b, "min": min(a, b), "max": max(a, b)}[op]


@given(e=float_exprs(), data=st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_dyadic_float_expressions_are_exact(tmp_path, e, data):
    n = 8
    vals = st.integers(-64, 64).map(lambda v: v / 8)
    x = np.array(data.draw(st.lists(vals, min_size=n, max_size=n)), np.float32)
    y = np.array(data.draw(st.lists(vals, min_size=n, max_size=n)), np.float32)
    src = f"""
@T.prim_func
def k(X: T.Tensor(({n},), "float32"), Y: T.Tensor(({n},), "float32"), Z: T.Tensor(({n},), "float32")):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel({n}):
            x = X[i]
            y = Y[i]
            Z[i] = {render_f(e)}
"""
    func = load_kernel(tmp_path, src, "k")
    out = tilecore.jit(func, out_idx=[-1], target="interp")(x, y)
    expect = [f_eval(e, {"x": float(x[i]), "y": float(y[i])}) for i in range(n)]
    # every intermediate is a small dyadic number, exactly representable in float32
    assert all(math.isfinite(v) for v in expect)
    assert out.tolist() == [float(np.float32(v)) for v in expect]


@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 40),
       tiles=st.sampled_from([(16, 16, 16), (32, 16, 8), (8, 32, 16)]),
       ta=st.booleans(), tb=st.booleans())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_gemm_partial_tiles_exact_on_small_integers(tmp_path, m, n, k, tiles, ta, tb):
    bm, bn, bk = tiles
    a_shape = (k, m) if ta else (m, k)
    b_shape = (n, k) if tb else (k, n)
    a_tile = (bk, bm) if ta else (bm, bk)
    b_tile = (bn, bk) if tb else (bk, bn)
    a_corner = "k0 * {bk}, by * {bm}" if ta else "by * {bm}, k0 * {bk}"
    b_corner = "bx * {bn}, k0 * {bk}" if tb else "k0 * {bk}, bx * {bn}"
    src = f"""
@T.prim_func
def g(A: T.Tensor({a_shape}, "float16"), B: T.Tensor({b_shape}, "float16"),
      C: T.Tensor(({m}, {n}), "float32")):
    with T.Kernel(T.ceildiv({n}, {bn}), T.ceildiv({m}, {bm}), threads=128) as (bx, by):
        a = T.alloc_shared({a_tile}, "float16")
        b = T.alloc_shared({b_tile}, "float16")
        c = T.alloc_fragment(({bm}, {bn}), "float32")
        T.clear(c)
        for k0 in T.Pipelined(T.ceildiv({k}, {bk}), num_stages=2):
            T.copy(A[{a_corner.format(bm=bm, bk=bk)}], a)
            T.copy(B[{b_corner.format(bn=bn, bk=bk)}], b)
            T.gemm(a, b, c, transpose_A={ta}, transpose_B={tb})
        T.copy(c, C[by * {bm}, bx * {bn}])
"""
    func = load_kernel(tmp_path, src, "g")
    rng = np.random.default_rng(m * 10007 + n * 101 + k)
    A = rng.integers(-4, 5, a_shape).astype(np.float16)
    B = rng.integers(-4, 5, b_shape).astype(np.float16)
    out = tilecore.jit(func, out_idx=[-1], target="interp")(A, B)
    a64 = A.astype(np.float64).T if ta else A.astype(np.float64)
    b64 = B.astype(np.float64).T if tb else B.astype(np.float64)
    np.testing.assert_array_equal(out, (a64 @ b64).astype(np.float32))
