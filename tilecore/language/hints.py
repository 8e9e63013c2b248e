"""GPU scheduling hints of TileLang that tilecore accepts without applying, each warned once per
source line with what was ignored and why (issue 14, item 8). A hint here never changes a value:
it asks for a schedule, a register split or a copy engine, which tilecore chooses itself.

- `T.disable_warp_group_reg_alloc()`, `T.no_set_max_nreg()`: tilecore sets no register limits;
- `T.annotate_producer_reg_dealloc(n)`, `T.annotate_consumer_reg_alloc(n)`: likewise;
- `T.Pipelined(order=, stage=, group=, sync=)`: see `ops.Pipelined`;
- `T.copy(disable_tma=True)`, `T.gemm(k_pack=, wg_wait=N>0)`, `T.atomic_add(use_tma=)`: the
  lowering picks the copy engine, operand packing and wgmma waits (see the callers);
  `T.gemm(wg_wait=-1)` is honoured (an asynchronous gemm: tilecore.lower.wgmma_async).
"""

from __future__ import annotations

import warnings

from ..errors import TileConfigWarning
from .builder import builtin, current

_told: set = set()


def ignored_hint(what: str, why: str) -> None:
    """Warn once per (line, hint) that `what` is accepted but not applied, because `why`."""
    try:
        loc = current().loc
    except Exception:  # noqa: BLE001 - outside a kernel build there is no line to name
        loc = None
    key = (loc, what)
    if key in _told:
        return
    _told.add(key)
    file, line = (loc.file, loc.line) if loc is not None else ("<tilecore>", 0)
    warnings.warn_explicit(f"{what} is accepted but not applied: {why}", TileConfigWarning, file, line)


_REGS = "tilecore sets no per-warpgroup register limits (setmaxnreg); ptxas allocates registers"


@builtin
def disable_warp_group_reg_alloc():
    """Accepted, not applied (module docstring)."""
    ignored_hint("T.disable_warp_group_reg_alloc()", _REGS)


@builtin
def no_set_max_nreg():
    """Accepted, not applied (module docstring)."""
    ignored_hint("T.no_set_max_nreg()", _REGS)


@builtin
def annotate_producer_reg_dealloc(reg_count=24):
    """Accepted, not applied (module docstring)."""
    ignored_hint("T.annotate_producer_reg_dealloc()", _REGS)


@builtin
def annotate_consumer_reg_alloc(reg_count=240):
    """Accepted, not applied (module docstring)."""
    ignored_hint("T.annotate_consumer_reg_alloc()", _REGS)


__all__ = ["ignored_hint", "disable_warp_group_reg_alloc", "no_set_max_nreg",
           "annotate_producer_reg_dealloc", "annotate_consumer_reg_alloc"]
