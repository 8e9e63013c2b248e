"""Generic traversal of IR dataclasses: walk every node, or rebuild with a rewrite function.

Both IR levels use these, so a new node kind needs no visitor boilerplate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from ..dtypes import DType
from ..errors import SourceLoc
from .buffer import Buffer


def _is_node(x) -> bool:
    return (
        dataclasses.is_dataclass(x)
        and not isinstance(x, type)
        and not isinstance(x, (DType, SourceLoc))
    )


def children(node) -> Iterator:
    """The direct child nodes of `node` (fields and tuple elements that are IR dataclasses).
    Nodes whose class sets `IR_LEAF = True` (constant tables such as intrinsics) have none."""
    if getattr(node, "IR_LEAF", False):
        return
    for f in dataclasses.fields(node):
        if f.name == "loc":
            continue
        v = getattr(node, f.name)
        if isinstance(v, tuple):
            for x in v:
                if _is_node(x):
                    yield x
                elif isinstance(x, tuple):
                    for y in x:
                        if _is_node(y):
                            yield y
        elif _is_node(v):
            yield v


def walk(node, *, into_buffers: bool = False) -> Iterator:
    """Every node below and including `node`, pre-order. Buffers are leaves unless asked."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, Buffer) and not into_buffers:
            continue
        kids = list(children(n))
        stack.extend(reversed(kids))


def rewrite(node, fn: Callable, *, into_buffers: bool = False):
    """Rebuild `node` bottom-up; `fn(new_node)` returns a replacement or None to keep it.

    Nodes whose children did not change are reused, so identity-compared nodes (Var, Buffer)
    survive untouched.
    """
    memo: dict[int, object] = {}

    def go(n):
        key = id(n)
        if key in memo:
            return memo[key]
        if (isinstance(n, Buffer) and not into_buffers) or getattr(n, "IR_LEAF", False):
            out = fn(n)
            res = n if out is None else out
            memo[key] = res
            return res
        changes = {}
        for f in dataclasses.fields(n):
            if f.name == "loc":
                continue
            v = getattr(n, f.name)
            nv = _go_value(v)
            if nv is not v:
                changes[f.name] = nv
        if changes:
            n2 = dataclasses.replace(n, **changes)
        else:
            n2 = n
        out = fn(n2)
        res = n2 if out is None else out
        memo[key] = res
        return res

    def _go_value(v):
        if _is_node(v):
            return go(v)
        if isinstance(v, tuple):
            items = [_go_value(x) for x in v]
            if any(a is not b for a, b in zip(items, v)):
                return tuple(items)
            return v
        return v

    return go(node)


def substitute(node, mapping: dict):
    """Replace Vars (by identity) according to `mapping` (Var -> Expr)."""
    from .expr import Var

    def fn(n):
        if isinstance(n, Var):
            for k, v in mapping.items():
                if k is n:
                    return v
        return None

    return rewrite(node, fn)
