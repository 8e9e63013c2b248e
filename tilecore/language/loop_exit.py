"""`break` in kernel loops (`T.serial`, `T.unroll`, `range` and `while` loops).

The frontend writes a loop exit with statements every target already has: a loop that
contains a `break` (not counting nested loops) gets a fresh int32 flag, set to 0 before the
loop; `break` sets it to 1; the statements after one that may break are guarded by
`flag == 0`; a `for` loop's body runs only while the flag is 0 (the remaining iterations do
nothing) and a `while` loop's condition becomes `flag == 0 and cond`. In a thread-level kernel
the flag is per thread, so each thread leaves on its own, as in CUDA.

Refused with a located TileSyntaxError: `break` in `T.Parallel` (its iterations have no
order), `T.Pipelined` (the schedule overlaps iterations), `T.Persistent`, a loop over a Python
sequence (unrolled when the kernel is built) and a loop nested inside `T.Parallel`.
"""

from __future__ import annotations

import ast

from .. import dtypes as dt
from ..errors import TileSyntaxError
from ..ir.buffer import Buffer
from ..ir.expr import Expr, Load, as_expr, binop
from ..ir.stmt import IfThenElse, SeqStmt, Store

_NESTED = (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_WHY = {
    "parallel": "T.Parallel iterations have no order, so there is no `rest of the loop` to skip",
    "pipelined": "T.Pipelined overlaps iterations, so a later one may already have started",
    "persistent": "T.Persistent distributes tiles over blocks",
    "sequence": "a loop over a Python sequence is unrolled when the kernel is built",
}


def find_break(stmts) -> ast.Break | None:
    """The first `break` in `stmts` that exits the loop owning them (nested loops excluded)."""
    todo = list(stmts)
    while todo:
        n = todo.pop(0)
        if isinstance(n, ast.Break):
            return n
        if isinstance(n, _NESTED):
            continue
        todo.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, ast.stmt))
    return None


def enter(parser, node, kind: str) -> Buffer | None:
    """The exit flag for loop `node` of `kind` ("serial", "unroll", "while", or a kind that
    refuses `break`), initialized to 0 before the loop; None when the body has no `break`.
    The caller pushes the result on `parser.breaks` while it parses the body."""
    brk = find_break(node.body)
    if brk is None:
        return None
    b = parser.b
    why = _WHY.get(kind)
    if why is None and b.parallel_depth:
        why = "a loop inside T.Parallel runs per element, where `break` is not provided"
    if why is not None:
        raise TileSyntaxError(f"`break` cannot leave this loop: {why}", parser.loc(brk),
                              hint="use a T.serial loop or a `while` loop, or guard the body with `if`")
    flag = b.allocate(Buffer(b.unique_name("loop_exit"), (1,), dt.int32, "local", is_var=True))
    b.emit(Store(flag, (as_expr(0),), as_expr(0), parser.loc(node)))
    return flag


def running(flag: Buffer) -> Expr:
    """`flag == 0`: the loop has not been left."""
    return binop("eq", Load(flag, (as_expr(0),)), as_expr(0))


def guard_body(flag: Buffer | None, body: SeqStmt, loc) -> SeqStmt:
    """A `for` body that runs only while the loop has not been left."""
    if flag is None:
        return body
    return SeqStmt((IfThenElse(running(flag), body, None, loc),))


def do_break(parser, node: ast.Break) -> None:
    """`break`: set the innermost loop's exit flag."""
    flag = parser.breaks[-1] if parser.breaks else None
    if flag is None:  # Python already rejects a `break` outside a loop; this is a nested def
        raise TileSyntaxError("`break` outside a kernel loop", parser.loc(node),
                              hint="`break` leaves a T.serial, T.unroll, range or while loop")
    parser.b.emit(Store(flag, (as_expr(0),), as_expr(1), parser.loc(node)))


def stmts(parser, nodes) -> None:
    """Parse `nodes` in order; after a statement that may leave the innermost loop, the rest
    is parsed under `if flag == 0` (see the module docstring)."""
    flag = parser.breaks[-1] if parser.breaks else None
    for k, s in enumerate(nodes):
        parser.stmt(s)
        if flag is None:
            continue
        if isinstance(s, ast.Break):
            return  # the rest is unreachable, as in Python
        rest = nodes[k + 1:]
        if rest and find_break([s]) is not None:
            loc = parser.loc(rest[0])
            then = parser.block(rest, "if")
            parser.b.emit(IfThenElse(running(flag), then, None, loc))
            return
