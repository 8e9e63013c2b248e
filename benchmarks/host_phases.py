"""Wall-clock phases of one cold `tilecore.jit` (host_overhead.py's cold children): where the first
process on a machine spends the time a later one does not.

`install(target)` wraps, without importing anything the jit would import later (a module is
wrapped when the jit itself imports it, through a `sys.meta_path` watcher), the description,
the pipeline, the backend's build, the compile-cache store and, for cuda, the renderer and the
CUDA compiler. Each phase's time includes the imports made inside it.
"""

from __future__ import annotations

import importlib.abc
import sys
import time


def _timed(times: dict, label: str, fn):
    def timed(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            times[label] = times.get(label, 0.0) + time.perf_counter() - t

    return timed


class _Watch(importlib.abc.MetaPathFinder):
    """Wraps named functions of a module right after the module is first executed."""

    def __init__(self, wraps: dict):
        self.wraps = wraps  # module name -> callback(module)

    def find_spec(self, name, path, target=None):
        if name not in self.wraps:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader, callback = spec.loader, self.wraps.pop(name)
        exec_module = loader.exec_module

        def exec_and_wrap(module):
            exec_module(module)
            callback(module)

        loader.exec_module = exec_and_wrap
        return spec


def install(target: str) -> dict:
    """Start timing (after backend discovery, before the jit); returns the dict the phases'
    seconds accumulate in. Modules the jit has not imported yet are wrapped when it does, so
    their import stays inside the jit's time."""
    from tilecore import plugins  # imported by discovery already

    times: dict = {}
    plugins.describe = _timed(times, "describe", plugins.describe)
    hook = plugins.manager().hook
    hook.tile_build = _timed(times, "build (render + compiler + artifact)", hook.tile_build)

    def wrap_compiler(m):
        m._stages = _timed(times, "pipeline", m._stages)

    def wrap_cache(m):
        m.store = _timed(times, "store", m.store)

    def wrap_render(m):
        m.render_cuda = _timed(times, "render", m.render_cuda)

    def wrap_build(m):
        m.compile_cuda = _timed(times, "cuda compiler (NVRTC load + compile)", m.compile_cuda)

    wraps = {"tilecore.compiler": wrap_compiler, "tilecore.compile_cache": wrap_cache}
    if target == "cuda":
        wraps.update({"tilecore_cuda.render": wrap_render, "tilecore_cuda.build": wrap_build})
    for name, cb in list(wraps.items()):
        if name in sys.modules:  # already imported: wrap now
            cb(sys.modules[name])
            del wraps[name]
    if wraps:
        sys.meta_path.insert(0, _Watch(wraps))
    return times
