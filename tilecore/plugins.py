"""Backend discovery: the plugin manager, entry points, and the target registry."""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys

import pluggy

from . import hookspec
from .errors import TileInternalError, TileTargetError
from .target import Target, TargetDesc, TargetFacts, TargetInfo

# tilecore.contract (NumPy, ml_dtypes) and tilecore.options are imported where used: discovering
# targets (`targets()`, `python -m tilecore targets`) must stay a fraction of a second

ENTRY_POINT_GROUP = "tilecore.backends"


@functools.lru_cache(maxsize=1)
def manager() -> pluggy.PluginManager:
    """The process-wide plugin manager with every installed backend registered."""
    pm = pluggy.PluginManager(hookspec.PROJECT)
    pm.add_hookspecs(hookspec)
    for name, value in backend_entry_points():
        if pm.get_plugin(name) is not None:
            continue
        try:
            plugin = _load(value)
        except Exception as e:  # a broken backend must not take the others down
            import warnings

            warnings.warn(f"tilecore backend {name!r} failed to load: {e}", stacklevel=2)
            continue
        pm.register(plugin, name=name)
    return pm


_EP_CACHE_FORMAT = "entry-points-1"
_EP_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?(\[.*\])?\s*$")


def backend_entry_points() -> list[tuple[str, str]]:
    """[(name, "module[:attr]")] of the `tilecore.backends` entry points of the installed
    packages, as `importlib.metadata.entry_points` lists them.

    Scanning every installed package's metadata costs 10-35 ms a process (importlib.metadata
    and its imports included), so the answer is remembered in the tilecore cache under
    `sys.path`, stamped with the modification times of the `sys.path` directories (installing
    or removing a package adds or removes a metadata directory in one of them) and of the
    metadata files that declared backends (an egg-info edited in place); any change rescans."""
    from . import cache

    store = cache.Store("plugins")
    key = cache.digest(_EP_CACHE_FORMAT, sys.version, *sys.path)
    stamps = _stamps(sys.path)
    got = store.get_json(key)
    if (isinstance(got, dict) and got.get("stamps") == stamps
            and got.get("files") == _stamps(f for f, _ in got.get("files", ()))):
        return [(str(n), str(v)) for n, v in got.get("entry_points", ())]
    from importlib.metadata import entry_points

    found, files = [], set()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.append((ep.name, ep.value))
        where = getattr(getattr(ep, "dist", None), "_path", None)  # PathDistribution's directory
        if where is None:
            return found  # metadata from a finder the stamps cannot follow: never remembered
        files.add(os.path.join(str(where), "entry_points.txt"))
    store.put_json(key, {"stamps": stamps, "files": _stamps(sorted(files)),
                         "entry_points": [list(e) for e in found]})
    return found


def _stamps(paths) -> list:
    """[[path, mtime_ns]] of `paths` (None for one that does not exist)."""
    out = []
    for p in paths:
        try:
            out.append([str(p), os.stat(p or ".").st_mtime_ns])
        except OSError:
            out.append([str(p), None])
    return out


def _load(value: str):
    """The object an entry point's value names: `module` or `module:attr.path`."""
    m = _EP_VALUE.match(value)
    if m is None:
        raise ValueError(f"malformed entry point {value!r}")
    obj = importlib.import_module(m.group("module"))
    for part in (m.group("attr") or "").split(".") if m.group("attr") else ():
        obj = getattr(obj, part)
    return obj


def register(plugin, name: str | None = None) -> None:
    """Register a backend object at run time (tests, or a vendor prototyping without packaging).

    Raises TileTargetError (and registers nothing) when it claims a target kind that an
    installed backend already provides."""
    pm = manager()
    pm.register(plugin, name=name)
    _infos.cache_clear()
    try:
        _infos()
    except TileTargetError:
        pm.unregister(plugin)
        _infos.cache_clear()
        raise


def unregister(name: str) -> None:
    """Remove a run-time registered backend."""
    pm = manager()
    plugin = pm.get_plugin(name)
    if plugin is not None:
        pm.unregister(plugin)
    _infos.cache_clear()


