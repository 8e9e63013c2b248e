"""Early TMA prologues (option `early_tma_prologue`, used by the `async-pipeline` pass).

A TMA pipeline without a producer warpgroup (tilecore.lower.tma_pipeline) issues its first
tiles in a prologue placed right before the loop, so whatever the kernel does before the loop
runs before the first K/V bytes are even asked for. In flash decoding that is the query tile's
load (per-thread global loads and shared stores): its memory latency and that of the first
tile add up at every block's start. With the option, each prologue statement (thread 0 arming
a stage and issuing its TMA copies) moves up in the kernel's top-level sequence, past the
statements before the loop that cannot interact with it, so the two latencies overlap:

- passed over: statements made only of sequences, guards, vector copies and stores whose
  destination is shared or register memory the prologue does not touch, and loads of buffers
  it does not touch (the query tile's copy, accumulator fills);
- carried along: a `LetStmt` the prologue reads whose value loads no memory (block-index
  arithmetic such as a split's first tile), so the statements it passes keep their binding;
- stopped at: anything else (loops, barriers, asynchronous or atomic operations, intrinsic
  calls, a `LetStmt` of a value that loads memory, a store to global memory).

Values are unchanged: the moved statements write only the pipeline's own stages and mbarrier,
which nothing before the loop reads or writes, and read only global tensors nothing before
the loop writes; the mbarrier initialization stays first (it is placed at the kernel's start
after this rewrite), and `insert-barriers` orders what the moved copies and the passed
statements share with the loop's threads as for any other statement order.
"""

from __future__ import annotations

from ..ir.buffer import Buffer
from ..ir.expr import Expr, Var
from ..ir.stmt import IfThenElse, LetStmt, SeqStmt, Stmt
from ..ir.thread import MemLoad, MemStore, VecMove
from ..ir.visit import walk


def _vars(node) -> set:
    return {id(n) for n in walk(node) if isinstance(n, Var)}


def _passable(s: Stmt, touched: set) -> bool:
    """Whether the prologue may move above `s` (module docstring)."""
    for n in walk(s):
        if isinstance(n, (SeqStmt, IfThenElse, Buffer)):
            continue
        if isinstance(n, MemLoad):
            if id(n.buffer) in touched:
                return False
            continue
        if isinstance(n, Expr):
            continue
        if isinstance(n, MemStore):
            if id(n.buffer) in touched or n.buffer.scope == "global":
                return False
            continue
        if isinstance(n, VecMove):
            if id(n.dst) in touched or id(n.src) in touched or n.dst.scope == "global":
                return False
            continue
        return False
    return True


def hoist_prologues(body: Stmt, prologues: dict) -> Stmt:
    """`body` (a kernel's statements) with each TMA prologue moved up its top-level sequence
    (module docstring). `prologues` maps the id of each pipelined loop's replacement sequence
    to the ids of its prologue statements."""
    if not isinstance(body, SeqStmt) or not prologues:
        return body
    top = list(body.stmts)
    i = -1
    while i + 1 < len(top):
        i += 1
        seq = top[i]
        ids = prologues.get(id(seq))
        if not isinstance(seq, SeqStmt) or not ids:
            continue
        moving = [s for s in seq.stmts if id(s) in ids]
        touched = {id(n) for s in moving for n in walk(s) if isinstance(n, Buffer)}
        need = set().union(*(_vars(s) for s in moving))
        carried: list[Stmt] = []
        stop = i
        while stop > 0:
            s = top[stop - 1]
            if isinstance(s, LetStmt):
                if id(s.var) in need:
                    if any(isinstance(n, MemLoad) for n in walk(s.value)):
                        break
                    carried.insert(0, s)
                    need |= _vars(s.value)
                stop -= 1
                continue
            if not _passable(s, touched):
                break
            stop -= 1
        if stop == i:
            continue
        passed = [s for s in top[stop:i] if not any(s is c for c in carried)]
        rest = SeqStmt(tuple(s for s in seq.stmts if id(s) not in ids), seq.loc)
        top[stop:i + 1] = carried + moving + passed + [rest]
        i = stop + len(carried) + len(moving) + len(passed)  # at `rest`
    return SeqStmt(tuple(top), body.loc)
