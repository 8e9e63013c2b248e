"""`tilecore.compile` and `@tilecore.jit`: from a PrimFunc (or a factory of them) to a Kernel."""

from __future__ import annotations

import functools
import warnings

from . import plugins
from .errors import TileError, TilePerformanceWarning, TileTargetError, caller_loc
from .ir.module import Module, ModuleAttrs, PrimFunc
from .kernel import Kernel
from .options import options_from_pass_configs
from .passes.pipeline import run_pipeline


def compile(func: PrimFunc, out_idx=None, target="auto", pass_configs=None) -> Kernel:  # noqa: A001
    """Lower and build `func` for `target`; returns a callable Kernel.

    `pass_configs`: TileLang-style options (see `tilecore.options`); unknown keys raise.
    The backends are asked once, before the pipeline, for a frozen TargetDesc; a gemm no backend
    tensorizes warns once (TilePerformanceWarning) with the reason."""
    if not isinstance(func, PrimFunc):
        raise TileError(f"tilecore.compile needs a @T.prim_func kernel, got {type(func).__name__}",
                        caller_loc(), hint="decorate the kernel with @T.prim_func")
    options = options_from_pass_configs(pass_configs)
    t = plugins.resolve(target)
    reason = plugins.unsupported(t, func)
    if reason:
        raise TileTargetError(f"target {t} cannot compile {func.name}: {reason}", func.loc)
    desc = plugins.describe(t, func, options)
    module = Module(func, ModuleAttrs(target=t, options=options))
    stages = run_pipeline(module, desc)
    final = stages[-1][1]
    _warn(final.attrs.diagnostics)
    artifact = plugins.manager().hook.tile_build(target=t, module=final)
    if artifact is None:
        raise TileTargetError(f"no installed backend builds target {t}")
    return Kernel(func, t, out_idx, artifact, stages, desc)


_warned: set = set()


def _warn(diagnostics) -> None:
    """Each performance diagnostic once per process, as a warning at the user's line."""
    for d in diagnostics:
        if d.category != "performance" or (d.loc, d.message) in _warned:
            continue
        _warned.add((d.loc, d.message))
        file, line = (d.loc.file, d.loc.line) if d.loc is not None else ("<tilecore>", 0)
        warnings.warn_explicit(d.message, TilePerformanceWarning, file, line)


class JITFactory:
    """`@tilecore.jit` on a Python function returning a PrimFunc: calling it with parameters
    builds (once per distinct parameter set) and returns the compiled Kernel."""

    def __init__(self, fn, out_idx, target, pass_configs):
        self.fn = fn
        self.out_idx = out_idx
        self.target = target
        self.pass_configs = pass_configs
        self._cache: dict = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs) -> Kernel:
        key = (args, tuple(sorted(kwargs.items())))
        try:
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self._cache:
            return self._cache[key]
        func = self.fn(*args, **kwargs)
        if not isinstance(func, PrimFunc):
            raise TileError(f"{self.fn.__name__} must return a @T.prim_func kernel, got "
                            f"{type(func).__name__}", caller_loc())
        k = compile(func, self.out_idx, self.target, self.pass_configs)
        if key is not None:
            self._cache[key] = k
        return k

    def get_prim_func(self, *args, **kwargs) -> PrimFunc:
        """The PrimFunc for these parameters, without compiling."""
        return self.fn(*args, **kwargs)


def jit(func=None, *, out_idx=None, target="auto", pass_configs=None, **unknown):
    """Compile a kernel: `tilecore.jit(prim_func, out_idx=[-1], target="cpu")`, or decorate a
    factory `@tilecore.jit(out_idx=[-1])\\ndef matmul(M, N, K): ... return main`.

    Any other keyword (TileLang's `execution_backend`, `target_host`, ...) is a TileError: an
    option that would be ignored must not look accepted."""
    if unknown:
        raise TileError(f"tilecore.jit got unknown keyword argument(s) {', '.join(sorted(unknown))}",
                        caller_loc(), hint="tilecore.jit takes out_idx, target and pass_configs")
    options_from_pass_configs(pass_configs)  # a bad key fails at decoration, not first call
    if func is None:
        return lambda f: jit(f, out_idx=out_idx, target=target, pass_configs=pass_configs)
    if isinstance(func, PrimFunc):
        return compile(func, out_idx, target, pass_configs)
    if callable(func):
        return JITFactory(func, out_idx, target, pass_configs)
    raise TileError(f"tilecore.jit cannot compile a {type(func).__name__}", caller_loc())
