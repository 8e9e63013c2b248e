"""Bank conflicts of a lowered kernel's shared-memory accesses, tabulated from the thread IR.

A diagnostic (tests and reports use it; no pass depends on it): every shared-memory access of a
`ThreadKernel` — scalar loads and stores, vector moves, loader intrinsics — is evaluated for all
threads with the thread index bound and every other variable (loop counters, block indices) at
0, split into warps and phases (`line / width` lanes per phase, at most a warp) under the
target's `BankModel`, and given its conflict degree: the most distinct words one bank serves in
one phase (1 = conflict-free; a broadcast of one word is free). Accesses whose offsets depend on
loaded values cannot be tabulated and are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.thread import IntrinsicCall, MemLoad, MemStore, ThreadKernel, VecMove
from ..ir.visit import walk
from .indexing import NotNumeric, evaluate, free_vars
from .smem import BankModel


@dataclass(frozen=True)
class SharedAccess:
    """One shared-memory access site: the buffer, what kind of access, bytes per lane, the
    worst conflict degree over its warps and phases, and the statement's source location."""

    buffer: str
    kind: str
    width: int
    degree: int
    loc: object = None


def _offsets(e, kernel: ThreadKernel):
    env = {id(v): 0 for v in free_vars(e)}
    t = np.arange(kernel.num_threads, dtype=np.int64)
    env[id(kernel.thread_var)] = t
    try:
        v = evaluate(e, env)
    except NotNumeric:
        return None
    return np.broadcast_to(np.asarray(v, dtype=np.int64), t.shape)


def _degree(offs: np.ndarray, itemsize: int, width: int, warp: int, model: BankModel) -> int:
    lanes = max(1, min(warp, model.line // max(width, 1)))
    words = max(1, width // model.bank_bytes)
    worst = 1
    for w0 in range(0, len(offs), warp):
        lane_offs = offs[w0:w0 + warp]
        for p0 in range(0, len(lane_offs), lanes):
            addr = lane_offs[p0:p0 + lanes] * itemsize
            w = np.unique((addr[:, None] // model.bank_bytes + np.arange(words)).ravel())
            worst = max(worst, int(np.bincount(w % model.banks).max()))
    return worst


def shared_accesses(kernel: ThreadKernel, model: BankModel) -> list[SharedAccess]:
    """Every tabulable shared-memory access of `kernel` with its conflict degree."""
    out = []
    loc = None
    for n in walk(kernel.body):
        loc = getattr(n, "loc", None) or loc
        sites = []
        if isinstance(n, MemLoad) and n.buffer.scope == "shared":
            sites.append((n.buffer, "load", n.offset, n.buffer.dtype.itemsize))
        elif isinstance(n, MemStore) and n.buffer.scope == "shared":
            sites.append((n.buffer, "store", n.offset, n.buffer.dtype.itemsize))
        elif isinstance(n, VecMove):
            sides = ((n.src, n.src_offset, "vector load"), (n.dst, n.dst_offset, "vector store"))
            for buf, off, kind in sides:
                if buf.scope == "shared":
                    sites.append((buf, kind, off, n.lanes * buf.dtype.itemsize))
        elif isinstance(n, IntrinsicCall) and n.intrinsic.kind == "ldmatrix":
            ref = n.operands[1]
            width = n.intrinsic.shape[-1] * ref.buffer.dtype.itemsize
            sites.append((ref.buffer, n.intrinsic.name, ref.offset, width))
        for buf, kind, off, width in sites:
            offs = _offsets(off, kernel)
            if offs is None:
                continue
            deg = _degree(offs, buf.dtype.itemsize, width, kernel.warp_size, model)
            out.append(SharedAccess(buf.name, kind, width, deg, loc))
    return out
