"""Uninitialized-read detection: a boolean shadow array per shared/fragment/local buffer.

Poisoning (NaN, or the pattern conformance picks) makes a read of memory nothing wrote show up in
the result, but only as a wrong value far from its cause: an accumulator a gemm adds into
without `T.clear` gives all-NaN outputs and no word. With the check on, every write marks its
elements and every read of an element no write of this block marked raises a TileRuntimeError
naming the buffer, the element and the statement's line.

On when the environment variable TILECORE_CHECK_UNINIT is set to anything but "" / "0" /
"false" when the kernel is built (the test suites and conformance set it); off, nothing is
tracked and nothing costs.
"""

from __future__ import annotations

import os

import numpy as np

from tilecore.errors import TileRuntimeError

ENV = "TILECORE_CHECK_UNINIT"


def enabled() -> bool:
    """Whether kernels built now track initialization (env TILECORE_CHECK_UNINIT)."""
    return os.environ.get(ENV, "") not in ("", "0", "false")


def fresh(buf) -> np.ndarray:
    """The shadow of `buf` at the start of a block: nothing written."""
    return np.zeros(buf.static_shape, dtype=bool)


def _error(buf, where, loc) -> TileRuntimeError:
    return TileRuntimeError(
        f"read of uninitialized {buf.scope} buffer {buf.name}{tuple(buf.shape)} at index {where}: "
        "no statement of this block wrote it", loc,
        hint=f"initialize {buf.name} before reading it (T.clear / T.fill / T.copy into it, or "
        "gemm(..., clear_accum=True) for an accumulator)")


def check_all(sh: np.ndarray, buf, loc) -> None:
    """A read of the whole buffer."""
    if not sh.all():
        raise _error(buf, tuple(int(i) for i in np.argwhere(~sh)[0]), loc)


def check_box(sh: np.ndarray, sl: tuple, buf, loc) -> None:
    """A read of the box `sl` (a tuple of slices)."""
    view = sh[sl]
    if not view.all():
        k = np.argwhere(~view)[0]
        raise _error(buf, tuple(int(s.start + i) for s, i in zip(sl, k)), loc)


def check_index(sh: np.ndarray, idx: tuple, buf, loc, mask=None) -> None:
    """A read at (possibly broadcast) integer indices `idx`, restricted to `mask`."""
    bad = ~np.asarray(sh[idx])
    if mask is not None:
        bad = bad & mask
    if np.any(bad):
        if np.ndim(bad) == 0:
            raise _error(buf, tuple(int(i) for i in idx), loc)
        k = tuple(np.argwhere(bad)[0])
        raise _error(buf, tuple(int(np.broadcast_to(i, bad.shape)[k]) for i in idx), loc)


def mark_box(sh: np.ndarray, sl: tuple, mask=None) -> None:
    """The box `sl` is written (where `mask`, broadcastable to the box)."""
    if mask is None:
        sh[sl] = True
    else:
        view = sh[sl]  # basic slicing: a view, so the assignment lands in `sh`
        view[np.broadcast_to(mask, view.shape)] = True


def box_ok(sh: np.ndarray, sl: tuple, shape, mask) -> bool:
    """Whether every element of the box `sl`, viewed as `shape`, that `mask` selects is written
    (the fast load path; on False it falls back to `check_index`, which names the element)."""
    v = sh[sl].reshape(shape)
    return bool(v.all() if mask is None else (v | ~np.asarray(mask)).all())


def register(func, slots) -> None:
    """Give every shared/fragment/local buffer of `func` a shadow slot (when enabled)."""
    from tilecore.ir.stmt import KernelLaunch
    from tilecore.ir.visit import walk

    if not enabled():
        return
    for n in walk(func.body):
        if isinstance(n, KernelLaunch):
            for b in n.allocs:
                if b.static_shape is not None:
                    slots.shadow[id(b)] = slots(("shadow", b))
