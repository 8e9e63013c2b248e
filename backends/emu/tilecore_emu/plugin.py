"""Hook implementations registering `emu:<target>`: any installed lowering, run on the CPU.

`emu:<kind>:<arch>` (e.g. ``emu:cuda:sm_80``) names the lowering target whose thread program it
executes; the core then asks that target's backend for facts, passes and tensorization
(`tile_lowering_target`), so the program emu runs is exactly the one that backend's code
generator would render. Emu knows no vendor: a short form ``emu:<arch>`` (``emu:sm_80``) or
``emu:<kind>`` picks the one installed thread-lowering target kind that declares that arch in
its TargetInfo (or is that kind), and is an error when none or several do.
"""

from __future__ import annotations

from tilecore.hookspec import hookimpl
from tilecore.target import Target, TargetInfo


def _lowering_kinds() -> dict:
    """Installed target kinds (other than emu) whose facts lower to threads: kind -> TargetInfo."""
    from tilecore import plugins

    out = {}
    for kind, info in plugins.target_infos().items():
        if kind == "emu":
            continue
        arch = info.archs[0] if info.archs else None
        if plugins.facts(Target(kind, arch)).lowers_to_threads:
            out[kind] = info
    return out


def _default_arch() -> str:
    """`<kind>:<arch>` of the highest-priority thread-lowering target (its first listed arch, so
    no device is probed); "none" when there is none (naming it then explains why)."""
    kinds = _lowering_kinds()
    if not kinds:
        return "none"
    kind, info = max(kinds.items(), key=lambda kv: kv[1].priority)
    return f"{kind}:{info.archs[0]}" if info.archs else kind


def real_target(target: Target) -> Target:
    """The lowering target `emu:<spec>` runs (a TileTargetError when it names none)."""
    from tilecore import plugins
    from tilecore.errors import TileTargetError

    spec = target.arch or _default_arch()
    kinds = _lowering_kinds()
    if ":" in spec or spec in kinds or spec in plugins.target_infos():
        real = plugins.resolve(spec)
        if real.kind == "emu" or real.kind not in kinds:
            installed = ", ".join(sorted(kinds)) or "none"
            raise TileTargetError(f"{target}: {real} does not lower to threads, so there is nothing "
                                  "to emulate", hint=f"thread-lowering targets installed: {installed}")
        return real
    owners = sorted(k for k, info in kinds.items() if spec in info.archs)
    if len(owners) == 1:
        return Target(owners[0], spec)
    known = ", ".join(f"{k}:{a}" for k, info in sorted(kinds.items()) for a in info.archs) or "none"
    if not owners:
        raise TileTargetError(f"no installed thread-lowering backend has arch {spec!r} for {target}",
                              hint=f"known: {known} (pip install -e backends/<name> for others)")
    raise TileTargetError(f"{target} is ambiguous: {', '.join(owners)} all have arch {spec!r}",
                          hint=f"name the lowering target, e.g. emu:{owners[0]}:{spec}")


@hookimpl
def tile_targets():
    """`emu` (any arch: see the module docstring); runs anywhere, below the compiled targets for
    `auto`."""
    return [TargetInfo("emu", "lane-level emulator of any installed thread lowering", priority=-10,
                       default_arch=_default_arch, sub_byte=True)]


@hookimpl
def tile_lowering_target(target):
    """`emu:<spec>` runs the lowering of the target `<spec>` names."""
    if target.kind != "emu":
        return None
    return real_target(target)


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
