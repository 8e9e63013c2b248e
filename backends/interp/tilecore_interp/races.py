"""Write-write races in the interpreter: two iterations of one T.Parallel loop storing
different values into one element. On a GPU the iterations are threads and which value
survives depends on their schedule; NumPy's fancy-index assignment would silently keep the
last one. (Iterations storing one same value are accepted: every schedule gives that value.)
"""

from __future__ import annotations

import numpy as np

from tilecore.errors import TileRuntimeError


def check_unique_writes(buf, idx: tuple, vals: np.ndarray, loc) -> None:
    """Raise when two of the flattened writes `idx` (index arrays) -> `vals` hit one element
    with different values."""
    if len(vals) < 2:
        return
    arrs = tuple(np.asarray(i, dtype=np.int64).reshape(-1) for i in idx)
    flat = np.ravel_multi_index(arrs, tuple(int(a.max()) + 1 for a in arrs))
    order = np.argsort(flat, kind="stable")
    f, v = flat[order], np.asarray(vals).reshape(-1)[order]
    same = f[1:] == f[:-1]
    if not same.any():
        return
    equal = v[1:] == v[:-1]
    if v.dtype.kind == "f":
        equal = equal | (np.isnan(v[1:]) & np.isnan(v[:-1]))
    differ = same & ~equal
    if differ.any():
        k = int(np.argmax(differ))
        at = tuple(int(a[order][k]) for a in arrs)
        raise TileRuntimeError(
            f"write-write race on {buf.scope} buffer {buf.name}: two iterations of T.Parallel store "
            f"different values ({v[k].item()!r} and {v[k + 1].item()!r}) into element {at}", loc,
            hint="make the index cover every T.Parallel variable (one element per iteration), or "
            "combine the values explicitly (a reduction, T.atomic_add)")
