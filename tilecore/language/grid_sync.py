"""`T.sync_grid()` in kernels (tilecore.ir.grid_sync): a barrier over the whole grid."""

from __future__ import annotations

from ..errors import TileSyntaxError
from ..ir.grid_sync import GridSync
from .builder import builtin, current


@builtin
def sync_grid() -> None:
    """Every block of the grid reaches this point before any block goes on (TileLang's grid
    sync). Only at the top of a kernel body; no block state crosses it (see ir/grid_sync.py)."""
    b = current()
    if b.kernel is None:
        raise TileSyntaxError("T.sync_grid() must be inside `with T.Kernel(...)`", b.loc,
                              hint="move it into the kernel body")
    if b.parallel_depth:
        raise TileSyntaxError("T.sync_grid() cannot be used inside T.Parallel", b.loc,
                              hint="move it to the kernel body, between its loops")
    b.emit(GridSync(b.loc))


@builtin
def sync_global() -> None:
    """TileLang's other spelling of the grid-wide barrier: `T.sync_grid()`."""
    sync_grid()
