"""The one ordered pass list, for every target.

Tile-level passes run for every target. Thread-level lowering passes (added to CORE_PASSES by
the lowering modules) carry a `when` predicate on TargetFacts (`lowers_to_threads`), so GPU-like
targets share one list instead of copying it per target. Backends add passes only at named
anchors (`before:<name>` / `after:<name>`) through the `tile_passes` hook.
"""

from __future__ import annotations

import os
import sys

from ..errors import TileInternalError
from ..ir.module import Module
from ..target import TargetFacts
from .base import Pass
from .simplify import simplify, verify_pass

CORE_PASSES: list[Pass] = [verify_pass, simplify]


def _lowering_passes() -> list[Pass]:
    """The thread-level lowering passes (imported on first compile, keeping `import tilecore`
    light; a broken import must fail loudly rather than silently drop lowering)."""
    from ..lower import LOWERING_PASSES

    return list(LOWERING_PASSES)


def build_pass_list(facts: TargetFacts, extra: list | None = None) -> list[Pass]:
    """Core passes (+ lowering), with backend passes inserted at their anchors."""
    passes = [p for p in CORE_PASSES + _lowering_passes()]
    for anchor, p in extra or ():
        where, _, name = anchor.partition(":")
        idx = next((i for i, q in enumerate(passes) if q.name == name), None)
        if idx is None or where not in ("before", "after"):
            raise TileInternalError(f"pass {p.name!r} names unknown anchor {anchor!r}")
        passes.insert(idx if where == "before" else idx + 1, p)
    return [p for p in passes if p.applies(facts)]


def run_pipeline(module: Module, facts: TargetFacts, extra: list | None = None) -> list[tuple[str, Module]]:
    """Run every applicable pass; returns [(stage name, module)] starting with 'input'.

    Set TILECORE_DUMP_IR=1 to print every stage to stderr, or to a directory path to write one
    file per stage there.
    """
    stages = [("input", module)]
    dump = os.environ.get("TILECORE_DUMP_IR", "")
    for i, p in enumerate(build_pass_list(facts, extra)):
        module = p(module, facts)
        stages.append((p.name, module))
        if dump:
            _dump(dump, i, p.name, module)
    return stages


def render(module: Module) -> str:
    """Printable text of a module at any stage (tile IR as source; thread IR via its printer)."""
    printer = module.attr("printer")
    if printer is not None:
        return printer(module)
    return module.func.script()


def _dump(dest: str, index: int, name: str, module: Module) -> None:
    text = render(module)
    if dest in ("1", "true", "stderr"):
        print(f"# ---- tilecore IR after pass {index}: {name}\n{text}", file=sys.stderr)
        return
    os.makedirs(dest, exist_ok=True)
    path = os.path.join(dest, f"{module.func.name}.{index:02d}.{name}.txt")
    with open(path, "w") as f:
        f.write(text)
