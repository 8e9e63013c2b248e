"""`tilecore.profiler`: timing and checking a Kernel against a reference (TileLang's profiler API).

`kernel.get_profiler(tensor_supply_type=...)` returns a `Profiler` that makes inputs for the
kernel's parameters, compares its outputs with a reference program (`assert_allclose`) and times
it (`do_bench`). Timing is wall-clock around a synchronizing call: on `interp`/`cpu` that is the
host run; on a device target the call returns after the kernel finished (tilecore's Kernel copies
results back), so it includes the transfers. `warmup`/`rep` are time budgets in milliseconds, as in
TileLang; at least one timed run always happens, so a slow target still returns a number.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable
from functools import partial

from .errors import TileConfigWarning, TileError, caller_loc
from .utils.tensor import TensorSupplyType, get_tensor_supply, torch_assert_close

_BACKENDS = ("event", "cupti", "cudagraph")


def do_bench(fn: Callable, warmup: float = 25, rep: float = 100, _n_warmup: int = 0,
             _n_repeat: int = 0, quantiles=None, fast_flush: bool = True, backend: str = "event",
             return_mode: str = "mean", **ignored) -> float | list[float]:
    """Milliseconds per call of `fn()`: `warmup` ms (or `_n_warmup` calls) of warm-up, then `rep`
    ms (or `_n_repeat` calls) timed one call at a time. `quantiles` returns those quantiles;
    `return_mode` is min/max/mean/median. `backend` (event/cupti/cudagraph) names a CUDA timing
    method: every one is timed the same way here (wall clock around a synchronous call)."""
    if backend not in _BACKENDS:
        raise TileError(f"do_bench backend {backend!r} is not one of {_BACKENDS}", caller_loc())
    # device / early_stop_baseline select a CUDA device and an early exit: nothing to do here
    unknown = sorted(k for k, v in ignored.items()
                     if v is not None and k not in ("device", "early_stop_baseline"))
    if unknown:
        raise TileError(f"do_bench got unknown keyword(s) {', '.join(unknown)}", caller_loc())
    t0 = time.perf_counter()
    fn()
    est = max((time.perf_counter() - t0) * 1e3, 1e-3)
    if est >= rep and _n_repeat <= 0 and quantiles is None:
        return est  # one call already spends the budget (a slow target): it is the sample
    n_warm = _n_warmup if _n_warmup > 0 else max(0, int(warmup / est))
    n_rep = _n_repeat if _n_repeat > 0 else max(1, int(rep / est))
    for _ in range(n_warm):
        fn()
    times = []
    for _ in range(n_rep):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    if quantiles is not None:
        s = sorted(times)
        return [s[min(len(s) - 1, int(q * len(s)))] for q in quantiles]
    modes = {"min": min, "max": max, "mean": statistics.fmean, "median": statistics.median}
    if return_mode not in modes:
        raise TileError(f"return_mode {return_mode!r} is not one of {sorted(modes)}", caller_loc())
    return modes[return_mode](times)


class Profiler:
    """Inputs, checks and timing for one Kernel (see the module docstring)."""

    def __init__(self, kernel, tensor_supply_type: TensorSupplyType = TensorSupplyType.Auto):
        """`kernel` is a tilecore Kernel; inputs are made for its non-output parameters."""
        self.kernel = kernel
        self.supply = get_tensor_supply(tensor_supply_type)

    def _get_inputs(self) -> list:
        from .ir.expr import Var

        ins = []
        for p in self.kernel.inputs:
            if isinstance(p, Var):
                raise TileError(f"the profiler cannot make a value for scalar parameter {p.name}",
                                caller_loc(), hint="pass input_tensors=[...] explicitly")
            if any(isinstance(s, Var) for s in p.shape):
                raise TileError(f"the profiler cannot make {p.name}: its shape is symbolic",
                                caller_loc(), hint="pass input_tensors=[...] explicitly")
            ins.append(self.supply(p))
        return ins

    @property
    def func(self):
        """The kernel being profiled."""
        return self.kernel

    def __call__(self, *args):
        """Run the kernel."""
        return self.kernel(*args)

    def run_once(self, func: Callable | None = None):
        """Run `func` (default: the kernel) once on fresh inputs."""
        return (func or self.kernel)(*self._get_inputs())

    def assert_allclose(self, reference_program: Callable, input_tensors=None, atol: float = 1e-2,
                        rtol: float = 1e-2, max_mismatched_ratio: float = 0.01) -> None:
        """The kernel's outputs equal `reference_program`'s on the same inputs, within tolerance
        and up to `max_mismatched_ratio` of elements outside it (None outputs are not compared)."""
        ins = self._get_inputs() if input_tensors is None else list(input_tensors)
        ref = _as_list(reference_program(*ins))
        out = _as_list(self.kernel(*ins))
        if len(out) != len(ref):
            raise AssertionError(f"the kernel returned {len(out)} output(s), the reference {len(ref)}")
        for lhs, rhs in zip(out, ref):
            if lhs is not None and rhs is not None:
                torch_assert_close(_widen(lhs), _widen(rhs), rtol=rtol, atol=atol,
                                   max_mismatched_ratio=max_mismatched_ratio,
                                   base_name="tilecore", ref_name="ref")

    def manual_assert_close(self, reference_program: Callable, input_tensors=None,
                            manual_check_prog: Callable | None = None) -> None:
        """`manual_check_prog(kernel outputs, reference outputs)` on the same inputs."""
        ins = self._get_inputs() if input_tensors is None else list(input_tensors)
        ref = _as_list(reference_program(*ins))
        out = _as_list(self.kernel(*ins))
        if len(out) != len(ref):
            raise AssertionError(f"the kernel returned {len(out)} output(s), the reference {len(ref)}")
        manual_check_prog(out, ref)

    def assert_consistent(self, repeat: int = 10) -> None:
        """`repeat` runs on one input give identical outputs."""
        import torch

        ins = self._get_inputs()
        first = _as_list(self.kernel(*ins))
        for _ in range(repeat):
            for a, b in zip(_as_list(self.kernel(*ins)), first):
                if not torch.equal(a, b):
                    raise AssertionError("the kernel's result differs between runs on one input")

    def do_bench(self, func: Callable | None = None, warmup: float = 25, rep: float = 100,
                 n_warmup: int = 0, n_repeat: int = 0, input_tensors=None, backend: str = "event",
                 quantiles=None, return_mode: str = "mean", **kw) -> float:
        """Milliseconds per call of `func` (default: the kernel) on generated or given inputs."""
        if kw.get("dynamic_symbolic_constraints"):
            warnings.warn("do_bench: dynamic_symbolic_constraints is not supported, pass input_tensors",
                          TileConfigWarning, stacklevel=2)
            kw.pop("dynamic_symbolic_constraints")
        ins = self._get_inputs() if input_tensors is None else list(input_tensors)
        return do_bench(partial(func or self.kernel, *ins), warmup, rep, n_warmup, n_repeat,
                        quantiles, backend=backend, return_mode=return_mode, **kw)


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _widen(t):
    """float8 tensors compare as float32 (torch cannot subtract them)."""
    return t.float() if "float8" in str(getattr(t, "dtype", "")) else t


__all__ = ["Profiler", "do_bench"]
