"""`@tilecore.autotune` over an eager `@tilecore.jit` kernel (TileLang's eager style).

Calling the tuned function with tensors searches the configs for those tensors' shapes (the
constants they bind) and runs the fastest config on them; `.compile(M=..., ...)` searches for
given constants and returns the Kernel (`.config`, `.latency`). As in TileLang, the configs
decide the tuned parameters: a tuned value given in the call is replaced by the search's,
unless the call gives every tuned parameter (then nothing is searched).

One search implementation: each search is the decorator's `AutoTuner` over a factory of the
tuned parameters that builds the eager kernel's PrimFunc for this call's binding (so the result
cache keys on the kernel's source, the binding and the configs).
"""

from __future__ import annotations

import functools
import inspect

from .errors import caller_loc


class Configs:
    """The configs an eager search will use, before any call binds the kernel's shapes."""

    def __init__(self, configs):
        self.configs = list(configs) if not callable(configs) else configs


class EagerAutoTuner:
    """What `@tilecore.autotune(...)` returns over an eager `@tilecore.jit` function."""

    def __init__(self, eager_jit, make_tuner):
        """`make_tuner(factory)` builds the decorator's AutoTuner with the autotune arguments."""
        self.eager = eager_jit
        self.make_tuner = make_tuner
        self._tuners: dict = {}
        self.last_result = None
        functools.update_wrapper(self, eager_jit.fn)

    def _tuned_names(self, tuner_configs) -> list:
        cfgs = tuner_configs if isinstance(tuner_configs, list) else []
        return sorted({k for c in cfgs for k in c if k != "pass_configs"})

    def _search(self, args, kwargs, where):
        """The best Kernel for this call's binding (searching once per binding)."""
        from .compiler import JITFactory

        probe_tuner = self.make_tuner(None)
        tuned = self._tuned_names(probe_tuner.configs)
        rest = {k: v for k, v in kwargs.items() if k not in tuned}
        tensors, _config, consts, _missing = self.eager._split(args, rest, where)
        binding = repr(sorted((n, tuple(getattr(t, "shape", ())), str(getattr(t, "dtype", t)))
                              for n, t in tensors.items())) + repr(sorted(consts.items())) \
            + repr(sorted((k, repr(v)) for k, v in rest.items() if k not in consts))
        eager = self.eager

        def build(**cfg):
            cfg.pop("_binding", None)
            return eager.get_prim_func(*args, **rest, **cfg)

        params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in tuned]
        params.append(inspect.Parameter("_binding", inspect.Parameter.KEYWORD_ONLY, default=binding))
        build.__signature__ = inspect.Signature(params)
        build.__wrapped__ = eager.fn  # the result cache keys on the kernel's own source
        build.__name__, build.__qualname__ = eager.fn.__name__, eager.fn.__qualname__
        build.__module__ = eager.fn.__module__
        tuner = self._tuners.get(binding)
        if tuner is None:
            first = eager.get_prim_func(*args, **rest, **probe_tuner.configs[0]) \
                if isinstance(probe_tuner.configs, list) and probe_tuner.configs else None
            n_in = len(eager.call_names)
            n_out = (len(first.params) - len(eager.tensor_names) - len(first.attr("scratch", ()))
                     if first is not None else 0)
            factory = JITFactory(build, list(range(n_in, n_in + n_out)), eager.target,
                                 eager.pass_configs)
            tuner = self.make_tuner(factory)
            self._tuners[binding] = tuner
        kernel = tuner()
        self.last_result = tuner.last_result
        return kernel, tensors

    def _all_tuned_given(self, kwargs) -> bool:
        tuned = self._tuned_names(self.make_tuner(None).configs)
        return bool(tuned) and all(k in kwargs for k in tuned)

    def __call__(self, *args, **kwargs):
        """Search (once per binding) and run the fastest config on these tensors."""
        if self._all_tuned_given(kwargs):
            return self.eager(*args, **kwargs)
        kernel, tensors = self._search(args, kwargs, caller_loc())
        return kernel(*(tensors[n] for n in self.eager.call_names))

    def compile(self, *args, **kwargs):
        """The Kernel for these tensors and/or constants: searched unless every tuned
        parameter is given."""
        if self._all_tuned_given(kwargs):
            return self.eager.compile(*args, **kwargs)
        return self._search(args, kwargs, caller_loc())[0]

    def get_kernel_source(self, *args, **kwargs) -> str:
        """The generated code of the kernel `compile(...)` returns."""
        return self.compile(*args, **kwargs).get_kernel_source()


__all__ = ["EagerAutoTuner", "Configs"]
