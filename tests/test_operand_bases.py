"""Shared operand addresses rendered relative to a few bases (tilecore/codegen/operand_bases.py):
every relation the renderer prints holds for every thread, and the k steps of a swizzled tile
share one base (a constant XOR apart), where independent expressions cost FlashAttention 20
hoisted address registers and a spill."""

from __future__ import annotations

import numpy as np
import pytest

from tilecore import dtypes as dt
from tilecore.codegen.operand_bases import OperandBases
from tilecore.ir.expr import Var
from tilecore.ir.smem_layout import Padded, RowMajor, Swizzled
from tilecore.lower.indexing import evaluate


def _loader_offsets(layout, threads: int, k_steps: int):
    """Byte offsets ldmatrix.x4 rows of a 64 x 128 fp16 tile are read at, one per k step: lane
    l of warp w reads row (w * 16 + l % 16), column (k * 16 + (l // 16) * 8)."""
    tx = Var("tx", dt.int32)
    lane = tx % 32
    row = (tx // 32) * 16 + lane % 16
    return tx, [layout.offset(row, k * 16 + (lane // 16) * 8) * 2 for k in range(k_steps)]


@pytest.mark.parametrize("layout", [Swizzled(64, 128, 3, 3, 4), Swizzled(64, 128, 2, 3, 4),
                                    RowMajor(64, 128), Padded(64, 128, 8)], ids=str)
def test_rendered_relations_hold_for_every_thread(layout):
    tx, offsets = _loader_offsets(layout, 128, 8)
    bases = OperandBases(tx, 128, lambda v: f"b{len(bases.vars)}", "b")
    threads = np.arange(128)
    values = {}
    for off in offsets:
        name, op, k = bases.relative(off)
        if k == 0 and name not in values:
            values[name] = evaluate(off, {id(tx): threads})
        base = values[name]
        got = base ^ k if op == "^" else base + k
        np.testing.assert_array_equal(got, evaluate(off, {id(tx): threads}))
    assert len(bases.decls) == 1  # every k step relates to the first


def test_swizzled_k_steps_are_an_xor_apart():
    tx, offsets = _loader_offsets(Swizzled(64, 128, 3, 3, 4), 128, 8)
    bases = OperandBases(tx, 128, lambda v: "b", "b")
    ops = [bases.relative(off)[1:] for off in offsets]
    assert ops[0] == ("+", 0) and any(op == "^" for op, _ in ops)


def test_offsets_of_other_variables_are_left_alone():
    tx, k = Var("tx", dt.int32), Var("k", dt.int32)
    bases = OperandBases(tx, 128, lambda v: "b", "b")
    assert bases.relative(tx * 2 + k * 64) is None
    assert bases.decls == []
