"""Hook implementations registering the `interp` target."""

from __future__ import annotations

from tilecore.hookspec import hookimpl
from tilecore.target import TargetFacts, TargetInfo


@hookimpl
def tile_targets():
    """`interp` runs everywhere; lowest priority so `auto` prefers any compiled target."""
    return [TargetInfo("interp", "NumPy interpreter of tile programs (the exact oracle)", priority=0,
                       sub_byte=True)]


@hookimpl
def tile_target_facts(target):
    """A tile-level target that runs thread-level kernels through the core's lowering and
    emulator (fact `thread_level`, tilecore.lower.thread_exec)."""
    if target.kind != "interp":
        return None
    return TargetFacts(target, extra=(("thread_level", "emulated"),))


@hookimpl
def tile_build(target, module):
    """Build an interpreter artifact for the tile-level module; a thread-level kernel, already
    lowered by the `thread-level` pass, runs on the core's emulator."""
    if target.kind != "interp":
        return None
    from tilecore.ir.thread import find_kernel

    if find_kernel(module.func.body) is not None:
        from tilecore.emulator.machine import EmuArtifact

        return EmuArtifact(module)
    from .runner import InterpArtifact

    return InterpArtifact(module)
