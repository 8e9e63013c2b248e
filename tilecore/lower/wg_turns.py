"""Warpgroup turns: FlashAttention-3's scheduler barrier between consumer warpgroups.

With the option `warpgroup_turns` (pass config `tilecore.warpgroup_turns`), the consumer
warpgroups of a warp-specialized kernel (two or more, each owning its own rows of the
block's tiles, as FlashAttention's 128-row tile split over two warpgroups) take turns
issuing their tensor-core work in each iteration of a pipelined loop:

    warpgroup w, iteration k:  wait for the turn -> issue the gemms -> pass the turn to w + 1
                               -> wait for its own gemms -> softmax ...

so while warpgroup 0 runs its softmax (exp2 on the multi-function unit, row reductions) the
tensor cores run warpgroup 1's products, and the other way round: without the turns both
warpgroups issue at about the same moment and then both wait, and the tensor cores idle
through the softmax of both. The issued run ("the gemms") is, in a loop body's statement
list, everything from the first wgmma fence or call to the last wgmma commit before the
first wgmma wait: S = Q K^T alone in the plain FlashAttention loop, S(k) and P(k-1) V(k-1)
in the overlapped one. A body whose first wgmma statement is a branch gets the turns in
each branch (a branch without gemms takes and passes its turn at once), so every
iteration takes exactly one turn per warpgroup.

Before the loop the last warpgroup hands warpgroup 0 its first turn; after it warpgroup 0
takes the last warpgroup's final pass (per tile, in a persistent kernel's tile loop), so each
hardware barrier (ids TURN_BASE_ID + w) gets as many passes as waits (what the emulator
checks: tilecore/emulator/turns.py). The turns change no value; they order when each
warpgroup issues. Kernels that are not
warp-specialized, ping-pong GEMMs (`groups` > 1), single-warpgroup consumers, and loop
bodies of another shape are left as they are.
"""

from __future__ import annotations

import dataclasses

from ..ir.stmt import For, IfThenElse, SeqStmt, Stmt
from ..ir.thread import (
    AsyncCommit,
    AsyncFence,
    AsyncWait,
    IntrinsicCall,
    ThreadKernel,
    WarpgroupTurn,
    WarpSpecialized,
)
from ..ir.visit import rewrite, walk

WARPGROUP = 128
TURN_BASE_ID = 2  # hardware barriers 2.. (1 is the consumer's named barrier, 0 the block's)


def _issues(n) -> bool:
    """Whether `n` is a wgmma call or the fence that opens a wgmma group."""
    return (isinstance(n, IntrinsicCall) and n.intrinsic.kind == "wgmma") or \
        (isinstance(n, AsyncFence) and n.kind == "wgmma")


def _has_issue(n) -> bool:
    return any(_issues(x) for x in walk(n))


def _has_wait(n) -> bool:
    return any(isinstance(x, AsyncWait) and x.queue == "wgmma" for x in walk(n))


def _stmts(body: Stmt) -> list[Stmt]:
    return list(body.stmts) if isinstance(body, SeqStmt) else [body]


def _turn_body(body: Stmt | None, groups: int, first_only: bool = False) -> Stmt | None:
    """`body` with one turn (wait, issued run, pass) on every path, or None if its shape is not
    understood. A body without gemms takes and passes its turn at once (only inside a branch:
    `first_only` marks a loop body, which must have gemms)."""
    wait, give = (WarpgroupTurn(kind, TURN_BASE_ID, groups) for kind in ("wait", "pass"))
    stmts = [] if body is None else _stmts(body)
    i = next((n for n, s in enumerate(stmts) if _has_issue(s)), None)
    if i is None:
        return None if first_only else SeqStmt(tuple([wait, give] + stmts))
    s = stmts[i]
    if isinstance(s, (IfThenElse, SeqStmt)):
        if any(_has_issue(x) for x in stmts[i + 1:]):
            return None  # gemms issued after the branch or block too: not one run
        if isinstance(s, SeqStmt):  # a nested block (a macro's statements): its own run
            new = _turn_body(s, groups, first_only=True)
        else:
            then, other = _turn_body(s.then_body, groups), _turn_body(s.else_body, groups)
            new = None if then is None or other is None else \
                dataclasses.replace(s, then_body=then, else_body=other)
        return None if new is None else SeqStmt(tuple(stmts[:i] + [new] + stmts[i + 1:]))
    if not _issues(s):
        return None  # a nested loop or an unknown statement issues the first gemm
    j = next((n for n in range(i, len(stmts)) if _has_wait(stmts[n])), len(stmts))
    run = stmts[i:j]
    if any(isinstance(x, (For, IfThenElse)) and _has_issue(x) for x in run):
        return None
    commits = [n for n, x in enumerate(run) if isinstance(x, AsyncCommit) and x.queue == "wgmma"]
    end = commits[-1] if commits else None
    if end is None:
        return None
    return SeqStmt(tuple(stmts[:i] + [wait] + run[:end + 1] + [give] + run[end + 1:] + stmts[j:]))


def _consumer(stmt: Stmt, groups: int) -> tuple[Stmt, int]:
    """The consumer with turns in each top-level loop that issues gemms; (new, loops changed)."""
    out, changed = [], 0
    for s in _stmts(stmt):
        if isinstance(s, SeqStmt):
            s, n = _consumer(s, groups)
            changed += n
        elif isinstance(s, For) and _has_issue(s.body):
            body = _turn_body(s.body, groups, first_only=True)
            if body is not None:
                first = WarpgroupTurn("pass", TURN_BASE_ID, groups, only=groups - 1)
                last = WarpgroupTurn("wait", TURN_BASE_ID, groups, only=0)
                out += [first, dataclasses.replace(s, body=body), last]
                changed += 1
                continue
            # a loop around the gemm loop (a persistent kernel's tile loop): turns per tile
            inner, n = _consumer(s.body, groups)
            if n:
                s = dataclasses.replace(s, body=inner)
                changed += n
        out.append(s)
    return (SeqStmt(tuple(out)) if changed else stmt), changed


def warpgroup_turns(kernel: ThreadKernel) -> ThreadKernel:
    """`kernel` with FA3's warpgroup turns in its warp-specialized consumer's gemm loops (see
    the module docstring); unchanged where they do not apply."""
    found = [n for n in walk(kernel.body) if isinstance(n, WarpSpecialized)]
    if len(found) != 1:
        return kernel
    ws = found[0]
    if ws.groups != 1 or ws.split % WARPGROUP or ws.split < 2 * WARPGROUP:
        return kernel
    consumer, changed = _consumer(ws.consumer, ws.split // WARPGROUP)
    if not changed:
        return kernel
    new = dataclasses.replace(ws, consumer=consumer)
    return dataclasses.replace(kernel, body=rewrite(kernel.body, lambda n: new if n is ws else None,
                                                    stop=(WarpSpecialized,)))
