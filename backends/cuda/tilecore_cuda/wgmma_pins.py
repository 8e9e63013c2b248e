"""Which wgmma register arrays each `wgmma.fence` / wgmma wait has to pin (render_wgmma.py).

The renderer passes registers a wgmma reads or writes through empty `asm volatile` statements
at its fence and at the wait retiring it, so the compiler keeps ordinary accesses of them on
their side (it believes the accumulator is written by the wgmma statement itself). Pinning
*every* wgmma array of the kernel at every fence and wait is correct but keeps all of them
live across the whole kernel: FlashAttention's backward (five gemms, S^T, dP^T, dV, dK, dQ
accumulators) then needed 224 registers at once and ptxas serialized every wgmma (C7512,
`WARPGROUP.DEPBAR` after each HGMMA). This analysis narrows each pin to the arrays whose
ordering that statement actually provides:

- a fence pins the register operands of the wgmma calls after it up to the next
  `wait_group 0` (the group it opens and any issued behind it before that wait: their
  registers are materialized before the first of the groups in flight, so ptxas never has to
  write them while a wgmma is in flight, which made it inject waits (C7517) and serialize);
- a wait pins the register operands of every wgmma call committed since the last
  `wait_group 0` before it in program order, and, inside a loop, those of the wgmma calls of
  the innermost enclosing loop's body after its last `wait_group 0` (a group committed at the
  end of one iteration is retired by a wait in the next); a `wait_group n` that follows more
  than n groups committed since the last `wait_group 0` pins only the older groups it retires
  (the n newest stay in flight: pinning them would make ptxas wait for them as well).

A statement for which this finds nothing (an unusual placement) keeps the old rule: pin all.
"""

from __future__ import annotations

from tilecore.ir.stmt import For
from tilecore.ir.thread import AsyncCommit, AsyncFence, AsyncWait, IntrinsicCall
from tilecore.ir.visit import children


def _reg_buffers(call: IntrinsicCall) -> list:
    """The register-space buffers a wgmma call names (accumulator, A fragment)."""
    return [ref.buffer for spec, ref in zip(call.intrinsic.operands, call.operands) if spec.space == "reg"]


def _is_wgmma(n) -> bool:
    return isinstance(n, IntrinsicCall) and n.intrinsic.kind == "wgmma"


def _events(node, loops: tuple, out: list) -> None:
    """Program-order list of (node, innermost enclosing For or None) for the nodes that matter."""
    if _is_wgmma(node) or isinstance(node, (AsyncFence, AsyncCommit, AsyncWait)):
        out.append((node, loops[-1] if loops else None))
        return
    inner = loops + (node,) if isinstance(node, For) else loops
    for c in children(node):
        _events(c, inner, out)


def wgmma_pin_sets(body) -> tuple[dict[int, list], list]:
    """({id(fence or wait statement): buffers to pin}, every wgmma register buffer). A
    statement object reached twice (a shared node) pins the union of both places' sets."""
    events: list = []
    _events(body, (), events)
    everything: dict[int, object] = {}
    loop_regs: dict[int, dict[int, object]] = {}
    for n, _ in events:
        if _is_wgmma(n):
            for b in _reg_buffers(n):
                everything[id(b)] = b
    for _, loop in events:  # each innermost loop's carried wgmma buffers, from its own subtree
        if loop is not None and id(loop) not in loop_regs:
            regs: dict[int, object] = {}
            sub: list = []
            _events(loop.body, (), sub)
            for m, _ in sub:
                if isinstance(m, AsyncWait) and m.queue == "wgmma" and m.pending == 0:
                    regs = {}  # retired inside the iteration: not carried to the next
                elif _is_wgmma(m):
                    for b in _reg_buffers(m):
                        regs[id(b)] = b
            loop_regs[id(loop)] = regs
    pins: dict[int, dict[int, object]] = {}
    since_wait0: dict[int, object] = {}
    groups: list[dict[int, object]] = []  # committed since the last wait_group 0, oldest first
    open_group: dict[int, object] = {}
    for i, (n, loop) in enumerate(events):
        if _is_wgmma(n):
            for b in _reg_buffers(n):
                since_wait0[id(b)] = b
                open_group[id(b)] = b
        elif isinstance(n, AsyncCommit) and n.queue == "wgmma":
            groups.append(open_group)
            open_group = {}
        elif isinstance(n, AsyncFence) and n.kind == "wgmma":
            group: dict[int, object] = {}
            for m, _ in events[i + 1:]:
                if isinstance(m, AsyncWait) and m.queue == "wgmma" and m.pending == 0:
                    break
                if _is_wgmma(m):
                    for b in _reg_buffers(m):
                        group[id(b)] = b
            pins.setdefault(id(n), {}).update(group or everything)
        elif isinstance(n, AsyncWait) and n.queue == "wgmma":
            if 0 < n.pending < len(groups):
                # `wait_group n` after more than n groups: only the older ones are retired; the
                # n newest stay in flight, and pinning their registers here would make ptxas
                # wait for them too (FlashAttention's softmax beside P V: wgmma_async)
                want = {}
                for g in groups[:-n.pending]:
                    want.update(g)
                groups = groups[-n.pending:]
            else:
                want = dict(since_wait0)
                if loop is not None:
                    want.update(loop_regs[id(loop)])
            pins.setdefault(id(n), {}).update(want or everything)
            if n.pending == 0:
                since_wait0 = {}
                groups = []
    return {k: list(v.values()) for k, v in pins.items()}, list(everything.values())
