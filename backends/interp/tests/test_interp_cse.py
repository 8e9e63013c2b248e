"""The oracle's per-statement common subexpressions (tilecore_interp/cse.py): repeated pure
index arithmetic is evaluated once per execution, and nothing that may fault or load moves."""

import numpy as np
from tilecore_interp.cse import Cse

import tilecore
import tilecore.language as T
from tilecore import dtypes as dt
from tilecore.ir.buffer import Buffer
from tilecore.ir.expr import BinOp, Const, Load, Var


def _b(op, a, b):
    return BinOp(op, a, b, dt.int32)


def test_only_repeated_pure_subexpressions_are_shared():
    i, d = Var("i", dt.int32), Var("d", dt.int32)
    a = Buffer("A", (64,), dt.int32, "global")
    ih = _b("sub", _b("div", _b("mod", i, Const(48, dt.int32)), Const(6, dt.int32)), Const(1, dt.int32))
    by_var = _b("div", i, d)  # may divide by zero: a select may be what guards it
    load = Load(a, (_b("add", i, Const(1, dt.int32)),))
    exprs = [_b("lt", ih, Const(8, dt.int32)), _b("ge", ih, Const(0, dt.int32)), ih,
             by_var, by_var, load, load]
    rep = Cse(exprs).repeated
    assert ih in rep and _b("mod", i, Const(48, dt.int32)) in rep
    assert by_var not in rep and load not in rep
    assert _b("add", i, Const(1, dt.int32)) in rep  # the load's index is pure arithmetic


def _conv_like():
    """Indices in the style of T.im2col, repeated between a padding test and a load, and a
    division by a value only a select protects, twice."""
    @T.prim_func
    def k(A: T.Tensor((8, 8), "float32"), D: T.Tensor((64,), "int32"), B: T.Tensor((64,), "float32"),
          C: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = T.if_then_else((i // 8 + i % 3 - 1 >= 0) and (i // 8 + i % 3 - 1 < 8)
                                      and (i % 8 - 1 >= 0),
                                      A[i // 8 + i % 3 - 1, i % 8 - 1], -1.0)
                C[i] = T.if_then_else(D[i] != 0, i // D[i], 7) + T.if_then_else(D[i] != 0, i // D[i], 7)
    return k


def test_shared_subexpressions_keep_the_values_and_the_guards():
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    d = np.array([0, 3] * 32, np.int32)
    b, c = np.zeros(64, np.float32), np.zeros(64, np.int32)
    tilecore.jit(_conv_like(), target="interp")(a, d, b, c)
    i = np.arange(64)
    r, col = i // 8 + i % 3 - 1, i % 8 - 1
    ok = (r >= 0) & (r < 8) & (col >= 0)
    np.testing.assert_array_equal(b, np.where(ok, a[np.clip(r, 0, 7), np.clip(col, 0, 7)], -1.0))
    np.testing.assert_array_equal(c, 2 * np.where(d != 0, i // np.maximum(d, 1), 7))
