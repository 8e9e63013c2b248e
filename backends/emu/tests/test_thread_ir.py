"""The thread-level IR and the intrinsic format: validation, lane-map formulas, printing."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilecore import dtypes as dt
from tilecore.ir.buffer import Buffer
from tilecore.ir.expr import Var, binop, const
from tilecore.ir.intrinsic import Intrinsic, LaneMap, Operand
from tilecore.ir.thread import Barrier, IntrinsicCall, MemLoad, MemStore, OperandRef, ThreadKernel, VecMove
from tilecore.ir.thread_printer import print_thread_node
from tilecore.lower.indexing import evaluate

cuda = pytest.importorskip("tilecore_cuda.intrinsics")


def _check_coord(m: LaneMap):
    lane = Var("lane")
    lanes = np.arange(m.lanes)
    for e in range(m.elems):
        for axis in (0, 1):
            got = np.broadcast_to(evaluate(m.coord(lane, e, axis), {id(lane): lanes}), (m.lanes,))
            want = [m.at(i, e)[axis] for i in range(m.lanes)]
            assert list(got) == want


@pytest.mark.parametrize("name", ["MMA_A", "MMA_B", "MMA_C"])
def test_tensor_core_maps_are_bijective_and_have_formulas(name):
    m = getattr(cuda, name)
    assert m.is_bijective()
    _check_coord(m)
    assert "table" not in print_thread_node(m.coord(Var("lane"), 0, 0))


@given(lane=st.integers(0, 31), elem=st.integers(0, 3), row=st.integers(0, 15), col=st.integers(0, 7))
def test_coord_matches_any_table(lane, elem, row, col):
    """Any table, linear in the lane's bits or not, yields an expression equal to it."""
    _check_coord(cuda.MMA_C.with_entry(lane, elem, (row, col)))


def test_ldmatrix_declarations():
    for count in (1, 2, 4):
        for trans in (False, True):
            i = cuda.ldmatrix(count, trans, dt.float16)
            assert i.kind == "ldmatrix" and i.operands[0].map.is_bijective()
            _check_coord(i.operands[0].map)


def test_intrinsic_validation():
    good = cuda.mma_m16n8k16(dt.float16)
    assert good.operand("A").elems == 8
    with pytest.raises(TypeError):
        Intrinsic("x", "mma", (16, 8, 16), tuple(reversed(good.operands)))
    with pytest.raises(TypeError):
        LaneMap(2, 2, 2, 1, ((0, 0), (2, 0)))
    with pytest.raises(TypeError):
        Operand("A", "inout", dt.float16, "reg", cuda.MMA_A)


def test_thread_nodes_validate_and_print():
    tx = Var("tx")
    sh = Buffer("s", (64,), dt.float16, "shared")
    rg = Buffer("r", (8,), dt.float16, "local")
    g = Buffer("G", (4, 16), dt.float16, "global")
    st_ = MemStore(sh, tx, MemLoad(g, tx, pred=binop("lt", tx, 64)), None)
    mv = VecMove(rg, const(0), sh, tx * 8, 8, None, False)
    with pytest.raises(TypeError):
        VecMove(rg, const(0), sh, tx, 16)  # 32 bytes: wider than 16
    with pytest.raises(TypeError):
        ThreadKernel((const(1),), (Var("bx"),), tx, 32, 32, (g,), (), Barrier())
    call = IntrinsicCall(cuda.ldmatrix(1, False, dt.float16),
                         (OperandRef(rg, const(0)), OperandRef(sh, tx % 8 * 8)))
    with pytest.raises(TypeError):
        IntrinsicCall(cuda.ldmatrix(1, False, dt.float16), (OperandRef(sh, const(0)), OperandRef(sh, tx)))
    text = "\n".join(print_thread_node(x) for x in (st_, mv, call, Barrier("why")))
    assert "s[tx] = (tx < 64 ? G[tx] : 0)" in text
    assert "r[0 : +8] = s[tx * 8 : +8]" in text
    assert "ldmatrix.sync.aligned.m8n8.x1.shared.b16(dst=r[0], src=s[tx % 8 * 8])" in text
    assert "barrier()  # why" in text
