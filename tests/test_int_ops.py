"""T.floordiv / T.floormod (floor semantics) and the bit operations: the one definition in
tilecore.semantics against NumPy (Hypothesis), kernels on interp and the toy thread lowering,
and the C renderer's spelling compiled by gcc against the semantics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from optional_backends import needs_interp  # noqa: E402
from test_cstyle_semantics import _run_c, needs_cc

import tilecore
import tilecore.language as T
from tilecore import dtypes as dt
from tilecore import semantics as S
from tilecore.codegen.cstyle import C_TYPES, CStyleRenderer
from tilecore.errors import TileRuntimeError, TileTypeError
from tilecore.ir.expr import Var, binop, bitnot

INTS = [d for d in dt.ALL if d.is_int]


def _vals(d: dt.DType, n: int):
    return st.lists(st.integers(dt.min_value(d), dt.max_value(d)), min_size=n, max_size=n)


@pytest.mark.parametrize("d", INTS, ids=str)
@given(data=st.data())
def test_floor_division_is_numpys(d, data):
    a = np.array(data.draw(_vals(d, 8)), dtype=d.np)
    b = np.array(data.draw(_vals(d, 8)), dtype=d.np)
    b[b == 0] = 1
    if d.kind == "int":  # INT_MIN // -1 overflows in NumPy's own dtype; the semantics wrap
        b[(a == dt.min_value(d)) & (b == -1)] = 1
    q = S.wrap_int(S.int_binop("floordiv", a.astype(np.int64), b.astype(np.int64), d), d)
    r = S.wrap_int(S.int_binop("floormod", a.astype(np.int64), b.astype(np.int64), d), d)
    np.testing.assert_array_equal(q, np.floor_divide(a, b))
    np.testing.assert_array_equal(r, np.mod(a, b))
    for x, y in zip(a.tolist(), b.tolist()):  # the scalar path agrees with the array path
        assert S.floor_div(x, y) * y + S.floor_mod(x, y) == x


@pytest.mark.parametrize("d", INTS, ids=str)
@given(data=st.data())
def test_bit_operations_are_numpys(d, data):
    """Stored back to `d` (what a kernel keeps), every bit operation is NumPy's on `d`."""
    a = np.array(data.draw(_vals(d, 8)), dtype=d.np)
    b = np.array(data.draw(_vals(d, 8)), dtype=d.np)
    s = np.array(data.draw(st.lists(st.integers(0, d.bits - 1), min_size=8, max_size=8)), dtype=d.np)
    a64, b64, s64 = a.astype(np.int64), b.astype(np.int64), s.astype(np.int64)

    def sem(op, x, y):
        return S.wrap_int(S.int_binop(op, x, y, d), d)

    np.testing.assert_array_equal(sem("bitand", a64, b64), a & b)
    np.testing.assert_array_equal(sem("bitor", a64, b64), a | b)
    np.testing.assert_array_equal(sem("bitxor", a64, b64), a ^ b)
    np.testing.assert_array_equal(S.wrap_int(S.int_unary("bitnot", a64, d), d), ~a)
    np.testing.assert_array_equal(sem("shl", a64, s64), a << s)
    np.testing.assert_array_equal(sem("shr", a64, s64), a >> s)  # arithmetic iff signed


@needs_interp
def test_shift_counts_outside_the_width_are_errors():
    assert S.int_binop("shl", 1, 31, dt.int32) == -(2**31)
    assert S.int_binop("shl", 1, 20, dt.int8) == 1 << 20  # int8 computes as C's int
    for bad in (-1, 32):
        with pytest.raises(S.ShiftCountError):
            S.int_binop("shl", 1, bad, dt.int32)
    with pytest.raises(S.ShiftCountError):
        S.int_binop("shr", np.arange(4), np.array([0, 1, 64, 2]), dt.int64)


def _bits_kernel(dtype: str):
    @T.prim_func
    def bits(A: T.Tensor((64,), dtype), B: T.Tensor((64,), dtype), S_: T.Tensor((64,), dtype),
             C: T.Tensor((8, 64), dtype)):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(32):
                k = bx * 32 + i
                C[0, k] = T.floordiv(A[k], B[k])
                C[1, k] = T.floormod(A[k], B[k])
                C[2, k] = A[k] << S_[k]
                C[3, k] = A[k] >> S_[k]
                C[4, k] = (A[k] & B[k]) | (A[k] ^ 0x5A)
                C[5, k] = ~A[k]
                C[6, k] = T.shift_left(T.bitwise_and(A[k], 15), 2) + T.bitwise_not(B[k])
                C[7, k] = T.bitwise_xor(T.shift_right(A[k], 1), T.bitwise_or(B[k], 1))
    return bits


