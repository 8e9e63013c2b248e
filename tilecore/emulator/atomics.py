"""Atomic additions of many threads at once, vectorized.

The emulator gives an atomic statement executed by several threads a definite order: thread
after thread, each seeing the sums of the threads before it (the order the value returned by
`atomic_add(..., return_prev=True)` exposes, and the order in which float roundings happen).
Running that order as a Python loop over threads cost ~3 ms per 1024-thread statement (a radix
histogram in a top-k kernel issues thousands), so it is computed array-wise here with the same
result, element for element:

* integers of at most 32 bits: addition wraps modulo 2^bits, so the value a thread finds is the
  address's initial value plus the exclusive prefix sum (in thread order) of the earlier
  threads' values at that address, wrapped once; int64 holds every such sum exactly;
* everything else (floats, whose every addition rounds; 64-bit integers): rounds of updates, the
  r-th round applying each address's r-th thread in thread order, so every address still sees
  its additions one at a time and in order, while one round covers all addresses at once.
"""

from __future__ import annotations

import numpy as np

from .. import semantics as S
from ..dtypes import DType


def atomic_add(store: np.ndarray, off: np.ndarray, v: np.ndarray, lanes: np.ndarray,
               d: DType, op: str = "add") -> np.ndarray:
    """Apply `store[off[t]] += v[t]` for every thread `t` with `lanes[t]`, in thread order,
    with `d`'s arithmetic (integers wrap, floats round after each addition); `op` "max" / "min"
    (T.atomic_max / atomic_min) makes each update `store[off[t]] = op(store[off[t]], v[t])` with
    the semantics' max / min (exact; float NaN propagates), in the same order. Returns, per
    thread (length of `lanes`), the stored value its update found (zero for threads not in
    `lanes`), in `store`'s storage dtype."""
    old = np.zeros(lanes.shape[0], dtype=store.dtype)
    ts = np.nonzero(lanes)[0]
    if ts.size == 0:
        return old
    addr = off[ts]
    order = np.argsort(addr, kind="stable")  # grouped by address, thread order inside a group
    sa, st = addr[order], ts[order]
    first = np.ones(sa.size, dtype=bool)
    first[1:] = sa[1:] != sa[:-1]
    start = np.flatnonzero(first)  # index in the sorted arrays where each address's group starts
    group = np.cumsum(first) - 1   # each sorted entry's group number
    if d.is_int and d.bits <= 32 and op == "add":
        add = np.asarray(v[st]).astype(np.int64)
        incl = np.cumsum(add)
        excl = incl - add - (incl[start] - add[start])[group]  # earlier threads of the group
        base = np.asarray(S.from_storage(store[sa[start]], d)).astype(np.int64)
        old[st] = S.to_storage(S.wrap_int(base[group] + excl, d), d)
        last = np.append(start[1:], sa.size) - 1
        store[sa[start]] = S.to_storage(S.wrap_int(base + excl[last] + add[last], d), d)
        return old
    rank = np.arange(sa.size) - start[group]  # position of each entry within its address
    for r in range(int(rank.max()) + 1):
        sel = rank == r  # at most one entry per address
        a, t = sa[sel], st[sel]
        found = store[a]
        old[t] = found
        cur = S.from_storage(found, d)
        if op != "add":
            val = np.asarray(v[t]).astype(np.int64) if d.is_int else S.round_to(np.asarray(v[t]), d)
            new = S.binop(op, np.asarray(cur).astype(S.compute_np(d)), val, d)
        elif d.is_int:
            new = S.wrap_int(np.asarray(cur).astype(np.int64) + np.asarray(v[t]).astype(np.int64), d)
        else:
            new = S.round_to(cur + S.round_to(np.asarray(v[t]), d), d)
        store[a] = S.to_storage(new, d)
    return old
