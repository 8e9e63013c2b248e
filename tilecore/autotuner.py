"""`tilecore.autotuner.autotune`: pick the fastest of several compile-time configs of a kernel.

    @autotune(configs=[{"block_M": 64}, {"block_M": 128}], warmup=10, rep=10)
    @tilecore.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=64): ...

Calling `matmul(M, N, K)` without the tuned parameters compiles every config, checks each against
`ref_prog` when given, times it with `tilecore.profiler.do_bench`, and returns the fastest
Kernel (with `.config`, `.latency` and `.ref_latency`). A call that gives every tuned parameter
(as TileLang's tip says, to skip tuning) compiles only that one, untimed. Results are cached
per argument set in this process.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import warnings

from .errors import TileConfigWarning, TileError, caller_loc
from .profiler import Profiler
from .utils.tensor import TensorSupplyType


class TunedKernel:
    """The winning Kernel of a tuning run plus what the run measured; behaves as that Kernel."""

    def __init__(self, kernel, config: dict, latency: float, ref_latency: float | None):
        """`latency` / `ref_latency` in milliseconds (ref None without `ref_prog`)."""
        self.kernel = kernel
        self.config = config
        self.latency = latency
        self.ref_latency = ref_latency

    def __call__(self, *args):
        """Run the winning kernel."""
        return self.kernel(*args)

    def __getattr__(self, name):
        return getattr(self.kernel, name)


def _configs(configs, args, kwargs) -> list[dict]:
    if callable(configs):
        configs = configs(*args, **kwargs)
    if isinstance(configs, dict):  # TileLang also takes {param: [values...]}: the product
        keys = list(configs)
        configs = [dict(zip(keys, vals)) for vals in itertools.product(*configs.values())]
    configs = list(configs)
    if not configs or not all(isinstance(c, dict) for c in configs):
        raise TileError("autotune configs must be a non-empty list of dicts (or a dict of lists)",
                        caller_loc())
    return configs


_inputs: list = []  # the innermost `with set_autotune_inputs(...)`'s tensors


@contextlib.contextmanager
def set_autotune_inputs(*tensors):
    """Inside this block, tuning runs every candidate on `tensors` (instead of generated
    inputs): `with set_autotune_inputs(q, k, v): kernel = attention(...)`."""
    _inputs.append(list(tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple))
                        else tensors))
    try:
        yield
    finally:
        _inputs.pop()


class _Tuned:
    """An autotuned `@tilecore.jit` function: a factory (calling returns a Kernel) or an eager
    kernel (calling runs it; `.compile(...)` returns the Kernel)."""

    def __init__(self, fn, configs, opts: dict):
        self.fn = fn
        self.configs = configs
        self.opts = opts
        self.eager = hasattr(fn, "tensor_names")  # compiler.EagerJIT
        self._cache: dict = {}
        functools.update_wrapper(self, getattr(fn, "fn", fn))
        self._sig = inspect.signature(getattr(fn, "fn", fn))

    def _build(self, args, kwargs):
        return self.fn.compile(*args, **kwargs) if self.eager else self.fn(*args, **kwargs)

    def compile(self, *args, **kwargs):
        """The tuned Kernel (or the one asked for when every tuned parameter is given)."""
        return self._tune(args, kwargs)

    def __call__(self, *args, **kwargs):
        """Factory: the tuned Kernel. Eager: tune, then run the winner on these tensors."""
        if not self.eager:
            return self._tune(args, kwargs)
        k = self._tune(args, kwargs)
        names = [n for n in self._sig.parameters if n in self.fn.call_names]
        bound = self._sig.bind_partial(*args, **{n: v for n, v in kwargs.items()
                                                 if n in self._sig.parameters}).arguments
        return k(*(bound[n] for n in names))

    def _tune(self, args, kwargs):
        o = self.opts
        cfgs = _configs(self.configs, args, kwargs)
        bound = dict(self._sig.bind_partial(*args, **{k: v for k, v in kwargs.items()
                                                      if k in self._sig.parameters}).arguments)
        bound.update(kwargs)
        if set().union(*cfgs) <= set(bound):  # the caller chose the config: no tuning
            return self._build(args, kwargs)
        # tuned parameters the caller gave stay fixed: only the configs that agree are tried
        fixed = sorted(set(bound) & set().union(*cfgs))
        cfgs = [c for c in cfgs if all(bound[k] == v for k, v in c.items() if k in bound)]
        if not cfgs:
            raise TileError(f"autotune: no config agrees with the given {', '.join(fixed)}",
                            caller_loc(), hint="give values one of the configs has, or none")
        key = _cache_key(args, kwargs)
        if key is not None and key in self._cache:
            return self._cache[key]
        best, ins = None, None
        for cfg in cfgs:
            kernel = self._build(args, {**kwargs, **cfg})
            prof = Profiler(kernel, o["supply_type"])
            if _inputs:
                ins = _inputs[-1]
            elif ins is None or not o["cache_input_tensors"]:
                ins = o["supply_prog"](kernel.inputs) if o["supply_prog"] else prof._get_inputs()
            if o["ref_prog"] is not None and not o["skip_check"]:
                if o["manual_check_prog"] is not None:
                    prof.manual_assert_close(o["ref_prog"], ins, o["manual_check_prog"])
                else:
                    prof.assert_allclose(o["ref_prog"], ins, o["atol"], o["rtol"],
                                         o["max_mismatched_ratio"])
            lat = prof.do_bench(warmup=o["warmup"], rep=o["rep"], input_tensors=ins)
            if best is None or lat < best[2]:
                best = (kernel, cfg, lat)
        ref_lat = None
        if o["ref_prog"] is not None:
            ref_lat = Profiler(best[0], o["supply_type"]).do_bench(
                o["ref_prog"], warmup=o["warmup"], rep=o["rep"], input_tensors=ins)
        result = TunedKernel(best[0], best[1], best[2], ref_lat)
        if key is not None:
            self._cache[key] = result
        return result


def _cache_key(args, kwargs):
    key = (args, tuple(sorted(kwargs.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def autotune(func=None, *, configs, warmup: float = 25, rep: float = 100, timeout: float = 100,
             supply_type: TensorSupplyType = TensorSupplyType.Auto, ref_prog=None,
             supply_prog=None, rtol: float = 1e-2, atol: float = 1e-2,
             max_mismatched_ratio: float = 0.01, skip_check: bool = False,
             manual_check_prog=None, cache_input_tensors: bool = False, **unknown):
    """Decorate a `@tilecore.jit` factory (see the module docstring). `timeout` is not enforced
    (one compile cannot be interrupted safely): it warns when set to something else than the
    default. Unknown keywords raise."""
    if unknown:
        raise TileError(f"autotune got unknown keyword(s) {', '.join(sorted(unknown))}", caller_loc())
    if timeout != 100:
        warnings.warn("autotune timeout= is not enforced by tilecore", TileConfigWarning, stacklevel=2)

    def deco(fn):
        return _Tuned(fn, configs, dict(
            warmup=warmup, rep=rep, supply_type=supply_type, ref_prog=ref_prog,
            supply_prog=supply_prog, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
            skip_check=skip_check, manual_check_prog=manual_check_prog,
            cache_input_tensors=cache_input_tensors))

    return deco if func is None else deco(func)


__all__ = ["autotune", "TunedKernel", "set_autotune_inputs"]
