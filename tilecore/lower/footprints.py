"""Footprints of shared-memory accesses for barrier insertion (`tilecore.lower.barrier`):
which elements of a shared buffer each thread touches, tabulated from an access's offset over
every value of the thread index."""

from __future__ import annotations

import numpy as np

from ..ir.expr import Var
from .indexing import try_evaluate


def tab(offset, width: int, tx: Var, threads: int, buf):
    """(elements, threads) an access touches, for offsets computable from the thread index."""
    t = np.arange(threads, dtype=np.int64)
    v = try_evaluate(offset, {id(tx): t})
    if v is None:
        return None
    v = np.asarray(v, dtype=np.int64)
    if v.ndim == 0 and threads > 2:
        # the same elements for every thread (a TMA box, a uniform copy): the last two threads
        # stand for all of them -- `barrier._Footprint` gives the same owners (the last thread's, or
        # "several") and the same conflicts, from 2 * width entries instead of threads * width
        t = t[-2:]
    v = np.broadcast_to(v, t.shape)
    idx = (v[:, None] + np.arange(width)).reshape(-1)
    tid = np.repeat(t, width)
    ok = (idx >= 0) & (idx < buf.shape[0])
    return idx[ok], tid[ok]


def tab_memo(tabs: dict, offset, width: int, tx: Var, threads: int, buf):
    """`tab` through the memo `tabs` (its answer depends on nothing else)."""
    key = (offset, width, buf.shape[0])
    got = tabs.get(key)
    if got is None:
        got = tabs[key] = (tab(offset, width, tx, threads, buf),)
    return got[0]


def tab_desc(spec, group: int, offset, tx: Var, threads: int, buf):
    """(elements, threads) a descriptor operand (wgmma) reads: the whole sub-matrix its
    `MatrixDesc` addresses, read for each group of `group` threads by the group as a whole --
    recorded as read by two of its threads, so that any thread's later write conflicts."""
    t = np.arange(threads, dtype=np.int64)
    v = try_evaluate(offset, {id(tx): t})
    if v is None or spec.desc is None:
        return None
    v = np.broadcast_to(np.asarray(v, dtype=np.int64), (threads,))
    rows, cols = spec.dims
    mn, k = (rows, cols) if spec.name == "A" else (cols, rows)
    idx, tid = [], []
    for g0 in range(0, threads, group):
        el = spec.desc.elements(int(v[g0]), mn, k).reshape(-1)
        for who in (g0, g0 + 1):
            idx.append(el)
            tid.append(np.full(el.size, who, dtype=np.int64))
    idx, tid = np.concatenate(idx), np.concatenate(tid)
    ok = (idx >= 0) & (idx < buf.shape[0])
    return idx[ok], tid[ok]
