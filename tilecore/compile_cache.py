"""The compile cache: a kernel compiled once is *loaded*, not lowered, by any later compile.

The key is taken before lowering, from what determines the build (`compile_key`):

- the printed input tile IR (`PrimFunc.script()`), its attribute names and the source line of
  every statement (faults and errors name them);
- `str(target)`, the lowering target, its facts, the backends' extra passes (by name and
  function) and the options (the core passes are tilecore's code, in the fingerprint); the
  rest of the `TargetDesc`, the backends' gemm answers, follows from these, the program and
  the backends' code, so neither a hit nor the key asks for it (`describe` runs on a miss, or
  when a hit's `Kernel.desc` is read);
- tilecore's version, a fingerprint of the sources of tilecore and of every registered
  backend (`tilecore.cache.package_fingerprint`), the registered backends' names, and each
  backend's `tile_cache_token` (its compiler and version).

On a hit the backend's `tile_artifact_load` rebuilds the artifact from the stored entry (JSON
plus blobs such as a cubin, no pickle), and the pipeline, rendering and compilation are
skipped; `Kernel.get_ir()` runs the pipeline on demand. Hits are served from memory within a
process (the live artifact) and from `$TILECORE_CACHE_DIR/kernels` across processes.

`TILECORE_COMPILE_CACHE=0` turns the cache off; `TILECORE_DUMP_IR` bypasses it (the dump is
made by running the pipeline).
"""

from __future__ import annotations

import functools
import os
import sys
from collections import OrderedDict

from . import cache, plugins
from .ir.module import PrimFunc
from .ir.visit import walk
from .target import Target

FORMAT = "kernels-2"  # bump when the key's recipe or the entry layout changes
STORE = cache.Store("kernels")
MEMORY_ENTRIES = 256
_memory: OrderedDict[str, object] = OrderedDict()  # key -> live artifact (this process)
# What this process's compiles did: served from memory, loaded from disk, or built (misses;
# "stored" counts the builds that made an entry). Benchmarks and tests read it (`stats()`).
STATS = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "stored": 0}


def stats() -> dict:
    """A copy of this process's counts: memory_hits, disk_hits, misses (lookups that found
    nothing: the kernel was built), stored (builds written to the cache)."""
    return dict(STATS)


def enabled() -> bool:
    """Whether compiles consult the cache (off with TILECORE_COMPILE_CACHE=0, and while
    TILECORE_DUMP_IR asks for the per-pass dump)."""
    if os.environ.get("TILECORE_COMPILE_CACHE", "1").lower() in ("0", "false", "off", "no"):
        return False
    return not os.environ.get("TILECORE_DUMP_IR")


def _code_fingerprint() -> str:
    """tilecore's version and the sources of tilecore and of every registered backend (module
    plugins by their file, object plugins by their class's module)."""
    from . import __version__

    dirs = {os.path.dirname(os.path.abspath(__file__))}
    for plugin in plugins.manager().get_plugins():
        path = getattr(plugin, "__file__", None)
        if path is None:
            path = getattr(sys.modules.get(type(plugin).__module__), "__file__", None)
        if path:
            dirs.add(os.path.dirname(os.path.abspath(path)))
    return _fingerprint_dirs(tuple(sorted(dirs)), __version__)


@functools.lru_cache(maxsize=8)
def _fingerprint_dirs(dirs: tuple, version: str) -> str:
    return cache.digest(version, *(f"{d}={cache.package_fingerprint(d)}" for d in dirs))


def _locations(func: PrimFunc) -> str:
    """Every statement's source line, in walk order: a kernel moved within its file still
    hits only if its fault messages would name the same lines."""
    lines = []
    for n in walk(func.body):
        loc = getattr(n, "loc", None)
        if loc is not None:
            lines.append(loc.line)
    file = func.loc.file if func.loc is not None else ""
    return f"{file}:{func.loc.line if func.loc else 0}:{','.join(map(str, lines))}"


def _attrs(func: PrimFunc) -> str:
    """The function attributes by name and by the names of the objects they hold (the printed
    signature already spells the objects themselves)."""
    out = []
    for k, v in func.attrs:
        items = v if isinstance(v, tuple) else (v,)
        out.append(f"{k}=" + ",".join(getattr(x, "name", None) or repr(x) for x in items))
    return ";".join(out)


def _target_text(target: Target, options) -> str:
    """What the build depends on besides the program and the code: the lowering target, its
    facts, the extra passes (by name and function; a Pass's repr holds addresses) and the
    options. The rest of the `TargetDesc`, the backends' gemm answers, is a function of these,
    the program and the backends' code (all in the key), so a hit does not ask for it."""
    real, facts, extra = plugins.target_parts(target)
    passes = [(a, p.name, getattr(p.fn, "__module__", ""), getattr(p.fn, "__qualname__", ""))
              for a, p in extra]
    return repr((target, real, facts, options, passes))


