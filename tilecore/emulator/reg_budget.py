"""`setmaxnreg` on the emulator (tilecore.ir.reg_budget): a register budget changes no value, so
the emulator only checks what PTX requires of the instruction: `.sync.aligned` over the
warpgroup, i.e. every thread of each warpgroup that executes it executes it together."""

from __future__ import annotations

import numpy as np

from ..errors import TileRuntimeError
from ..ir.thread_level import WARPGROUP


def check_setmaxnreg(machine, mask: np.ndarray) -> None:
    """Raise a located TileRuntimeError unless `mask` covers whole warpgroups of the block."""
    if machine.T % WARPGROUP:
        raise TileRuntimeError(f"T.set_max_nreg needs whole warpgroups of {WARPGROUP} threads; the "
                               f"block has {machine.T}", machine.loc,
                               hint="give T.Kernel a multiple of 128 threads")
    groups = mask.reshape(-1, WARPGROUP)
    if not np.all(groups.all(axis=1) | ~groups.any(axis=1)):
        part = int(np.nonzero(groups.any(axis=1) & ~groups.all(axis=1))[0][0])
        raise TileRuntimeError(f"T.set_max_nreg executed by part of warpgroup {part} (setmaxnreg is "
                               "warpgroup-aligned: its 128 threads execute it together)", machine.loc,
                               hint="branch on whole warpgroups (`if tx < 128:`) before setting the "
                                    "register budget")
