"""Place the waits of asynchronous gemms (`T.gemm(..., wg_wait=-1)`) where their results are needed.

`lower/wgmma.py` ends every gemm with `AsyncCommit("wgmma")` + `AsyncWait("wgmma", 0)`; for an
asynchronous gemm that wait is marked `deferred`. This pass moves each deferred wait later in
its statement list, past statements that neither touch the registers of its group (the
accumulator, the A fragment) nor order anything else, and stops before the first one that
might: a read or write of those registers, a shared-memory or global write, a barrier, an
mbarrier arrive (a consumer releasing the stage the group still reads), another queue's copy
or wait, or a statement it does not know. A wgmma commit passed on the way is one more group
issued after this one, so the wait becomes `wait_group n` (n commits passed): the later groups
stay in flight. With nothing to stop it the wait lands at the end of its list (a loop body or
a branch), so no group outlives the block that issued it. A deferred wait that follows another wgmma wait
with work between them and no commit gets an `AsyncFence("order")` (CUDA: `fence.acq_rel.cta`,
one MEMBAR.ALL.CTA) before it: ptxas hoists a `wait_group`
with nothing between it and the previous partial wait but register arithmetic right up to
that wait (seen with nvcc 13.0: the `wait_group 0` landed two instructions after the
`wait_group 1`, serializing the overlap), and it moves no wait above a memory fence (a
volatile shared load also holds it, but its result register made the H200 loop spill and
run slower: 0.980 against 0.949 ms at d=128, s=4096).

This is FlashAttention-3's intra-warpgroup overlap written in the tile program: issue
S(k) = Q K(k)^T and O += P(k-1) V(k-1) back to back, then the softmax of S(k) waits only for S
(`wait_group 1`) and runs while the tensor cores finish P V; the rescale of O waits for both.
The emulator checks the result like any other placement (a register touched while its group
is in flight is a register race); the pins of `tilecore_cuda/wgmma_pins.py` follow the waits.
"""

from __future__ import annotations

from ..ir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt
from ..ir.thread import (
    AsyncCommit,
    AsyncFence,
    AsyncWait,
    MbarrierWait,
    MemLoad,
    MemStore,
    ThreadKernel,
    VecMove,
)
from ..ir.visit import rewrite, walk
from .wgmma_groups import _is_wgmma, _regs  # one definition of "a wgmma" and its registers


def _flat(s: Stmt) -> list:
    """The statements of nested statement lists, in order (a SeqStmt opens no C block)."""
    if isinstance(s, SeqStmt):
        return [y for x in s.stmts for y in _flat(x)]
    return [s]


def _reads(node, bufs: set[int]) -> bool:
    return any(isinstance(n, MemLoad) and id(n.buffer) in bufs for n in walk(node))


def _passable(s, inflight: set[int], top: bool) -> bool:
    """Whether the wait of a group with registers `inflight` may move past `s`: `s` only
    computes in registers outside the group (or issues other wgmma work at the top level)."""
    if isinstance(s, MemStore):
        return s.buffer.scope == "local" and id(s.buffer) not in inflight and not _reads(s, inflight)
    if isinstance(s, VecMove):
        return (s.src.scope == s.dst.scope == "local" and not {id(s.src), id(s.dst)} & inflight
                and not _reads(s, inflight))
    if isinstance(s, LetStmt):  # binds for the rest of the list: the wait uses no names
        return not _reads(s.value, inflight)
    if isinstance(s, SeqStmt):
        return all(_passable(x, inflight, top) for x in s.stmts)
    if isinstance(s, For):
        return (not _reads(s.start, inflight) and not _reads(s.stop, inflight)
                and _passable(s.body, inflight, False))
    if isinstance(s, IfThenElse):
        return (not _reads(s.cond, inflight) and _passable(s.then_body, inflight, False)
                and (s.else_body is None or _passable(s.else_body, inflight, False)))
    if _is_wgmma(s):  # another group's product, issued behind this one
        return top and not _regs(s) & inflight
    if isinstance(s, AsyncFence):
        return s.kind in ("wgmma", "proxy_async")
    if isinstance(s, AsyncCommit):
        return top and s.queue == "wgmma"  # counted by the caller: nested, the count would vary
    return isinstance(s, MbarrierWait)  # waiting for a stage orders nothing the group touches


def _group_regs(stmts: list, i: int) -> set[int]:
    """Registers of the group the wait at i retires: the wgmma calls since the previous commit."""
    regs: set[int] = set()
    for j in range(i - 1, -1, -1):
        s = stmts[j]
        if isinstance(s, AsyncCommit) and s.queue == "wgmma" and j != i - 1:
            break
        if _is_wgmma(s):
            regs |= _regs(s)
    return regs


def _place(s: Stmt):
    """The statement list `s` with its deferred wgmma waits moved (module docstring)."""
    if not isinstance(s, SeqStmt):
        return None
    flat = _flat(s)
    if not any(isinstance(x, AsyncWait) and x.deferred for x in flat):
        return None
    out = list(flat)
    # the last wait first: an earlier group's wait then moves past the later ones' final places
    for i in range(len(out) - 1, -1, -1):
        w = out[i]
        if not (isinstance(w, AsyncWait) and w.deferred and w.queue == "wgmma" and w.pending == 0):
            continue
        inflight = _group_regs(out, i)
        j, commits = i + 1, 0
        while j < len(out) and _passable(out[j], inflight, True):
            if isinstance(out[j], AsyncCommit):
                commits += 1
            j += 1
        if j == i + 1:
            continue
        out = out[:i] + out[i + 1:j] + [AsyncWait("wgmma", commits, w.loc, deferred=True)] + out[j:]
    return SeqStmt(tuple(_fenced(out)), s.loc)


def _is_work(x) -> bool:
    return not isinstance(x, (AsyncFence, AsyncWait, AsyncCommit, MbarrierWait)) and not _is_wgmma(x)


def _fenced(stmts: list) -> list:
    """`stmts` with an `AsyncFence("order")` before each deferred wait that follows another
    wgmma wait with work but no commit between them (module docstring: ptxas would hoist it
    up to that wait)."""
    out: list = []
    for x in stmts:
        fenced = bool(out) and isinstance(out[-1], AsyncFence) and out[-1].kind == "order"
        if isinstance(x, AsyncWait) and x.queue == "wgmma" and x.deferred and not fenced:
            k = len(out) - 1
            work = False
            while k >= 0 and not isinstance(out[k], (AsyncCommit, AsyncWait)):
                work = work or _is_work(out[k])
                k -= 1
            if work and k >= 0 and isinstance(out[k], AsyncWait) and out[k].queue == "wgmma":
                out.append(AsyncFence("order", x.loc))
        out.append(x)
    return out


def place_async_waits(kernel: ThreadKernel) -> ThreadKernel:
    """The kernel with the waits of asynchronous gemms placed before their first use (see the
    module docstring); kernels without asynchronous gemms are returned unchanged."""
    if not any(isinstance(n, AsyncWait) and n.deferred for n in walk(kernel)):
        return kernel
    return rewrite(kernel, _place)
