"""`T.view(buf, dtype=...)` on the oracle (tilecore.ir.aliases): a NumPy view of the base's bytes.

The base is one C-contiguous array per block, so its bytes seen as the view's dtype and shape
(`base.reshape(-1).view(uint8)[:n].view(dtype)`, n = all of them) share its storage: a write through one
is read through the other, bit for bit. Uninitialized-read tracking (`shadow`): a view whose
dtype has the base's item size shares the base's shadow the same way (an element is written
whichever name wrote it); with another item size one shadow element would cover parts of
several of the other's, so neither buffer is tracked (`untrack`) rather than report reads of
bytes the other name wrote.
"""

from __future__ import annotations

import numpy as np

from tilecore.ir.aliases import BufferAlias
from tilecore.ir.visit import walk


def byte_view(base: np.ndarray, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """The first bytes of contiguous `base` as an array of `shape` and `dtype` (no copy)."""
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return base.reshape(-1).view(np.uint8)[:n].view(dtype).reshape(shape)


def untrack(func, slots) -> None:
    """Give views of the base's item size a shadow slot; drop the shadows of bases and views
    of another item size (see the module docstring). Call after `shadow.register`."""
    for n in walk(func.body):
        if not isinstance(n, BufferAlias) or id(n.base) not in slots.shadow:
            continue
        if n.buffer.dtype.itemsize == n.base.dtype.itemsize:
            slots.shadow[id(n.buffer)] = slots(("shadow", n.buffer))
        else:
            del slots.shadow[id(n.base)]


def compile_bind(s: BufferAlias, slots):
    """The closure binding the view's slot (and its shadow's, when tracked) each time it runs."""
    slot, bslot = slots(s.buffer), slots(s.base)
    shape, np_dtype = s.buffer.static_shape, s.buffer.dtype.np
    sh, bsh = slots.shadow.get(id(s.buffer)), slots.shadow.get(id(s.base))

    def bind(env, mask):
        env[slot] = byte_view(env[bslot], shape, np_dtype)
        if sh is not None:
            env[sh] = env[bsh].reshape(-1)[: int(np.prod(shape))].reshape(shape)

    return bind
