"""tilecore.ir.visit: walk and rewrite over any IR dataclass, with the per-class field tables
(pre-order, `loc` skipped, tuples and tuples of tuples searched, IR_LEAF classes and Buffers
not descended into unless asked, unchanged subtrees reused by identity)."""

from __future__ import annotations

from dataclasses import dataclass

import tilecore.language as T
from tilecore import dtypes as dt
from tilecore.errors import SourceLoc
from tilecore.ir.buffer import Buffer
from tilecore.ir.expr import BinOp, Const, Var
from tilecore.ir.visit import children, rewrite, walk


@dataclass(frozen=True)
class Leafy:
    """A constant table: traversals stop at it."""

    IR_LEAF = True
    items: tuple


@dataclass(frozen=True)
class Node:
    """A node with every kind of field a traversal meets."""

    a: object
    pairs: tuple
    nested: tuple
    name: str = "n"
    dtype: dt.DType = dt.int32
    loc: SourceLoc | None = None


def _tree():
    x, y = Var("x"), Var("y")
    inner = BinOp("add", x, Const(1, dt.int32), dt.int32)
    leaf = Leafy((Const(7, dt.int32),))
    return x, y, inner, leaf, Node(inner, (y, 3, leaf), ((x,), (Const(2, dt.int32), "s")),
                                  loc=SourceLoc("f.py", 3))


def test_walk_is_pre_order_and_skips_loc_leaves_and_scalars():
    x, y, inner, leaf, root = _tree()
    seen = list(walk(root))
    assert seen[0] is root and seen[1] is inner and seen[2] is x
    assert any(n is y for n in seen) and any(n is leaf for n in seen)
    assert not any(isinstance(n, SourceLoc) for n in seen)  # loc is not a child
    assert not any(isinstance(n, Const) and n.value == 7 for n in seen)  # inside the IR_LEAF table
    assert [n for n in children(root)][:2] == [inner, y]
    assert list(children(leaf)) == []


def test_buffers_are_leaves_unless_asked():
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=8) as bx:
            for i in T.Parallel(8):
                B[i] = A[i] * 2.0

    shallow = list(walk(k.body))
    deep = list(walk(k.body, into_buffers=True))
    assert any(isinstance(n, Buffer) for n in shallow)
    assert len(deep) > len(shallow)  # the buffers' symbolic dimensions


def test_rewrite_rebuilds_only_what_changed():
    x, y, inner, leaf, root = _tree()
    z = Var("z")
    out = rewrite(root, lambda n: z if n is y else None)
    assert out is not root and out.pairs[0] is z and out.pairs[2] is leaf
    assert out.a is inner and out.nested is root.nested  # untouched subtrees are the same objects
    assert rewrite(root, lambda n: None) is root
    # a class first met inside a rewrite is classified then
    @dataclass(frozen=True)
    class Late:
        v: object

    late = rewrite(Late(x), lambda n: y if n is x else None)
    assert isinstance(late, Late) and late.v is y
