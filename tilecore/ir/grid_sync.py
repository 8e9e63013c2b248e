"""`T.sync_grid()`: a barrier over every block of the grid (TileLang's cooperative-launch sync).

The node stands at the top of a kernel body (at both IR levels) and splits it into *phases*:
every block finishes phase i before any block starts phase i + 1, so global memory written in
one phase is visible to every block in the next. Targets run the phases one after another over
the whole grid (`phases`); a block keeps no state across a sync — its shared, fragment and local
buffers and its named values start afresh — which `check_grid_syncs` enforces at build time: a
buffer or value used on both sides of a sync is a located error (TileLang would keep it live,
which needs all blocks resident at once: a cooperative launch no tilecore target makes yet).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SourceLoc, TileSyntaxError
from .buffer import Buffer
from .expr import Var
from .stmt import LetStmt, SeqStmt, Stmt
from .visit import walk


@dataclass(frozen=True)
class GridSync(Stmt):
    """Every block of the grid reaches this point before any goes on."""

    loc: SourceLoc | None = None


def _flat(body) -> list:
    if isinstance(body, SeqStmt):
        return [x for s in body.stmts for x in _flat(s)]
    return [body]


def phases(body) -> list[list]:
    """The top-level statements of a kernel body, split at its GridSyncs (one list: none).
    Each phase after the first starts with the top-level LetStmts of the phases before it:
    lowering names block-index arithmetic there (e.g. a rasterized block order) that every
    phase uses, and a block recomputes it as it starts a phase."""
    out: list[list] = [[]]
    lets: list = []
    for s in _flat(body):
        if isinstance(s, GridSync):
            out.append(list(lets))
        else:
            out[-1].append(s)
            if isinstance(s, LetStmt):
                lets.append(s)
    return out


def has_grid_sync(body) -> bool:
    """Whether a kernel body holds a GridSync at its top level."""
    return any(isinstance(s, GridSync) for s in _flat(body))


def check_grid_syncs(launch) -> None:
    """Raise when a GridSync is not at the top of the kernel body, or when a buffer of the
    kernel or a value named before a sync is used after it (module docstring)."""
    top = _flat(launch.body)
    for s in top:
        for n in walk(s):
            if isinstance(n, GridSync) and n is not s:
                raise TileSyntaxError(
                    "T.sync_grid() must be a statement of the kernel body itself, not inside a "
                    "loop or branch", n.loc,
                    hint="every block must reach it: move it out of the `for` / `if`")
    parts = phases(launch.body)
    if len(parts) == 1:
        return
    mine = {id(b) for b in launch.allocs}
    seen: dict[int, int] = {}  # id(buffer or let var) -> the phase that first used it
    names: dict[int, str] = {}
    for i, part in enumerate(parts):
        for s in part:
            for n in walk(s):
                key = None
                if isinstance(n, Buffer) and id(n) in mine:
                    key = id(n)
                elif isinstance(n, Var) and id(n) in seen or isinstance(n, LetStmt):
                    key = id(n.var) if isinstance(n, LetStmt) else id(n)
                if key is None:
                    continue
                names.setdefault(key, n.var.name if isinstance(n, LetStmt) else n.name)
                first = seen.setdefault(key, i)
                if first != i:
                    raise TileSyntaxError(
                        f"{names[key]} is used on both sides of T.sync_grid(); a block keeps no "
                        "buffer or value across a grid sync on tilecore's targets", s.loc,
                        hint="pass the data through a global tensor (write it before the sync, "
                        "read it after), or recompute the value after the sync")
