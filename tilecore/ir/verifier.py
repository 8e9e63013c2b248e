"""Structural checks of tile IR: every variable defined before use, buffers known, tile ops legal.

Run after the frontend and after every pass in debug mode; a failure here is a compiler bug
(TileInternalError) unless the frontend let a user mistake through, which it should not.
"""

from __future__ import annotations

from ..errors import TileInternalError
from .aliases import BufferAlias
from .buffer import Buffer
from .expr import Load, Var
from .module import PrimFunc
from .pointers import PointerTensor
from .stmt import (
    TILE_OPS,
    AtomicAdd,
    For,
    IfThenElse,
    KernelLaunch,
    LetStmt,
    SeqStmt,
    Store,
)
from .visit import walk


def verify(func: PrimFunc) -> None:
    """Raise TileInternalError on the first structural problem found in `func`."""
    buffers = {id(p) for p in func.params}
    defined = {id(v) for v in func.dyn_vars}
    _check(func.body, defined, buffers, in_parallel=False)


def _uses(node):
    for n in walk(node):
        if isinstance(n, Var):
            yield "var", n
        elif isinstance(n, Load):
            yield "buf", n.buffer


def _check_expr(e, defined, buffers, where):
    for kind, x in _uses(e):
        if kind == "var" and id(x) not in defined:
            raise TileInternalError(f"{where}: variable {x.name} used before definition")
        if kind == "buf" and id(x) not in buffers:
            raise TileInternalError(f"{where}: buffer {x.name} is not allocated")


def _check(s, defined: set, buffers: set, in_parallel: bool):
    where = str(s.loc) if getattr(s, "loc", None) else type(s).__name__
    if isinstance(s, SeqStmt):
        inner, bufs = set(defined), set(buffers)
        for x in s.stmts:
            _check(x, inner, bufs, in_parallel)
            if isinstance(x, LetStmt):
                inner.add(id(x.var))
            elif isinstance(x, (PointerTensor, BufferAlias)):  # T.make_tensor, T.view(dtype=):
                bufs.add(id(x.buffer))  # known for the rest of the sequence
    elif isinstance(s, PointerTensor):
        _check_expr(s.address, defined, buffers, where)
    elif isinstance(s, BufferAlias):
        if id(s.base) not in buffers:
            raise TileInternalError(f"{where}: T.view of unallocated buffer {s.base.name}")
    elif isinstance(s, KernelLaunch):
        for g in s.grid:
            _check_expr(g, defined, buffers, where)
        inner = set(defined) | {id(v) for v in s.block_vars}
        bufs = set(buffers) | {id(b) for b in s.allocs}
        _check(s.body, inner, bufs, in_parallel)
    elif isinstance(s, For):
        _check_expr(s.start, defined, buffers, where)
        _check_expr(s.stop, defined, buffers, where)
        _check(s.body, set(defined) | {id(s.var)}, buffers, in_parallel or s.kind == "parallel")
    elif isinstance(s, IfThenElse):
        _check_expr(s.cond, defined, buffers, where)
        _check(s.then_body, set(defined), buffers, in_parallel)
        if s.else_body is not None:
            _check(s.else_body, set(defined), buffers, in_parallel)
    elif isinstance(s, LetStmt):
        _check_expr(s.value, defined, buffers, where)
    elif isinstance(s, (Store, AtomicAdd)):
        if id(s.buffer) not in buffers:
            raise TileInternalError(f"{where}: store to unallocated buffer {s.buffer.name}")
        _check_expr(s.value, defined, buffers, where)
        for i in s.indices:
            _check_expr(i, defined, buffers, where)
    elif isinstance(s, TILE_OPS):
        if in_parallel:
            raise TileInternalError(f"{where}: tile operation inside T.Parallel")
        for n in walk(s):
            if isinstance(n, Buffer) and id(n) not in buffers:
                raise TileInternalError(f"{where}: {type(s).__name__} uses unallocated {n.name}")
            if isinstance(n, Var) and id(n) not in defined:
                raise TileInternalError(f"{where}: variable {n.name} used before definition")
