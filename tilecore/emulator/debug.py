"""T.print / T.device_assert on the emulator: each active thread in thread order (output
format and order: `tilecore.ir.debug`)."""

from __future__ import annotations

import numpy as np

from ..errors import TileRuntimeError
from ..ir.debug import DeviceAssert, Print, assert_text, emit, format_line


def run_print(block, s: Print, mask: np.ndarray) -> None:
    """Write one line per active thread (block-level code guards it to thread 0)."""
    vals = [np.broadcast_to(np.asarray(block.eval(a, mask)), (block.T,)) for a in s.args]
    dtypes = [a.dtype for a in s.args]
    for t in np.nonzero(mask)[0]:
        emit(format_line(s.fmt, [v[t] for v in vals], dtypes))


def run_assert(block, s: DeviceAssert, mask: np.ndarray) -> None:
    """Raise TileRuntimeError when the condition is false in any active thread."""
    c = np.broadcast_to(np.asarray(block.eval(s.cond, mask), dtype=bool), (block.T,))
    bad = mask & ~c
    if bad.any():
        t = int(np.argmax(bad))
        blk = [int(np.broadcast_to(np.asarray(block.eval(b, mask)), (block.T,))[t]) for b in s.block]
        raise TileRuntimeError(assert_text(s.msg, blk), block.loc,
                               hint="the asserted condition is false here: fix the inputs or the kernel")
