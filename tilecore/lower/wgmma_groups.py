"""Retire back-to-back independent wgmma groups with one wait.

`lower/wgmma.py` ends every gemm with `AsyncCommit("wgmma")` + `AsyncWait("wgmma", 0)`. When
the next statements only open another gemm whose registers are disjoint from the first one's
(FlashAttention's backward: S^T = K Q^T then dP^T = V dO^T; dV += P^T dO then dK += dS^T Q),
the first wait only delays issuing the second group: the tensor cores drain between them.
This pass drops such a wait, so both groups are in flight together and the second gemm's
`wait_group 0` retires both.

A wait is dropped when, in its statement list, the statements after it up to the next
wgmma commit are only fences, mbarrier waits, let bindings, stores to register arrays and
wgmma calls, none of them touching a register array of the group the wait retires, and the
commit is directly followed by `AsyncWait("wgmma", 0)`. Shared memory the first group reads
through descriptors is only read in between (wgmma calls read, nothing writes shared), so its
asynchronous reads stay race-free; the emulator checks the result like any other placement.
"""

from __future__ import annotations

from ..ir.stmt import LetStmt, SeqStmt, Stmt
from ..ir.thread import (
    AsyncCommit,
    AsyncFence,
    AsyncWait,
    IntrinsicCall,
    MbarrierWait,
    MemLoad,
    MemStore,
    ThreadKernel,
)
from ..ir.visit import rewrite, walk


def _is_wgmma(n) -> bool:
    return isinstance(n, IntrinsicCall) and n.intrinsic.kind == "wgmma"


def _regs(call: IntrinsicCall) -> set[int]:
    ops = zip(call.intrinsic.operands, call.operands)
    return {id(ref.buffer) for spec, ref in ops if spec.space == "reg"}


def _is_wait0(s) -> bool:
    return isinstance(s, AsyncWait) and s.queue == "wgmma" and s.pending == 0


def _is_commit(s) -> bool:
    return isinstance(s, AsyncCommit) and s.queue == "wgmma"


def _reads_any(node, bufs: set[int]) -> bool:
    return any(isinstance(n, MemLoad) and id(n.buffer) in bufs for n in walk(node))


def _droppable(stmts: tuple, i: int, inflight: set[int]) -> bool:
    """Whether the wait at i can go: what follows, up to the next group's commit and wait,
    neither reads nor writes a register array of a group in flight (`inflight`)."""
    seen_call = False
    for j in range(i + 1, len(stmts)):
        s = stmts[j]
        if _is_commit(s):
            return seen_call and j + 1 < len(stmts) and _is_wait0(stmts[j + 1])
        if _is_wgmma(s):
            if _regs(s) & inflight:
                return False
            seen_call = True
        elif isinstance(s, MemStore):
            if s.buffer.scope != "local" or id(s.buffer) in inflight or _reads_any(s, inflight):
                return False
        elif isinstance(s, LetStmt):
            if _reads_any(s, inflight):
                return False
        elif not isinstance(s, (AsyncFence, MbarrierWait)):
            return False
    return False


def _flat(s: Stmt) -> list:
    """The statements of nested statement lists, in order (a SeqStmt opens no C block, so
    inlining nested ones changes nothing; each gemm lowers to its own list)."""
    if isinstance(s, SeqStmt):
        return [y for x in s.stmts for y in _flat(x)]
    return [s]


def _merge(s: Stmt):
    if not isinstance(s, SeqStmt) or not any(_is_wait0(x) for x in _flat(s)):
        return None
    flat = tuple(_flat(s))
    keep: list[Stmt] = []
    inflight: set[int] = set()  # register arrays of the groups committed since the last kept wait
    for i, x in enumerate(flat):
        if _is_wgmma(x):
            inflight |= _regs(x)
        elif isinstance(x, AsyncWait) and x.queue == "wgmma":
            if x.pending == 0 and i and _is_commit(flat[i - 1]) and _droppable(flat, i, inflight):
                continue
            if x.pending == 0:
                inflight = set()
        keep.append(x)
    return SeqStmt(tuple(keep), s.loc) if len(keep) != len(flat) else None


def merge_wgmma_waits(kernel: ThreadKernel) -> ThreadKernel:
    """The kernel with the waits between independent back-to-back wgmma groups dropped (see
    the module docstring)."""
    if not any(_is_wait0(n) for n in walk(kernel)):
        return kernel  # nothing to merge: what the rewrite would return, without rebuilding
    return rewrite(kernel, _merge)
