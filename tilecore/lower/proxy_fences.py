"""Keep a generic-to-async proxy fence only where a wgmma can read shared data that ordinary
stores wrote since the last such fence; hoist the one a loop needs for data written before it.

`lower/wgmma.py` puts `AsyncFence("proxy_async")` (`fence.proxy.async.shared::cta`) before
every gemm that reads shared memory through descriptors. The fence is only needed when some
thread wrote one of those buffers with ordinary stores (or cp.async) since its last proxy fence:
TMA writes already belong to the async proxy. On sm_90a the fence is `MEMBAR.ALL.CTA` plus
`FENCE.VIEW.ASYNC.S`, and the MEMBAR waits for the thread's outstanding memory operations (in
FlashAttention's backward, the previous iteration's dQ atomics) before every gemm.

The pass walks the thread program in order with the set of shared buffers written by the
generic proxy since the last proxy fence ("dirty"):

- a proxy fence followed (in its statement list, before the next wgmma commit) by wgmma calls
  is kept iff one of their descriptor buffers is dirty; a kept fence cleans every buffer (it
  covers all of the thread's earlier writes); other proxy fences are kept as they are;
- a loop whose wgmma calls read a buffer dirty on entry gets one proxy fence before it (the
  data written before the loop, e.g. a K tile every iteration reads), and its body is analysed
  from the fixpoint of entry and end-of-body states (writes late in one iteration reach the
  next one's fences);
- branches merge by union; a warp-specialized node's consumer and producer are analysed from
  the same entry state.

A proxy fence whose group (the statements after it, up to the next wgmma commit) holds a TMA
store is kept: the store reads the staging tile the threads just wrote (tilecore.lower.tma_store).
A kernel with TMA stores ends with `AsyncWait("bulk", 0)`, so no block exits while a store still
reads its shared memory.

Every thread runs the same statements (warp specialization aside, whose producer writes shared
memory only by TMA), so a writer always executes the fence kept for its write before the
barrier that publishes it. The emulator has one proxy and cannot see a missing fence; this
pass's tests check the placements directly.
"""

from __future__ import annotations

import dataclasses

from ..ir.stmt import For, IfThenElse, SeqStmt, Stmt
from ..ir.thread import (
    AsyncCommit,
    AsyncCopy,
    AsyncFence,
    AsyncWait,
    Atomic,
    IntrinsicCall,
    MemStore,
    ThreadKernel,
    TmaStore,
    VecMove,
    WarpSpecialized,
)
from ..ir.visit import walk


def _is_wgmma(n) -> bool:
    return isinstance(n, IntrinsicCall) and n.intrinsic.kind == "wgmma"


def _generic_writes(node) -> set[int]:
    """ids of the shared buffers `node` writes through the generic proxy (stores, vector moves,
    atomics, cp.async, other intrinsics' shared outputs); TMA writes are not among them."""
    out: set[int] = set()
    for n in walk(node):
        if isinstance(n, (MemStore, Atomic)) and n.buffer.scope == "shared":
            out.add(id(n.buffer))
        elif isinstance(n, VecMove) and n.dst.scope == "shared":
            out.add(id(n.dst))
        elif isinstance(n, AsyncCopy) and n.dst.scope == "shared":
            out.add(id(n.dst))
        elif isinstance(n, IntrinsicCall) and not _is_wgmma(n):
            for spec, ref in zip(n.intrinsic.operands, n.operands):
                if ref.buffer.scope == "shared" and spec.role == "out":
                    out.add(id(ref.buffer))
    return out


def _desc_reads(nodes) -> set[int]:
    """ids of the shared buffers the wgmma calls among `nodes` (and below) read by descriptor."""
    out: set[int] = set()
    for node in nodes:
        for n in walk(node):
            if _is_wgmma(n):
                for spec, ref in zip(n.intrinsic.operands, n.operands):
                    if spec.space == "desc":
                        out.add(id(ref.buffer))
    return out


def _bulk_stores(nodes) -> bool:
    """Whether a TMA store (which reads shared memory through the async proxy) is among `nodes`."""
    return any(isinstance(n, TmaStore) for node in nodes for n in walk(node))


def _group_after(stmts: tuple, i: int) -> list:
    """The statements after position i up to the next wgmma commit (the group a fence guards)."""
    out = []
    for s in stmts[i + 1:]:
        if isinstance(s, AsyncCommit) and s.queue == "wgmma":
            break
        out.append(s)
    return out


class _Pruner:
    """The walk (stateless: one instance serves the fixpoint rounds and the rewrite)."""

    def visit(self, s: Stmt, dirty: frozenset) -> tuple[Stmt, frozenset]:
        """(s with its unneeded proxy fences dropped, dirty set after it)."""
        if isinstance(s, SeqStmt):
            out: list[Stmt] = []
            for i, x in enumerate(s.stmts):
                if isinstance(x, AsyncFence) and x.kind == "proxy_async":
                    group = _group_after(s.stmts, i)
                    reads = _desc_reads(group)
                    if reads and not (reads & dirty) and not _bulk_stores(group):
                        continue
                    out.append(x)
                    dirty = frozenset()
                    continue
                y, dirty = self.visit(x, dirty)
                out.append(y)
            return SeqStmt(tuple(out), s.loc), dirty
        if isinstance(s, For):
            pre: list[Stmt] = []
            if _desc_reads([s.body]) & dirty:
                pre.append(AsyncFence("proxy_async", s.loc))
                dirty = frozenset()
            entry = dirty
            for _ in range(8):  # the sets only grow: a few rounds reach the fixpoint
                _, end = _Pruner().visit(s.body, entry)
                if end <= entry:
                    break
                entry = entry | end
            body, end = self.visit(s.body, entry)
            loop = For(s.var, s.start, s.stop, s.step, s.kind, body, s.annotations, s.loc)
            if pre:
                return SeqStmt(tuple(pre) + (loop,), s.loc), entry | end
            return loop, entry | end
        if isinstance(s, IfThenElse):
            then, d1 = self.visit(s.then_body, dirty)
            els, d2 = (None, dirty) if s.else_body is None else self.visit(s.else_body, dirty)
            return IfThenElse(s.cond, then, els, s.loc), d1 | d2
        if isinstance(s, WarpSpecialized):
            prod, d1 = self.visit(s.producer, dirty)
            cons, d2 = self.visit(s.consumer, dirty)
            return dataclasses.replace(s, producer=prod, consumer=cons), d1 | d2
        return s, dirty | _generic_writes(s)


def prune_proxy_fences(kernel: ThreadKernel) -> ThreadKernel:
    """The kernel with each proxy fence kept only where a wgmma reads generically written
    shared data or a TMA store follows (see the module docstring), and ended by a wait for its
    TMA stores' shared reads when it has any; unchanged when it has neither wgmma nor TMA store."""
    body = kernel.body
    if any(_is_wgmma(n) for n in walk(body)):
        body, _ = _Pruner().visit(body, frozenset())
    if _bulk_stores([body]):
        # a block must not exit while a bulk store still reads its shared memory (the next
        # block on the multiprocessor may be given those bytes); threads without stores pass
        body = SeqStmt((body, AsyncWait("bulk", 0, kernel.loc)), kernel.loc)
    if body is kernel.body:
        return kernel
    return ThreadKernel(kernel.grid, kernel.block_vars, kernel.thread_var, kernel.num_threads,
                        kernel.warp_size, kernel.shared, kernel.registers, body, kernel.loc)
