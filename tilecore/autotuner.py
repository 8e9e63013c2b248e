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
        cache: dict = {}
        target = getattr(fn, "fn", fn)
        sig = inspect.signature(target)

        @functools.wraps(target)
        def wrapper(*args, **kwargs):
            cfgs = _configs(configs, args, kwargs)
            bound = sig.bind_partial(*args, **kwargs).arguments
            tuned = set().union(*cfgs)
            if tuned <= set(bound):  # the caller chose the config: no tuning
                return fn(*args, **kwargs)
            key = (args, tuple(sorted(kwargs.items())))
            try:
                if key in cache:
                    return cache[key]
            except TypeError:
                key = None
            best = None
            ins = None
            for cfg in cfgs:
                merged = {**kwargs, **cfg}
                kernel = fn(*args, **merged)
                prof = Profiler(kernel, supply_type)
                if ins is None or not cache_input_tensors:
                    ins = supply_prog(kernel.inputs) if supply_prog else prof._get_inputs()
                if ref_prog is not None and not skip_check:
                    if manual_check_prog is not None:
                        prof.manual_assert_close(ref_prog, ins, manual_check_prog)
                    else:
                        prof.assert_allclose(ref_prog, ins, atol, rtol, max_mismatched_ratio)
                lat = prof.do_bench(warmup=warmup, rep=rep, input_tensors=ins)
                if best is None or lat < best[2]:
                    best = (kernel, cfg, lat)
            ref_lat = None
            if ref_prog is not None:
                ref_lat = Profiler(best[0], supply_type).do_bench(ref_prog, warmup=warmup, rep=rep,
                                                                  input_tensors=ins)
            result = TunedKernel(best[0], best[1], best[2], ref_lat)
            if key is not None:
                cache[key] = result
            return result

        return wrapper

    return deco if func is None else deco(func)


__all__ = ["autotune", "TunedKernel"]