@functools.lru_cache(maxsize=1)
def _infos() -> dict[str, TargetInfo]:
    """Every declared target kind; two backends declaring one kind is an error (which of them
    compiles a program must not depend on registration order)."""
    out: dict[str, TargetInfo] = {}
    owner: dict[str, str] = {}
    for impl in reversed(manager().hook.tile_targets.get_hookimpls()):  # call order
        for info in impl.function() or ():
            if info.kind in out:
                raise TileTargetError(
                    f"target kind {info.kind!r} is claimed by two backends: {owner[info.kind]!r} "
                    f"and {impl.plugin_name!r}",
                    hint="uninstall one of them, or give the run-time registered one another kind")
            out[info.kind] = info
            owner[info.kind] = impl.plugin_name
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
    if t.arch is not None and not info.archs and info.default_arch is None:
        raise TileTargetError(f"target {t.kind!r} has no archs, but {str(t)!r} names one",
                              hint=f"write target={t.kind!r}")
    if t.arch is None and info.default_arch is not None:
        t = Target(t.kind, info.arch())
    if t.arch is not None and info.archs and t.arch not in info.archs:
        raise TileTargetError(f"target {t.kind!r} has no arch {t.arch!r}",
                              hint=f"known archs: {', '.join(info.archs)}")
    return t


def lowering_target(target: Target) -> Target:
    """The target whose lowering `target` runs (`tile_lowering_target`; itself for all but
    emulators)."""
    real = manager().hook.tile_lowering_target(target=target)
    if real is None:
        return target
    if not isinstance(real, Target):
        raise TileInternalError(f"tile_lowering_target returned {real!r} for {target}, not a Target")
    return real


def facts(target: Target) -> TargetFacts:
    """The facts of `target`'s lowering target, as its backend reports them; a target with no
    facts is a plain tile-level one."""
    real = lowering_target(target)
    f = manager().hook.tile_target_facts(target=real)
    return f if f is not None else TargetFacts(real)


def unsupported(target: Target, func) -> str | None:
    """Why `target` (or the target whose lowering it runs) cannot compile `func`, or None."""
    hook = manager().hook.tile_unsupported
    real = lowering_target(target)
    return hook(target=target, func=func) or (hook(target=real, func=func) if real != target else None)


def describe(target: Target, func=None, options=None) -> TargetDesc:
    """The frozen TargetDesc for compiling `func` (a PrimFunc, or None) for `target`.

    This is the one place the pipeline's questions reach the hooks: the lowering target
    (`tile_lowering_target`), its facts (`tile_target_facts`), the extra passes of the target and
    of its lowering target (`tile_passes`), and, for thread-lowered targets, the answer to
    `tile_gemm_tensorize` for every distinct gemm of `func`."""
    real, f, extra = target_parts(target)
    gemms = _gemm_answers(real, f, func) if func is not None and f.lowers_to_threads else ()
    if options is None:
        from .options import Options

        options = Options()
    return TargetDesc(target, real, f, options, gemms, tuple(extra))


def target_parts(target: Target) -> tuple[Target, TargetFacts, tuple]:
    """(lowering target, its facts, the extra passes of `target` and of its lowering target):
    the parts of `describe` that do not depend on the program (the compile cache keys on them
    without asking the gemm hooks)."""
    pm = manager()
    real = lowering_target(target)
    f = pm.hook.tile_target_facts(target=real)
    f = f if f is not None else TargetFacts(real)
    extra = []
    for t in (target, real) if real != target else (target,):
        for group in pm.hook.tile_passes(target=t) or ():
            extra.extend(group or ())
    return real, f, tuple(extra)


def _gemm_answers(real: Target, f: TargetFacts, func) -> tuple:
    """((GemmQuery, MmaPlan | Declined), ...) for the distinct gemms of `func`."""
    from .contract import Declined, MmaPlan
    from .lower.tensorize import gemm_queries

    hook = manager().hook.tile_gemm_tensorize
    out: list = []
    for q in gemm_queries(func, f.warp_size):
        if any(q == seen for seen, _ in out):
            continue
        answer = hook(target=real, query=q)
        if answer is None:
            answer = Declined(f"no installed backend tensorizes {describe_query(q)} for {real}")
        elif not isinstance(answer, (MmaPlan, Declined)):
            raise TileInternalError(f"tile_gemm_tensorize returned {answer!r} for {real}; expected an "
                                    "MmaPlan, a Declined or None")
        out.append((q, answer))
    return tuple(out)


def describe_query(q) -> str:
    """A gemm query as words: `gemm(float32 x float32 -> float32, 64x64x32, transpose_B)`."""
    flags = "".join(f", {n}" for n, on in (("transpose_A", q.transpose_a), ("transpose_B", q.transpose_b))
                    if on)
    return f"gemm({q.a_dtype} x {q.b_dtype} -> {q.c_dtype}, {q.m}x{q.n}x{q.k}{flags})"
