"""T.print and T.device_assert in the oracle (output format: `tilecore.ir.debug`)."""

from __future__ import annotations

import numpy as np

from tilecore.errors import TileRuntimeError
from tilecore.ir.debug import DeviceAssert, Print, assert_text, emit, format_line

from .exprs import compile_expr


def compile_print(s: Print, slots):
    """A closure writing the statement's line (block-level code: every argument is a scalar)."""
    fns = [compile_expr(a, slots, s.loc) for a in s.args]
    dtypes = [a.dtype for a in s.args]

    def run(env, mask):
        emit(format_line(s.fmt, [np.asarray(f(env, mask)).reshape(-1)[0] for f in fns], dtypes))

    return run


def compile_assert(s: DeviceAssert, slots):
    """A closure raising TileRuntimeError when the condition is false for any active lane."""
    fc = compile_expr(s.cond, slots, s.loc)
    blk = [compile_expr(b, slots, s.loc) for b in s.block]

    def run(env, mask):
        c = np.asarray(fc(env, mask))
        bad = ~c.astype(bool)
        if mask is not None:
            bad = bad & mask
        if bad.any():
            raise TileRuntimeError(assert_text(s.msg, [int(f(env, None)) for f in blk]), s.loc,
                                   hint="the asserted condition is false here: fix the inputs or the kernel")

    return run