def compile_key(func: PrimFunc, target: Target, options) -> str:
    """The cache key of compiling `func` for `target` with `options` (hex SHA-256): no lowering,
    no `describe` (see the module docstring)."""
    pm = plugins.manager()
    tokens = pm.hook.tile_cache_token(target=target)
    real = plugins.lowering_target(target)
    if real != target:
        tokens = tokens + pm.hook.tile_cache_token(target=real)
    names = ",".join(sorted(n for n, _ in pm.list_name_plugin()))
    return cache.digest(FORMAT, _code_fingerprint(), names, func.script(), _attrs(func),
                        _locations(func), str(target), _target_text(target, options),
                        "|".join(sorted(t for t in tokens if t)))


def key_or_none(func: PrimFunc, target: Target, options) -> str | None:
    """`compile_key`, or None when the cache is off or the key cannot be formed (a program the
    printer cannot spell: it is then compiled uncached, exactly as without the cache)."""
    if not enabled():
        return None
    try:
        return compile_key(func, target, options)
    except Exception:  # the cache is an optimisation: never the reason a compile fails
        return None


def lookup(key: str, target: Target):
    """(artifact, diagnostics) for `key`, or None on a miss (or an entry no backend loads)."""
    art = _memory.get(key)
    if art is not None:
        _memory.move_to_end(key)
        STATS["memory_hits"] += 1
        return art, getattr(art, "_tilecore_diagnostics", ())
    rec = STORE.get_record(key)
    if rec is None:
        STATS["misses"] += 1
        return None
    meta, blobs = rec
    try:
        art = plugins.manager().hook.tile_artifact_load(target=target, meta=meta.get("artifact", {}),
                                                        blobs=blobs)
    except (KeyError, TypeError, ValueError, UnicodeDecodeError):
        art = None  # an entry from an older layout: rebuilt and overwritten
    if art is None:
        STATS["misses"] += 1
        return None
    STATS["disk_hits"] += 1
    diags = _diagnostics_from_json(meta.get("diagnostics", []))
    _remember(key, art, diags)
    return art, diags


def store(key: str, artifact, diagnostics: tuple) -> None:
    """Remember `artifact` in memory and on disk when it opts in (`cache_entry()` returns an
    entry); an artifact that does not is never reused, as before the cache existed."""
    entry = getattr(artifact, "cache_entry", None)
    got = entry() if entry is not None else None
    if got is None:
        return
    _remember(key, artifact, diagnostics)
    STATS["stored"] += 1
    meta, blobs = got
    STORE.put_record(key, {"artifact": meta, "diagnostics": _diagnostics_to_json(diagnostics)}, blobs)


def update(artifact) -> None:
    """Rewrite the disk entry of an artifact this cache stored or loaded, after it gained data
    worth keeping (a cuda artifact compiled for a device's arch on first use): the next
    process then loads that too. Artifacts the cache does not know are ignored."""
    key = getattr(artifact, "_tilecore_cache_key", None)
    got = artifact.cache_entry() if key is not None else None
    if got is None:
        return
    meta, blobs = got
    diags = getattr(artifact, "_tilecore_diagnostics", ())
    STORE.put_record(key, {"artifact": meta, "diagnostics": _diagnostics_to_json(diags)}, blobs)


def clear_memory() -> None:
    """Forget the in-process layer (tests: what a new process would see)."""
    _memory.clear()
    STORE.clear_memory()


def _remember(key: str, artifact, diagnostics: tuple) -> None:
    try:
        artifact._tilecore_diagnostics = diagnostics
        artifact._tilecore_cache_key = key  # for `update`
    except AttributeError:  # an artifact with __slots__: diagnostics are then re-read from disk
        pass
    _memory[key] = artifact
    _memory.move_to_end(key)
    while len(_memory) > MEMORY_ENTRIES:
        _memory.popitem(last=False)


def _diagnostics_to_json(diagnostics) -> list:
    return [{"category": d.category, "message": d.message,
             "file": d.loc.file if d.loc else None, "line": d.loc.line if d.loc else None}
            for d in diagnostics]


def _diagnostics_from_json(items) -> tuple:
    if not items:
        return ()  # the usual entry: the contract module (dataclasses) need not be imported
    from .contract import Diagnostic
    from .errors import SourceLoc

    return tuple(Diagnostic(d["category"], d["message"],
                            SourceLoc(d["file"], int(d["line"])) if d.get("file") else None)
                 for d in items)
