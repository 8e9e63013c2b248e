"""`tilecore.compile` and `@tilecore.jit`: from a PrimFunc (or a factory of them) to a Kernel."""

from __future__ import annotations

import functools

from . import plugins
from .errors import TileError, TileTargetError, caller_loc
from .ir.module import Module, PrimFunc
from .kernel import Kernel
from .passes.pipeline import run_pipeline


def compile(func: PrimFunc, out_idx=None, target="auto", pass_configs=None) -> Kernel:  # noqa: A001
    """Lower and build `func` for `target`; returns a callable Kernel."""
    if not isinstance(func, PrimFunc):
        raise TileError(f"tilecore.compile needs a @T.prim_func kernel, got {type(func).__name__}",
                        caller_loc(), hint="decorate the kernel with @T.prim_func")
    t = plugins.resolve(target)
    pm = plugins.manager()
    reason = pm.hook.tile_unsupported(target=t, func=func)
    if reason:
        raise TileTargetError(f"target {t} cannot compile {func.name}: {reason}", func.loc)
    facts = plugins.facts(t)
    extra = [x for group in pm.hook.tile_passes(target=t) or () for x in (group or ())]
    module = Module(func, (("target", t),))
    stages = run_pipeline(module, facts, extra)
    artifact = pm.hook.tile_build(target=t, module=stages[-1][1])
    if artifact is None:
        raise TileTargetError(f"no installed backend builds target {t}")
    return Kernel(func, t, out_idx, artifact, stages)


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


def jit(func=None, *, out_idx=None, target="auto", pass_configs=None, **_ignored):
    """Compile a kernel: `tilecore.jit(prim_func, out_idx=[-1], target="cpu")`, or decorate a
    factory `@tilecore.jit(out_idx=[-1])\\ndef matmul(M, N, K): ... return main`."""
    if func is None:
        return lambda f: jit(f, out_idx=out_idx, target=target, pass_configs=pass_configs)
    if isinstance(func, PrimFunc):
        return compile(func, out_idx, target, pass_configs)
    if callable(func):
        return JITFactory(func, out_idx, target, pass_configs)
    raise TileError(f"tilecore.jit cannot compile a {type(func).__name__}", caller_loc())
