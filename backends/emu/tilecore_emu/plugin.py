"""Hook implementations registering `emu:<arch>`: the lowering of the real target, run on the CPU.

`emu:sm_80` answers the facts and passes hooks with whatever the installed backends answer for
`cuda:sm_80` (asked through the plugin manager; emu never imports a GPU backend), so the thread
program it executes is exactly the one the CUDA code generator would render.
"""

from __future__ import annotations

from tilecore.hookspec import hookimpl
from tilecore.target import Target, TargetInfo

# emu arch -> the real target whose lowering it reproduces
REAL_TARGETS = {"sm_80": Target("cuda", "sm_80"), "sm_90": Target("cuda", "sm_90")}


def real_target(target: Target) -> Target:
    """The target whose lowering `emu:<arch>` runs."""
    return REAL_TARGETS[target.arch or "sm_80"]


@hookimpl
def tile_targets():
    """`emu` with archs sm_80 and sm_90; runs anywhere, below the compiled targets for `auto`."""
    return [TargetInfo("emu", "lane-level emulator of the lowered thread program", priority=-10,
                       archs=tuple(REAL_TARGETS), default_arch="sm_80")]


@hookimpl
def tile_target_facts(target):
    """The real target's facts (their `target` stays the real one: lowering hooks ask it)."""
    if target.kind != "emu":
        return None
    from tilecore import plugins
    from tilecore.errors import TileTargetError

    facts = plugins.manager().hook.tile_target_facts(target=real_target(target))
    if facts is None or not facts.lowers_to_threads:
        raise TileTargetError(f"{target} needs the lowering of {real_target(target)}, which no installed "
                              f"backend provides", hint="pip install -e backends/cuda")
    return facts


@hookimpl
def tile_passes(target):
    """The real target's extra passes."""
    if target.kind != "emu":
        return None
    from tilecore import plugins

    groups = plugins.manager().hook.tile_passes(target=real_target(target))
    return [x for g in groups or () for x in (g or ())]


@hookimpl
def tile_build(target, module):
    """An artifact executing the lowered module lane by lane."""
    if target.kind != "emu":
        return None
    from tilecore.emulator.machine import EmuArtifact

    return EmuArtifact(module)


@hookimpl
def tile_tolerance(target, dtype):
    """Tensor-core sums run in a different order than the oracle's: fp16-sized tolerances."""
    if target.kind != "emu":
        return None
    if dtype.is_float and dtype.bits <= 16:
        return (2e-2, 2e-2)
    if dtype.is_float:
        return (1e-4, 1e-4)
    return None
