"""The lowering's caches answer what the uncached computations answer: `linear` kept on
composite nodes, the simplifier's memo across calls (`rewrite(known=...)`), `walk`'s cached
child tuples, `evaluate`'s shared subexpressions and the vectorized `Layout.writers`.
(Whole-kernel identity is checked by `tools/lowering_identity.py`.)"""

from __future__ import annotations

import numpy as np

from tilecore import dtypes as dt
from tilecore.ir.expr import BinOp, Const, Var, _linear, linear
from tilecore.ir.visit import child_list, walk
from tilecore.lower import indexing
from tilecore.lower.layout import ReplicatedLayout, SliceLayout, StridedLayout


def _index_exprs():
    """Index expressions of the shapes the lowering builds (affine parts, div/mod by constants,
    shared subtrees)."""
    tx, i = Var("tx"), Var("i")
    lane = tx % 32
    row = (tx // 32) * 16 + lane // 4 + i * 64
    col = (lane % 4) * 2 + (tx // 64) * 8
    return tx, i, [row, col, row * 128 + col, (row * 128 + col) // 512, (row + 7) % 16 * 3 - col,
                   BinOp("mul", row, col, dt.int32), (lane // 4) % 8 + 0 * i]


def test_linear_cached_equals_fresh_and_holds_no_cycle():
    _, _, exprs = _index_exprs()
    for e in exprs:
        for n in walk(e):
            first = linear(n)
            again = linear(n)  # from the cache
            fresh = _linear(n)
            assert first == again == fresh
            kept = n.__dict__.get("_linear") if isinstance(n, BinOp) else None
            if kept is not None and isinstance(kept, tuple) and len(kept) == 2:
                assert n not in kept[0]  # a node that is its own atom keeps a marker, not itself


def test_simplify_memo_across_calls_answers_as_a_fresh_simplifier():
    tx, i, exprs = _index_exprs()
    bounds = {id(tx): (0, 127), id(i): (0, 3)}
    indexing.forget()
    memoized = [indexing.simplify(e, bounds) for e in exprs + exprs]  # the second round hits
    for e, got in zip(exprs + exprs, memoized):
        indexing.forget()
        assert indexing.simplify(e, bounds) == got
    # other bounds are another table: the answer follows the bounds
    wide = {id(tx): (0, 1023), id(i): (0, 3)}
    indexing.forget()
    a = indexing.simplify(exprs[3], bounds)
    b = indexing.simplify(exprs[3], wide)
    indexing.forget()
    assert b == indexing.simplify(exprs[3], wide)
    assert a == indexing.simplify(exprs[3], bounds)


def test_simplified_values_are_right():
    tx, i, exprs = _index_exprs()
    bounds = {id(tx): (0, 127), id(i): (0, 3)}
    for iv in range(4):
        env = {id(tx): np.arange(128, dtype=np.int64), id(i): iv}
        memo: dict = {}
        for e in exprs:
            want = indexing.evaluate(e, env)
            simple = indexing.evaluate(indexing.simplify(e, bounds), env)
            assert np.array_equal(np.broadcast_to(simple, (128,)), np.broadcast_to(want, (128,)))
            assert np.array_equal(indexing.evaluate(e, env, memo), want)  # with a shared memo


def _preorder(n, out):
    out.append(n)
    for k in child_list(n):
        _preorder(k, out)
    return out


def test_walk_with_cached_children_is_preorder_every_time():
    _, _, exprs = _index_exprs()
    for e in exprs:
        want = _preorder(e, [])
        for _ in range(3):  # later walks read the cached reversed child tuples
            got = list(walk(e))
            assert len(got) == len(want) and all(a is b for a, b in zip(got, want))


def _writers_loop(lay) -> np.ndarray:
    """The first (register, thread) holder of each element, by the plain double loop."""
    coords, valid = lay.table
    writer = valid.copy()
    flat = lay.flat_index(coords)
    seen = np.zeros(int(np.prod(lay.shape)), dtype=bool)
    for r in range(lay.nregs):
        for t in range(lay.threads):
            if writer[t, r]:
                writer[t, r] = not seen[flat[t, r]]
                seen[flat[t, r]] = True
    return writer


def test_vectorized_writers_match_the_loop():
    layouts = [ReplicatedLayout((4, 8), 16), StridedLayout((8, 16), 32, 2)]
    layouts.append(SliceLayout(layouts[1], 1))
    for lay in layouts:
        assert np.array_equal(lay.writers, _writers_loop(lay)), lay
    assert ReplicatedLayout((4, 8), 16).replicated


def test_const_helpers_unchanged():
    assert linear(Const(5, dt.int32)) == ({}, 5)
    assert linear(3) == ({}, 3)
    assert linear(Const(1.5, dt.float32)) is None
