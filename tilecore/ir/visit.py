"""Generic traversal of IR dataclasses: walk every node, or rebuild with a rewrite function.

Both IR levels use these, so a new node kind needs no visitor boilerplate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from ..dtypes import DType
from ..errors import SourceLoc
from .buffer import Buffer

# Per-class answers: the traversal asks "is this an IR node, and what are its fields" for every
# value it meets (hundreds of thousands per GEMM lowering); dataclasses.is_dataclass/fields
# answer it by introspection each time, these dicts once per class.
_NODE_CLASS: dict[type, bool] = {}
_FIELDS: dict[type, tuple[str, ...]] = {}


def _classify(cls: type) -> bool:
    """Whether instances of `cls` are IR nodes: dataclass instances other than dtypes and
    source locations (a class object itself is never a node: its type is a metaclass)."""
    ok = (hasattr(cls, "__dataclass_fields__") and not issubclass(cls, type)
          and not issubclass(cls, (DType, SourceLoc)))
    _NODE_CLASS[cls] = ok
    return ok


def _is_node(x) -> bool:
    try:
        return _NODE_CLASS[type(x)]
    except KeyError:
        return _classify(type(x))


def _field_names(cls: type) -> tuple[str, ...]:
    """The fields a traversal visits: every dataclass field but `loc`; none for `IR_LEAF`
    classes (constant tables such as intrinsics)."""
    names = _FIELDS.get(cls)
    if names is None:
        if getattr(cls, "IR_LEAF", False):
            names = ()
        else:
            names = tuple(f.name for f in dataclasses.fields(cls) if f.name != "loc")
        _FIELDS[cls] = names
    return names


_KIDS = "_ir_kids"  # instance attribute caching a frozen node's child list (see `_kids`)
_FROZEN: dict[type, bool] = {}


def _kids(node) -> list:
    """The child nodes of `node`, in field order. Frozen nodes are immutable, so the list is
    computed once and kept in the instance's `__dict__` (dataclass equality, hashing, repr and
    `replace` see declared fields only): passes walk the same subtrees many times."""
    cls = type(node)
    frozen = _FROZEN.get(cls)
    if frozen is None:
        params = getattr(cls, "__dataclass_params__", None)
        frozen = _FROZEN[cls] = bool(params is not None and params.frozen and hasattr(node, "__dict__"))
    if frozen:
        d = node.__dict__
        out = d.get(_KIDS)
        if out is None:
            out = d[_KIDS] = _find_kids(node, cls)
        return out
    return _find_kids(node, cls)


def _find_kids(node, cls) -> list:
    out = []
    node_class = _NODE_CLASS
    for name in _field_names(cls):
        v = getattr(node, name)
        t = type(v)
        if t is tuple or isinstance(v, tuple):
            for x in v:
                if _is_node(x):
                    out.append(x)
                elif isinstance(x, tuple):
                    for y in x:
                        if _is_node(y):
                            out.append(y)
        else:
            is_node = node_class.get(t)
            if is_node is None:
                is_node = _classify(t)
            if is_node:
                out.append(v)
    return out


def children(node) -> Iterator:
    """The direct child nodes of `node` (fields and tuple elements that are IR dataclasses).
    Nodes whose class sets `IR_LEAF = True` (constant tables such as intrinsics) have none."""
    yield from _kids(node)


def child_list(node) -> list:
    """The direct child nodes of `node` as a list, for walkers that keep their own stack (and
    state per node). The list is cached on frozen nodes: never modify it."""
    return _kids(node)


_RKIDS = "_ir_rkids"  # instance attribute: the child list reversed, as `walk` pushes it


def _reversed_kids(n) -> tuple:
    """`_kids(n)` reversed, kept on frozen nodes next to the child list."""
    out = tuple(reversed(_kids(n)))
    d = getattr(n, "__dict__", None)
    # cached where `_kids` caches (frozen nodes), but never on a Buffer: `walk` takes a node
    # with the attribute for one it enters, and enters buffers only when asked
    if d is not None and _KIDS in d and not isinstance(n, Buffer):
        d[_RKIDS] = out
    return out


def walk(node, *, into_buffers: bool = False) -> Iterator:
    """Every node below and including `node`, pre-order. Buffers are leaves unless asked."""
    # the passes walk whole kernels many times (tens of millions of nodes in the test suite's
    # lowerings): the cached reversed child tuple is read straight from the node's __dict__
    stack = [node]
    pop, extend = stack.pop, stack.extend
    while stack:
        n = pop()
        yield n
        kids = n.__dict__.get(_RKIDS)
        if kids is None:
            if not into_buffers and isinstance(n, Buffer):
                continue
            kids = _reversed_kids(n)
        if kids:
            extend(kids)


_SAME = object()  # in a `known` memo of `rewrite`: the node was kept as it is


def rewrite(node, fn: Callable, *, into_buffers: bool = False, stop: tuple[type, ...] = (),
            known: dict | None = None):
    """Rebuild `node` bottom-up; `fn(new_node)` returns a replacement or None to keep it.

    Nodes whose children did not change are reused, so identity-compared nodes (Var, Buffer)
    survive untouched. Nodes of the `stop` classes are handed to `fn` whole, never entered: a
    pass that rewrites each kernel (`stop=(ThreadKernel,)`) then visits the few statements
    around the kernels, not the thousands of nodes inside them.

    `known` is a memo the caller keeps across calls with the same (pure) `fn`: the result for
    each composite expression (BinOp, Unary, Cast, Select, which hash in O(1)), keyed by the
    expression itself, so an expression equal to one rewritten before is not entered again.
    Only for an `fn` whose answer depends on nothing but the node's structure.
    """
    memo: dict[int, object] = {}
    node_class = _NODE_CLASS
    leaves: dict[type, bool] = {}  # per class: rewritten as a whole, never entered
    keyed = _composite_exprs() if known is not None else frozenset()

    def go(n):
        key = id(n)
        res = memo.get(key)
        if res is not None:
            return res
        cls = type(n)
        if keyed and cls in keyed:
            res = known.get(n)
            if res is not None:
                res = n if res is _SAME else res
                memo[key] = res
                return res
        leaf = leaves.get(cls)
        if leaf is None:
            leaf = leaves[cls] = (issubclass(cls, Buffer) and not into_buffers) or \
                bool(getattr(cls, "IR_LEAF", False)) or issubclass(cls, stop)
        if leaf:
            out = fn(n)
            res = n if out is None else out
            memo[key] = res
            return res
        changes = None
        for name in _FIELDS.get(cls) or _field_names(cls):
            v = getattr(n, name)
            t = type(v)
            if t is tuple or isinstance(v, tuple):
                nv = _go_tuple(v)
            else:
                is_node = node_class.get(t)
                if is_node is None:
                    is_node = _classify(t)
                if not is_node:
                    continue  # a scalar field (int, str, dtype, None): never rewritten
                nv = go(v)
            if nv is not v:
                if changes is None:
                    changes = {}
                changes[name] = nv
        n2 = dataclasses.replace(n, **changes) if changes else n
        out = fn(n2)
        res = n2 if out is None else out
        memo[key] = res
        if keyed and cls in keyed:
            known[n] = _SAME if res is n else res
        return res

    def _go_tuple(v):
        items = []
        changed = False
        for x in v:
            if isinstance(x, tuple):
                nx = _go_tuple(x)
            elif _is_node(x):
                nx = go(x)
            else:
                nx = x
            changed = changed or nx is not x
            items.append(nx)
        return tuple(items) if changed else v

    return go(node)


def _composite_exprs() -> frozenset:
    """The expression classes a `known` memo keys (imported late: expr imports this module's
    users, not this module)."""
    from .expr import COMPOSITE

    return COMPOSITE


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
