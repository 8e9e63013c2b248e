"""The oracle's unwrapped integer fast path (tilecore/ir/ranges.py): taken only where the
operands' ranges prove it exact, and the C results everywhere (wrap, truncation) unchanged."""

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore import dtypes as dt
from tilecore.errors import TileRuntimeError
from tilecore.ir import ranges
from tilecore.ir.buffer import Buffer
from tilecore.ir.expr import BinOp, Const, Load, Var


def _iv(e, bound=None):
    return ranges.interval(e, bound or {}, {})


def test_intervals_follow_index_arithmetic_and_fall_back_to_the_dtype():
    i, j = Var("i", dt.int32), Var("j", dt.int32)
    bound = {id(i): (0, 63), id(j): (0, 31)}
    m = BinOp("add", BinOp("mul", Const(5, dt.int32), Const(64, dt.int32), dt.int32), i, dt.int32)
    assert _iv(m, bound) == (320, 383)
    assert _iv(BinOp("div", m, Const(7, dt.int32), dt.int32), bound) == (45, 54)
    assert _iv(BinOp("mod", m, Const(7, dt.int32), dt.int32), bound) == (0, 6)
    assert _iv(BinOp("mod", j, Const(64, dt.int32), dt.int32), bound) == (0, 31)
    # unbound int32 variable: its width; a product of two may overflow: no fast path
    x = Var("x", dt.int32)
    big = BinOp("mul", x, x, dt.int32)
    assert _iv(x) == (-(2**31), 2**31 - 1)
    assert ranges.fast_result(big, {}, {}) is None
    assert _iv(big) == (-(2**31), 2**31 - 1)  # what the wrapped result can be
    # a possibly negative dividend keeps C's truncation (the slow path)
    neg = BinOp("sub", i, Const(5, dt.int32), dt.int32)
    assert ranges.fast_result(BinOp("div", neg, Const(3, dt.int32), dt.int32), bound, {}) is None
    # a load is its stored dtype's range; uint64 and floats are unknown
    buf = T.Tensor((4,), "int8")
    assert _iv(Load(buf, (Const(0, dt.int32),))) == (-128, 127)
    assert _iv(Var("u", dt.uint64)) is None and _iv(Var("f", dt.float32)) is None


def test_bind_twice_takes_the_union():
    v, got, memo = Var("k", dt.int32), {}, {1: (0, 0)}
    ranges.bind(got, memo, v, (0, 3))
    ranges.bind(got, memo, v, (8, 9))
    assert got[id(v)] == (0, 9) and memo == {}


@T.prim_func
def _index_math(A: T.Tensor((4, 64), "int32"), B: T.Tensor((4, 64), "int32"),
                C: T.Tensor((4, 64), "int32")):
    with T.Kernel(4, threads=64) as bx:
        for i in T.Parallel(64):
            m = bx * 64 + i                    # proven [0, 255]: the fast path
            A[bx, i] = m // 7 * 1000 + m % 7
            B[bx, i] = (i - 5) // 3 * 10 + (i - 5) % 3    # negative dividends: C truncation
            C[bx, i] = (m + 2147483000) * 3                # wraps like C (-fwrapv)


def test_fast_and_wrapping_paths_give_c_results():
    a, b, c = tilecore.jit(_index_math, out_idx=[0, 1, 2], target="interp")()
    m = np.arange(256, dtype=np.int64).reshape(4, 64)
    i = np.arange(64, dtype=np.int64)
    np.testing.assert_array_equal(a, m // 7 * 1000 + m % 7)
    q = np.trunc((i - 5) / 3).astype(np.int64)
    np.testing.assert_array_equal(b, np.broadcast_to(q * 10 + (i - 5 - q * 3), (4, 64)))
    np.testing.assert_array_equal(c, ((m + 2147483000) * 3).astype(np.int32))


def _shift_kernel(n_in):
    @T.prim_func
    def k(A: T.Tensor((n_in,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = A[(i * 3 + bx) // 3 + 1]   # range [1, 64]: in bounds only when n_in > 64

    return k


def test_bounds_checks_are_skipped_only_where_proven():
    from tilecore_interp.exprs import Slots, proven_shape

    slots, i = Slots(), Var("i", dt.int32)
    slots.bind_range(i, (0, 63))
    buf = Buffer("A", (65,), dt.float32, "global")
    idx = BinOp("add", i, Const(1, dt.int32), dt.int32)
    assert proven_shape(buf, (idx,), slots) == (65,)
    assert proven_shape(Buffer("A", (64,), dt.float32, "global"), (idx,), slots) is None
    a = np.arange(65, dtype=np.float32)
    b = tilecore.jit(_shift_kernel(65), out_idx=[1], target="interp")(a)
    np.testing.assert_array_equal(b, a[1:])
    with pytest.raises(TileRuntimeError, match="out-of-bounds read of global buffer A"):
        tilecore.jit(_shift_kernel(64), out_idx=[1], target="interp",
                     pass_configs={"tl.disable_safe_memory_legalize": True})(a[:64])
