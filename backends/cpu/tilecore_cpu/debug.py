"""T.print and T.device_assert in generated cpu code (format and order: `tilecore.ir.debug`).

A kernel that prints gets two more arguments, `plog_i` (int64: the print site, then integer
arguments) and `plog_f` (float64 arguments), one row per line, `err[5]` counting rows and
`err[6]` set when more than `PRINT_CAPACITY` lines were printed (the rest are dropped, as a GPU
printf buffer drops them). Its blocks run one at a time in the oracle's order (no prange), and
the host writes the lines after the call, before raising any fault. Nothing is recorded after
the first fault (`err[0]`), so output stops at a failing assertion as it does on interp.
A device assertion is a fault site of kind "assert" whose indices are the block's.
"""

from __future__ import annotations

import warnings

import numpy as np

from tilecore.errors import TileRuntimeError, TileWarning
from tilecore.ir.debug import PRINT_CAPACITY, DeviceAssert, Print, assert_text, emit, format_line
from tilecore.ir.visit import walk

from .emit import Fault

LOG_ARGS = ("plog_i", "plog_f")


def log_args(body) -> list[str]:
    """The extra kernel arguments for a launch body: the print log when it prints."""
    return list(LOG_ARGS) if any(isinstance(s, Print) for s in walk(body)) else []


def emit_debug(gen, s) -> None:
    """Emit a Print or DeviceAssert at the generator's current indentation."""
    lines, x = gen.lines, gen.x
    if isinstance(s, DeviceAssert):
        code = gen.faults.add(Fault("assert", s.msg, x.loc, len(s.block)))
        ix = [f"np.int64({x.gen(b)})" for b in s.block[:4]] + ["np.int64(-1)"] * (4 - min(4, len(s.block)))
        lines.add(f"if not ({x.gen(s.cond)}):")
        with lines.indent():
            lines.add(f"oob(err, np.int64({code}), {', '.join(ix)})")  # no literal: one compile
        return
    site = len(gen.print_sites)
    gen.print_sites.append((s.fmt, tuple(a.dtype for a in s.args)))
    lines.add("if err[0] == 0:")
    with lines.indent():
        lines.add("if err[5] < plog_i.shape[0]:")
        with lines.indent():
            lines.add(f"plog_i[err[5], 0] = {site}")
            for k, a in enumerate(s.args):
                if a.dtype.is_int or a.dtype.is_bool:
                    lines.add(f"plog_i[err[5], {k + 1}] = np.int64({x.gen(a)})")
                else:
                    lines.add(f"plog_f[err[5], {k}] = np.float64({x.gen(a)})")
            lines.add("err[5] += 1")
        lines.add("else:")
        with lines.indent():
            lines.add("err[6] = 1")


def new_log(sites) -> tuple[np.ndarray, np.ndarray]:
    """Empty log arrays for a kernel with these print sites."""
    n = max((len(d) for _, d in sites), default=0)
    return (np.zeros((PRINT_CAPACITY, n + 1), np.int64), np.zeros((PRINT_CAPACITY, max(n, 1)), np.float64))


def flush(sites, log: tuple, err: np.ndarray) -> None:
    """Write the recorded lines to stdout, in the order the kernel printed them."""
    ints, floats = log
    for row in range(int(err[5])):
        fmt, dtypes = sites[int(ints[row, 0])]
        vals = [ints[row, k + 1] if d.is_int or d.is_bool else floats[row, k] for k, d in enumerate(dtypes)]
        emit(format_line(fmt, vals, dtypes))
    if err[6]:
        warnings.warn(f"T.print: more than {PRINT_CAPACITY} lines in one kernel call; the rest were "
                      "dropped", TileWarning, stacklevel=3)


def fault_error(f: Fault, idx: list[int]) -> TileRuntimeError:
    """The TileRuntimeError of a failed device assertion (`f.buffer` holds its message)."""
    return TileRuntimeError(assert_text(f.buffer, idx[:f.rank]), f.loc,
                            hint="the asserted condition is false here: fix the inputs or the kernel")
