"""Uninitialized reads in the emulator: a read of a register or shared element no write (or
landed asynchronous copy) of this block has set is reported, naming the buffer and the line.

Shared memory needs no extra state: its race tracker already remembers each element's last
writer (-1: never written). Registers get a boolean shadow per (thread, element). On when the
environment variable TILECORE_CHECK_UNINIT is set (the test suites and conformance set it), as
in the interpreter (`tilecore_interp.shadow`).
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import TileRuntimeError


def enabled() -> bool:
    """Whether uninitialized reads are reported (env TILECORE_CHECK_UNINIT)."""
    return os.environ.get("TILECORE_CHECK_UNINIT", "") not in ("", "0", "false")


def register_shadows(registers, threads: int) -> dict:
    """A fresh all-unwritten shadow for every register array of a block."""
    return {id(b): np.zeros((threads, b.shape[0]), dtype=bool) for b in registers}


def check_read(blk, buf, idx: np.ndarray, lanes: np.ndarray) -> None:
    """Raise when an active lane reads an element nothing wrote; `idx` is (T, width)."""
    if buf.scope == "local":
        seen = blk.reg_init[id(buf)][blk.tid[:, None], idx]
    elif buf.scope == "shared":
        tr = blk.trackers[id(buf)]
        seen = (tr.writer[idx] >= 0) | (tr.pending[idx] >= 0)
    else:
        return
    bad = ~seen & lanes[:, None]
    if bad.any():
        t, k = (int(x) for x in np.argwhere(bad)[0])
        report(blk, buf, t, int(idx[t, k]))


def check_register(blk, buf, element: int, lanes: np.ndarray) -> None:
    """`check_read` of register element `element` read by every active lane."""
    bad = ~blk.reg_init[id(buf)][:, element] & lanes
    if bad.any():
        report(blk, buf, int(np.argmax(bad)), element)


def report(blk, buf, t: int, element: int) -> None:
    """Raise the uninitialized-read error for thread `t` reading `element` of `buf`."""
    where = "register" if buf.scope == "local" else "shared"
    raise TileRuntimeError(
        f"read of uninitialized {where} buffer {buf.name}: thread {t} reads element "
        f"{element}, which no statement of this block wrote", blk.loc,
        hint=f"initialize {buf.name} before reading it (T.clear / T.fill / T.copy into it, "
        "or gemm(..., clear_accum=True) for an accumulator)")


def mark_write(blk, buf, t: np.ndarray, idx: np.ndarray) -> None:
    """Threads `t` wrote register elements `idx` ((len(t), width))."""
    if buf.scope == "local":
        blk.reg_init[id(buf)][t[:, None], idx] = True
