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
from tilecore.lower.indexing import evaluate, free_vars


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
        rel = bases.relative(off)
        if rel.xor == 0 and rel.add == 0 and rel.name not in values:
            values[rel.name] = evaluate(off, {id(tx): threads})
        got = (values[rel.name] ^ rel.xor) + rel.add
        np.testing.assert_array_equal(got, evaluate(off, {id(tx): threads}))
    assert len(bases.decls) == 1  # every k step relates to the first


def test_swizzled_k_steps_are_an_xor_apart():
    tx, offsets = _loader_offsets(Swizzled(64, 128, 3, 3, 4), 128, 8)
    bases = OperandBases(tx, 128, lambda v: "b", "b")
    rels = [bases.relative(off) for off in offsets]
    assert (rels[0].xor, rels[0].add) == (0, 0) and any(r.xor for r in rels)


def test_xor_bits_no_base_sets_become_an_addition():
    """The second 16-row tile of a warp's A operand is `base ^ (k chunk) ^ 4096` for k steps and
    rows: the 4096 (a bit no thread's base has) is an addition, folded into ldmatrix's immediate,
    so the XOR masks are only the k steps' chunk bits (FlashAttention 128x32 d=128 on sm_80: 255
    registers -> 235)."""
    layout = Swizzled(64, 128, 3, 3, 4)
    tx = Var("tx", dt.int32)
    lane = tx % 32
    offsets = [layout.offset((tx // 32) * 32 + m * 16 + lane % 16, k * 16 + (lane // 16) * 8) * 2
               for m in range(2) for k in range(4)]
    bases = OperandBases(tx, 64, lambda v: "b", "b")
    rels = [bases.relative(off) for off in offsets]
    base = evaluate(offsets[0], {id(tx): np.arange(64)})
    for off, r in zip(offsets, rels):
        np.testing.assert_array_equal((base ^ r.xor) + r.add, evaluate(off, {id(tx): np.arange(64)}))
    assert {r.xor for r in rels} == {0, 32, 64, 96}  # the k steps' chunk bits only
    assert {r.add for r in rels} == {0, 16 * 128 * 2}  # the second m tile: an immediate offset
    assert len(bases.decls) == 1


def test_offsets_mixing_other_variables_with_the_thread_are_left_alone():
    tx, k = Var("tx", dt.int32), Var("k", dt.int32)
    bases = OperandBases(tx, 128, lambda v: "b", "b")
    assert bases.relative((tx + k) % 32 * 2) is None
    assert bases.relative(k * 64 + 16) is None  # no thread part: nothing to share
    assert bases.decls == []


def test_stage_offsets_share_the_thread_part():
    """A stage buffer's `stage * 8192` is kept apart: every stage and k step of a swizzled,
    double-buffered tile reads through one base (its rest added), instead of ptxas hoisting a
    base per distinct expression (the sm_80 FlashAttention V tile: 8 bases)."""
    layout = Swizzled(64, 128, 3, 3, 4)
    tx, stage = Var("tx", dt.int32), Var("stage", dt.int32)
    lane = tx % 32
    bases = OperandBases(tx, 128, lambda v: "b", "b")
    threads = np.arange(128)
    for s in (0, 1):
        env = {id(tx): threads, id(stage): np.int64(s)}
        for k in range(4):
            off = (layout.offset(lane % 16, k * 16 + (lane // 16) * 8) + stage * 4096) * 2 + 32768
            r = bases.relative(off)
            base = evaluate(bases.decls[0][1], {id(tx): threads})
            rest = 0 if r.rest is None else evaluate(r.rest, env)
            np.testing.assert_array_equal((base ^ r.xor) + r.add + rest, evaluate(off, env))
            assert r.rest is not None and [v is stage for v in free_vars(r.rest)] == [True]
    assert len(bases.decls) == 1
