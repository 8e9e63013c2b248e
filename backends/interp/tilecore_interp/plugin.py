"""Hook implementations registering the `interp` target."""

from __future__ import annotations

from tilecore.hookspec import hookimpl
from tilecore.target import TargetInfo


@hookimpl
def tile_targets():
    """`interp` runs everywhere; lowest priority so `auto` prefers any compiled target."""
    return [TargetInfo("interp", "NumPy interpreter of tile programs (the exact oracle)", priority=0)]


@hookimpl
def tile_build(target, module):
    """Build an interpreter artifact for the tile-level module."""
    if target.kind != "interp":
        return None
    from .runner import InterpArtifact

    return InterpArtifact(module)
