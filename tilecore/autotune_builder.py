"""TileLang's builder-style autotuner: `AutoTuner.from_kernel(kernel=fn, configs=[...])`,
`.set_compile_args(...)`, `.set_profile_args(...)`, `.run(...)`.

One search implementation: `run()` wraps `fn` (a function of the tuned parameters returning a
@T.prim_func) in `tilecore.jit` with the compile arguments and hands it to the decorator's
`tilecore.autotuner.AutoTuner` with the profile arguments, so compiling, checking against
`ref_prog`, timing and the result cache are those of `@tilecore.autotune`. `run()` returns the
`AutotuneResult` (`.config`, `.latency`, `.ref_latency`, `.kernel`, `.results`).
"""

from __future__ import annotations

import contextlib
import warnings

from .errors import TileConfigWarning, TileError, caller_loc

# TileLang's run() options that schedule the search (pipelining, grouping, early exits) or
# spread it over GPUs tilecore does not fan out to from here: the same configs are measured
_SCHEDULING = ("use_pipeline", "enable_grouped_compile", "group_compile_size",
               "benchmark_multi_gpu", "benchmark_devices", "early_stop", "early_stop_factor")


_GIVEN: list = []  # the innermost `with set_autotune_inputs(...)`'s tensors


@contextlib.contextmanager
def set_autotune_inputs(*tensors):
    """TileLang's context manager: searches started inside it check and time every config on
    `tensors` (the kernel's input arguments, in order) instead of generated inputs:
    `with set_autotune_inputs(q, k, v): kernel = attention.compile(...)`."""
    one = len(tensors) == 1 and isinstance(tensors[0], (list, tuple))
    _GIVEN.append(list(tensors[0]) if one else list(tensors))
    try:
        yield
    finally:
        _GIVEN.pop()


def given_inputs() -> list | None:
    """The tensors of the innermost `with set_autotune_inputs(...)`, or None outside one."""
    return list(_GIVEN[-1]) if _GIVEN else None


class TuningBuilder:
    """What `AutoTuner.from_kernel` returns (see the module docstring)."""

    def __init__(self, kernel, configs):
        if not callable(kernel):
            raise TileError(f"AutoTuner.from_kernel needs a function returning a @T.prim_func, "
                            f"got {type(kernel).__name__}", caller_loc(),
                            hint="pass kernel=<a function of the tuned parameters>")
        self.kernel = kernel
        self.configs = configs
        self.compile_args: dict = dict(out_idx=None, target="auto", pass_configs=None)
        self.jit_extras: dict = {}
        self.profile_args: dict = {}

    def set_compile_args(self, out_idx=None, target="auto", execution_backend=None,
                         target_host=None, verbose=None, pass_configs=None) -> TuningBuilder:
        """`tilecore.jit`'s arguments for every config; TileLang's execution_backend /
        target_host / verbose warn as they do on `tilecore.jit`. Returns self."""
        self.compile_args = dict(out_idx=out_idx, target=target or "auto",
                                 pass_configs=pass_configs)
        extras = dict(execution_backend=execution_backend, target_host=target_host,
                      verbose=verbose)
        self.jit_extras = {k: v for k, v in extras.items() if v not in (None, "auto", False)}
        return self

    def set_profile_args(self, warmup: float = 25, rep: float = 100, timeout=None,
                         supply_type="auto", ref_prog=None, supply_prog=None, rtol: float = 1e-2,
                         atol: float = 1e-2, max_mismatched_ratio: float = 0.01,
                         skip_check: bool = False, manual_check_prog=None,
                         cache_input_tensors: bool = False, backend: str = "event") -> TuningBuilder:
        """`@tilecore.autotune`'s checking and timing arguments; returns self. `backend`
        (TileLang's CUDA timing method) times with CUDA events on GPUs and the wall clock
        elsewhere, as `Profiler.do_bench` does."""
        if backend not in ("event", "cupti", "cudagraph"):
            raise TileError(f"set_profile_args backend {backend!r} is not event, cupti or cudagraph",
                            caller_loc(), hint="pass backend='event' (or leave it out)")
        self.profile_args = dict(warmup=warmup, rep=rep, timeout=timeout, supply_type=supply_type,
                                 ref_prog=ref_prog, supply_prog=supply_prog, rtol=rtol, atol=atol,
                                 max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
                                 manual_check_prog=manual_check_prog,
                                 cache_input_tensors=cache_input_tensors)
        return self

    def run(self, warmup: float | None = None, rep: float | None = None, timeout=None, **options):
        """Search the configs; the AutotuneResult. `warmup` / `rep` / `timeout` given here win
        over set_profile_args'. TileLang's scheduling options (pipelining, grouped compiles,
        early stop, several GPUs) warn once: every config is compiled, checked and timed."""
        from .autotuner import autotune
        from .compiler import jit

        unknown = sorted(k for k in options if k not in _SCHEDULING)
        if unknown:
            raise TileError(f"AutoTuner.run got unknown keyword(s) {', '.join(unknown)}",
                            caller_loc(), hint="warmup, rep, timeout, " + ", ".join(_SCHEDULING))
        used = sorted(k for k, v in options.items()
                      if v not in (None, False, []) and k not in ("group_compile_size", "early_stop_factor"))
        if used:
            warnings.warn(f"AutoTuner.run({', '.join(used)}): tilecore compiles, checks and times "
                          "every config in turn (the result is the same search)",
                          TileConfigWarning, stacklevel=2)
        prof = dict(self.profile_args or self.set_profile_args().profile_args)
        for k, v in (("warmup", warmup), ("rep", rep), ("timeout", timeout)):
            if v is not None:
                prof[k] = v
        factory = jit(self.kernel, **self.compile_args, **self.jit_extras)
        tuner = autotune(factory, configs=self.configs, **prof)
        tuner()
        return tuner.last_result


__all__ = ["TuningBuilder", "set_autotune_inputs", "given_inputs"]
