"""The hooks of the skeleton backend `mydev` (see `tilecore.hookspec` for every hook).

Three hooks make a working target: `tile_targets` names it, `tile_target_facts` describes the
machine the core's lowering plans for, and `tile_build` turns the lowered module into something
callable. Here the "device" is the core's lane-level emulator, so the skeleton runs anywhere;
a real backend renders the thread IR (subclass `tilecore.codegen.gpu` for a C-like language),
compiles it and launches it in its artifact's `run`.
"""

from __future__ import annotations

from tilecore.hookspec import hookimpl
from tilecore.target import TargetFacts, TargetInfo

KIND = "mydev"


@hookimpl
def tile_targets():
    """One target kind, `mydev`, with no archs; runnable everywhere (it runs on the emulator)."""
    return [TargetInfo(KIND, "skeleton backend: thread lowering on the core's emulator", priority=-90)]


@hookimpl
def tile_target_facts(target):
    """Warps of 32 lanes, 1024 threads, 48 KiB of shared memory, 16-byte vector accesses."""
    if target.kind != KIND:
        return None
    return TargetFacts(target=target, lowers_to_threads=True, warp_size=32, max_threads=1024,
                       shared_memory_bytes=48 * 1024, vector_bytes=16)


@hookimpl
def tile_build(target, module):
    """The artifact: here the emulator's, which executes the lowered thread program."""
    if target.kind != KIND:
        return None
    from tilecore.emulator.machine import EmuArtifact

    return EmuArtifact(module)
