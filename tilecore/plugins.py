"""Backend discovery: the plugin manager, entry points, and the target registry."""

from __future__ import annotations

import functools
from importlib.metadata import entry_points

import pluggy

from . import hookspec
from .errors import TileTargetError
from .target import Target, TargetFacts, TargetInfo

ENTRY_POINT_GROUP = "tilecore.backends"


@functools.lru_cache(maxsize=1)
def manager() -> pluggy.PluginManager:
    """The process-wide plugin manager with every installed backend registered."""
    pm = pluggy.PluginManager(hookspec.PROJECT)
    pm.add_hookspecs(hookspec)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if pm.get_plugin(ep.name) is not None:
            continue
        try:
            plugin = ep.load()
        except Exception as e:  # a broken backend must not take the others down
            import warnings

            warnings.warn(f"tilecore backend {ep.name!r} failed to load: {e}", stacklevel=2)
            continue
        pm.register(plugin, name=ep.name)
    return pm


def register(plugin, name: str | None = None) -> None:
    """Register a backend object at run time (tests, or a vendor prototyping without packaging)."""
    manager().register(plugin, name=name)
    _infos.cache_clear()


def unregister(name: str) -> None:
    """Remove a run-time registered backend."""
    pm = manager()
    plugin = pm.get_plugin(name)
    if plugin is not None:
        pm.unregister(plugin)
    _infos.cache_clear()


@functools.lru_cache(maxsize=1)
def _infos() -> dict[str, TargetInfo]:
    out: dict[str, TargetInfo] = {}
    for group in manager().hook.tile_targets():
        for info in group or ():
            out[info.kind] = info
    return out


def target_infos() -> dict[str, TargetInfo]:
    """Every installed target kind, by name."""
    return dict(_infos())


def targets(runnable_only: bool = False) -> list[str]:
    """The installed target kinds (optionally only those that can run on this machine)."""
    out = []
    for kind, info in sorted(_infos().items(), key=lambda kv: -kv[1].priority):
        if runnable_only and not info.runnable()[0]:
            continue
        out.append(kind)
    return out


def resolve(spec) -> Target:
    """Parse a target string, resolve `auto`, and check that a backend provides it."""
    t = Target.parse(spec)
    infos = _infos()
    if t.kind == "auto":
        best = None
        for info in infos.values():
            if info.runnable()[0] and (best is None or info.priority > best.priority):
                best = info
        if best is None:
            raise TileTargetError("no runnable target is installed",
                                  hint="pip install -e backends/interp")
        return Target(best.kind, best.arch())
    info = infos.get(t.kind)
    if info is None:
        installed = ", ".join(sorted(infos)) or "none"
        raise TileTargetError(f"unknown target {str(t)!r}; installed targets: {installed}",
                              hint="install the backend's package (backends/<name>) or fix the name")
    if t.arch is None and info.default_arch is not None:
        t = Target(t.kind, info.arch())
    if t.arch is not None and info.archs and t.arch not in info.archs:
        raise TileTargetError(f"target {t.kind!r} has no arch {t.arch!r}; known: {', '.join(info.archs)}")
    return t


def facts(target: Target) -> TargetFacts:
    """The facts the owning backend reports; a target with no facts is a plain tile-level one."""
    f = manager().hook.tile_target_facts(target=target)
    return f if f is not None else TargetFacts(target)