def _bits_reference(a, b, s):
    return np.stack([np.floor_divide(a, b), np.mod(a, b), a << s, a >> s, (a & b) | (a ^ 0x5A), ~a,
                     ((a & 15) << 2) + ~b, (a >> 1) ^ (b | 1)]).astype(a.dtype)


def _bits_inputs(dtype, seed=0):
    d = dt.as_dtype(dtype)
    rng = np.random.default_rng(seed)
    lo, hi = max(dt.min_value(d), -(2**20)), min(dt.max_value(d), 2**20)
    a = rng.integers(lo, hi, 64).astype(d.np)
    b = rng.integers(lo, hi, 64).astype(d.np)
    b[b == 0] = 3
    s = rng.integers(0, d.bits, 64).astype(d.np)
    return a, b, s


@pytest.mark.parametrize("target", [pytest.param("interp", marks=needs_interp), "toy:w4"])
@pytest.mark.parametrize("dtype", ["int32", "int8", "uint32", "int64"])
def test_kernels_compute_the_semantics(target, dtype):
    a, b, s = _bits_inputs(dtype)
    out = tilecore.jit(_bits_kernel(dtype), out_idx=[-1], target=target)(a, b, s)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, _bits_reference(a, b, s))


@needs_interp
def test_python_ints_fold_at_the_literal_width():
    @T.prim_func
    def k(C: T.Tensor((5,), "int32")):
        with T.Kernel(1, threads=32) as _:
            C[0] = T.floordiv(-7, 2)
            C[1] = T.floormod(-7, 2)
            C[2] = 1 << 31
            C[3] = -16 >> 2
            C[4] = ~5 ^ 3
    out = tilecore.jit(k, out_idx=[-1], target="interp")()
    assert out.tolist() == [-4, 1, -(2**31), -4, ~5 ^ 3]


@needs_interp
def test_floats_floor_divide_but_take_no_bit_operations():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32"), C: T.Tensor((2, 4), "float32")):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(4):
                C[0, i] = T.floordiv(A[i], 2.0)
                C[1, i] = T.floormod(A[i], -1.5)
    a = np.array([-7.0, 7.5, -0.5, 3.0], np.float32)
    out = tilecore.jit(k, out_idx=[-1], target="interp")(a)
    np.testing.assert_array_equal(out[0], np.floor(a / np.float32(2)))
    np.testing.assert_allclose(out[1], np.mod(a, np.float32(-1.5)), rtol=0, atol=1e-6)
    with pytest.raises(TileTypeError, match="integer"):
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as _:
                for i in T.Parallel(4):
                    A[i] = A[i] << 1


@needs_interp
def test_an_out_of_range_shift_count_is_a_runtime_error_on_interp():
    f = tilecore.jit(_bits_kernel("int32"), out_idx=[-1], target="interp")
    a, b, s = _bits_inputs("int32")
    s[5] = 32
    with pytest.raises(TileRuntimeError, match="shift count 32"):
        f(a, b, s)


@needs_cc
@pytest.mark.parametrize("d", INTS, ids=str)
def test_rendered_int_ops_are_the_semantics(d):
    """gcc (-fwrapv) computes what the semantics compute for each new op on edge values."""
    r = CStyleRenderer()
    a, b = Var("opnd_a", d), Var("opnd_b", d)
    keep = [a, b]
    pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (-8, 4), (100, 27), (-128, 3), (2**31 - 1, 5),
             (-(2**31), 7), (-1, 3)]
    decls, exprs, want = [], [], []
    width = S.int_compute_dtype(d).bits
    for k, (x, y) in enumerate(pairs):
        x, y = S.wrap_int(x, d), S.wrap_int(y, d)
        if y == 0:
            continue
        decls.append(f"{C_TYPES[d.name]} a{k} = {x}; {C_TYPES[d.name]} b{k} = {y};")
        cases = [binop(op, a, b) for op in ("floordiv", "floormod", "bitand", "bitor", "bitxor")]
        cases.append(bitnot(a))
        if 0 <= y < width:
            cases += [binop("shl", a, b), binop("shr", a, b)]
        for e in cases:
            keep.append(e)
            text = r.expr(e).replace(r.name_of(a), f"a{k}").replace(r.name_of(b), f"b{k}")
            exprs.append((C_TYPES[d.name], f"({C_TYPES[d.name]})({text})"))
            op = e.op
            v = S.int_unary(op, x, d) if op == "bitnot" else S.int_binop(op, x, y, d)
            want.append(S.wrap_int(v, d))
    got = [int(v) for v in _run_c(decls, exprs, prelude=tuple(r.prelude()))]
    assert got == want
