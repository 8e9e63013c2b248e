"""`@tilecore.autotune`: search a kernel factory's tile configurations, keep the fastest.

TileLang's spelling, stacked on `@tilecore.jit` over a factory whose tunable parameters are
keyword arguments::

    @tilecore.autotune(configs=[dict(block_M=64, block_N=64), ...], warmup=25, rep=100)
    @tilecore.jit(out_idx=[-1], target="cuda")
    def matmul(M, N, K, block_M=128, block_N=128): ... return main

    kernel = matmul(1024, 1024, 1024)      # searches once, returns the best Kernel
    kernel.config, kernel.latency          # the winner and its milliseconds

A search (1) compiles every config, in spawned worker processes when the factory is importable
and the target builds binaries (their disk caches then serve the main process), (2) checks each
config's outputs against `ref_prog` or, without one, against the first config that runs,
(3) times each through the backend (`tilecore.profiler`: CUDA events with an L2 flush and the
median on GPUs, the wall clock elsewhere) and (4) stores the result as JSON under
`$TILECORE_CACHE_DIR/autotune/`, keyed by the factory (and its source), the values of the `key`
parameters (Triton's meaning: a change re-tunes; default every non-tuned argument), the target,
the device, the configs and the tilecore version (through `tilecore.cache.Store("autotune")`
when that module is installed). A later call or process with the same key reads the result and
compiles the winner only (a compile-cache hit with `tilecore.cache`).
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import hashlib
import inspect
import json
import multiprocessing as mp
import os
import sys
import time
from dataclasses import dataclass, field

from . import plugins
from .autotune_cache import backend_version, device_name, store_get, store_put
from .errors import TileCallError, TileError, caller_loc
from .profiler import Profiler, compare, time_call, to_device

# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ConfigResult:
    """One config of a search: its milliseconds (None when it failed) and why it failed."""

    config: dict
    latency: float | None
    error: str | None = None
    compile_s: float = 0.0


@dataclass
class AutotuneResult:
    """A finished search (or one read from the cache): the winner and every config's result."""

    config: dict
    latency: float
    results: list = field(default_factory=list)
    ref_latency: float | None = None
    from_cache: bool = False
    kernel: object = None


# --------------------------------------------------------------------------- workers


def _compile_job(job: tuple) -> tuple:
    """Worker process: build one config so its binary lands in the backends' disk caches;
    returns (index, seconds, error text or None). Runs with no GPU visible."""
    index, module, qualname, params, out_idx, target, pass_configs = job
    t0 = time.perf_counter()
    try:
        import importlib

        from .compiler import compile as tc_compile

        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        fn = inspect.unwrap(obj)  # the autotune and jit wrappers name the factory __wrapped__
        kernel = tc_compile(fn(**params), out_idx, target, pass_configs)
        art = kernel.artifact
        arch = getattr(art, "arch", None)
        if arch is not None and hasattr(art, "cubin"):
            art.cubin(arch)  # cuda compiles lazily; the cubin goes to its disk cache
        return index, time.perf_counter() - t0, None
    except Exception as e:  # reported per config by the main process
        return index, time.perf_counter() - t0, f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"


def _importable(fn) -> tuple[str, str] | None:
    """(module, qualname) when a spawned process can import the factory by name."""
    module, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<locals>" in qual or module not in sys.modules:
        return None
    return module, qual


# --------------------------------------------------------------------------- the tuner


class AutoTuner:
    """What `@tilecore.autotune(...)` returns: call it like the factory it wraps."""

    def __init__(self, factory, configs, key, warmup, rep, timeout, supply_type, ref_prog,
                 supply_prog, rtol, atol, max_mismatched_ratio, skip_check, manual_check_prog,
                 cache_input_tensors, workers, cache_results, progress, devices):
        from .compiler import JITFactory

        if not isinstance(factory, JITFactory):
            raise TileError(f"tilecore.autotune needs a @tilecore.jit kernel factory, got "
                            f"{type(factory).__name__}", caller_loc(),
                            hint="put @tilecore.autotune(...) above @tilecore.jit(...) on a "
                                 "function that returns a @T.prim_func")
        self.factory = factory
        self.signature = inspect.signature(factory.fn)
        self.configs = configs
        self.key = list(key) if key is not None else None
        for k in self.key or ():
            if k not in self.signature.parameters:
                raise TileError(f"autotune key {k!r} is not a parameter of {factory.fn.__name__}",
                                caller_loc(), hint=f"the signature is {factory.fn.__name__}{self.signature}")
        self.warmup, self.rep, self.timeout = warmup, rep, timeout
        self.supply_type, self.ref_prog, self.supply_prog = supply_type, ref_prog, supply_prog
        self.rtol, self.atol, self.max_mismatched_ratio = rtol, atol, max_mismatched_ratio
        self.skip_check, self.manual_check_prog = skip_check, manual_check_prog
        self.cache_input_tensors = cache_input_tensors
        self.workers, self.cache_results, self.progress = workers, cache_results, progress
        self.devices = list(devices) if devices else None
        self._memo: dict = {}  # (store key, arguments) -> Kernel
        self._results: dict = {}  # store key -> AutotuneResult (this process)
        self.last_result: AutotuneResult | None = None
        functools.update_wrapper(self, factory.fn)

    @classmethod
    def from_kernel(cls, kernel, configs):
        """TileLang's builder style: `AutoTuner.from_kernel(kernel=fn, configs=[...])
        .set_compile_args(...).set_profile_args(...).run()` (tilecore.autotune_builder),
        the same search as the decorator's."""
        from .autotune_builder import TuningBuilder

        return TuningBuilder(kernel, configs)

    # ------------------------------------------------------------------ calling
    def __call__(self, *args, **kwargs):
        """Return the fastest Kernel for these arguments (searching, or from the caches)."""
        where = caller_loc()
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TileCallError(f"{self.factory.fn.__name__}(): {e}", where,
                                hint="call it with the arguments its signature takes") from None
        configs = self._configs(bound)
        tuned = sorted({k for c in configs for k in c if k != "pass_configs"})
        given = [k for k in tuned if k in bound.arguments]
        if given and len(given) == len(tuned):
            return self._compile(dict(bound.arguments))  # every tuned value given: no search
        if given:
            raise TileCallError(f"{self.factory.fn.__name__}() got tuned parameter(s) "
                                f"{', '.join(given)}", where,
                                hint="give all tuned parameters (no search) or none of them")
        bound.apply_defaults()
        problem = {k: v for k, v in bound.arguments.items() if k not in tuned}
        skey = self.store_key(problem, configs)
        # the search result is shared by calls agreeing on the key parameters; the Kernel is
        # built for all of this call's arguments (a non-key argument still shapes the program)
        mkey = (skey, repr(sorted(problem.items())))
        hit = self._memo.get(mkey)
        if hit is not None:
            return hit
        result = self._results.get(skey)
        rec = store_get(skey) if result is None and self.cache_results else None
        if rec is not None:
            result = AutotuneResult(rec["best"], rec["latency"], [ConfigResult(**r) for r in rec["results"]],
                                    rec.get("ref_latency"), from_cache=True)
        if result is not None:
            kernel = self._compile(dict(problem, **result.config))
        else:
            result, kernel = self._search(problem, configs)
            if self.cache_results:
                store_put(skey, dict(best=result.config, latency=result.latency,
                                     ref_latency=result.ref_latency, facts=self._facts(problem),
                                     results=[r.__dict__ for r in result.results]))
        self._results[skey] = result
        kernel.config, kernel.latency = dict(result.config), result.latency
        self.last_result = AutotuneResult(result.config, result.latency, result.results,
                                          result.ref_latency, result.from_cache, kernel)
        self._memo[mkey] = kernel
        return kernel

    def get_best_config(self, *args, **kwargs) -> dict:
        """The winning config for these arguments (searching if nothing is cached)."""
        return dict(self(*args, **kwargs).config)

    def _configs(self, bound) -> list[dict]:
        cfgs = self.configs
        if callable(cfgs):
            cfgs = cfgs(*bound.args, **bound.kwargs)
        cfgs = list(cfgs or ())
        if not cfgs:
            raise TileError(f"autotune of {self.factory.fn.__name__} has no configs", caller_loc(),
                            hint="pass configs=[dict(block_M=..., ...), ...]")
        for c in cfgs:
            if not isinstance(c, dict):
                raise TileError(f"an autotune config is a dict of parameter values, got {c!r}",
                                hint="write each config as dict(param=value, ...)")
            # "pass_configs" in a config (TileLang) is that config's compile options
            bad = [k for k in c if k not in self.signature.parameters and k != "pass_configs"]
            if bad:
                raise TileError(f"autotune config {c} names {', '.join(bad)}, not a parameter of "
                                f"{self.factory.fn.__name__}", caller_loc(),
                                hint=f"the signature is {self.factory.fn.__name__}{self.signature}")
        return cfgs

    # ------------------------------------------------------------------ keys
    def _facts(self, problem: dict) -> dict:
        """What the stored result depends on besides the factory: target, device, versions."""
        from . import __version__

        target = plugins.resolve(self.factory.target)
        return dict(target=str(target), device=device_name(target.kind), tilecore=__version__,
                    backend=backend_version(target.kind),
                    key={k: repr(v) for k, v in problem.items() if self.key is None or k in self.key},
                    pass_configs=repr(sorted((self.factory.pass_configs or {}).items())))

    def store_key(self, problem: dict, configs: list[dict]) -> str:
        """The hash naming this search's record (see the module docstring)."""
        fn = self.factory.fn
        try:
            src = inspect.getsource(fn)
        except (OSError, TypeError):
            src = ""
        blob = json.dumps(dict(fn=f"{fn.__module__}:{fn.__qualname__}", src=src,
                               facts=self._facts(problem), out_idx=repr(self.factory.out_idx),
                               configs=[repr(sorted(c.items())) for c in configs]), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    # ------------------------------------------------------------------ the search
    def _compile(self, params: dict):
        from .compiler import compile as tc_compile
        from .ir.module import PrimFunc

        params = dict(params)
        pass_configs = _merged_pass_configs(self.factory.pass_configs, params.pop("pass_configs", None))
        func = self.factory.fn(**params)
        if not isinstance(func, PrimFunc):
            raise TileError(f"{self.factory.fn.__name__} must return a @T.prim_func kernel, got "
                            f"{type(func).__name__}",
                            hint="build the kernel with @T.prim_func inside the factory and return it")
        return tc_compile(func, self.factory.out_idx, self.factory.target, pass_configs)

    def _n_workers(self, n: int) -> int:
        w = self.workers
        if w is None:
            env = os.environ.get("TILECORE_AUTOTUNE_WORKERS")
            if env is not None:
                w = int(env)
            else:
                kind = plugins.resolve(self.factory.target).kind
                # interp and emulators build nothing a disk cache keeps: workers would only add
                # process start-up; at least two workers, or compiling in place is as fast
                w = 0 if kind in ("interp", "emu", "toy") else min(n, (os.cpu_count() or 1) - 1)
        return w if w >= 2 or self.workers else 0

    def _precompile(self, problem: dict, configs: list[dict]) -> dict[int, tuple]:
        """Compile every config in worker processes, filling the backends' disk caches;
        {index: (seconds, error)} (errors are informational: the main process rebuilds)."""
        n = self._n_workers(len(configs))
        where = _importable(self.factory.fn)
        if n <= 0 or where is None or len(configs) < 2:
            return {}
        # the target resolved here: a worker sees no GPU, so `cuda` alone would take a default arch
        target = str(plugins.resolve(self.factory.target))
        jobs = [(i, where[0], where[1], {k: v for k, v in dict(problem, **c).items() if k != "pass_configs"},
                 self.factory.out_idx, target,
                 _merged_pass_configs(self.factory.pass_configs, c.get("pass_configs")))
                for i, c in enumerate(configs)]
        old = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # workers only compile: no device contexts
        try:
            ex = cf.ProcessPoolExecutor(n, mp_context=mp.get_context("spawn"))
            futures = [ex.submit(_compile_job, j) for j in jobs]
        finally:
            if old is None:
                del os.environ["CUDA_VISIBLE_DEVICES"]
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = old
        out = {}
        try:
            for f in cf.as_completed(futures, timeout=self.timeout * len(configs) if self.timeout else None):
                i, s, err = f.result()
                out[i] = (s, err)
        except (cf.TimeoutError, cf.process.BrokenProcessPool):
            pass  # configs without an answer are compiled (and timed out) in this process
        ex.shutdown(wait=False, cancel_futures=True)
        return out

    def _search(self, problem: dict, configs: list[dict]):
        pre = self._precompile(problem, configs)
        kernels: list = [None] * len(configs)
        errors: list = [None] * len(configs)
        build_s = [0.0] * len(configs)
        for i, c in enumerate(configs):
            # every config is built here too (from the disk caches the workers filled): a
            # worker's failure may be its environment (no device), so it decides nothing
            t0 = time.perf_counter()
            try:
                kernels[i] = self._compile(dict(problem, **c))
            except Exception as e:  # a config that does not build is skipped, with the reason
                errors[i] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            build_s[i] = pre.get(i, (0.0,))[0] + time.perf_counter() - t0
            if self.timeout and build_s[i] > self.timeout and kernels[i] is not None:
                kernels[i], errors[i] = None, f"compile took {build_s[i]:.1f} s > timeout {self.timeout} s"
        first = next((k for k in kernels if k is not None), None)
        if first is None:
            raise TileError(f"autotune of {self.factory.fn.__name__}: no config compiled; "
                            + "; ".join(f"{c}: {e}" for c, e in zip(configs, errors)),
                            hint="fix the first error above, or drop the configs that cannot compile")
        latencies, ref_latency = self._evaluate(first, kernels, errors)
        results = [ConfigResult(c, lat, err, round(s, 3))
                   for c, lat, err, s in zip(configs, latencies, errors, build_s)]
        ok = [r for r in results if r.latency is not None]
        if not ok:
            raise TileError(f"autotune of {self.factory.fn.__name__}: every config failed; "
                            + "; ".join(f"{r.config}: {r.error}" for r in results),
                            hint="fix the first error above (check inputs, ref_prog) or drop those configs")
        best = min(range(len(results)), key=lambda i: (results[i].latency is None,
                                                        results[i].latency or 0.0))
        return (AutotuneResult(dict(configs[best]), results[best].latency, results, ref_latency),
                kernels[best])

    def _inputs(self, kernel, device=None) -> list:
        from .autotune_builder import given_inputs

        if given_inputs():  # inside `with set_autotune_inputs(...)`
            return to_device(kernel, given_inputs(), device)
        if self.supply_prog is not None:
            return to_device(kernel, list(self.supply_prog(kernel.inputs)), device)
        return Profiler(kernel, self.supply_type).supply_inputs(device=device)

    def _evaluate(self, first, kernels: list, errors: list):
        """Check and time every built kernel; the devices (when several) take turns."""
        devices = self.devices or [None]
        inputs = {d: self._inputs(first, d) for d in devices}
        ref = None
        ref_latency = None
        if not self.skip_check:
            src = inputs[devices[0]]
            if self.ref_prog is not None:
                ref = _as_list(self.ref_prog(*src))
                ref_latency = time_call(lambda: self.ref_prog(*src), src, self.warmup,
                                        self.rep).summary()
            else:
                ref = None  # the first config that runs becomes the reference
        latencies: list = [None] * len(kernels)
        bar = _progress(len(kernels), self.progress, self.factory.fn.__name__)

        def run(i: int, dev) -> None:
            k = kernels[i]
            if k is None:
                return
            args = inputs[dev] if self.cache_input_tensors else self._inputs(k, dev)
            try:
                nonlocal ref
                if not self.skip_check:
                    outs = _as_list(k(*args))
                    if ref is None:
                        ref = outs
                    why = self._check(outs, ref)
                    if why is not None:
                        errors[i] = f"wrong result: {why}"
                        return
                latencies[i] = time_call(lambda: k(*args), args, self.warmup, self.rep).summary()
            except Exception as e:  # a config that faults is skipped, with the reason
                errors[i] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            finally:
                bar.update(1)

        order = list(range(len(kernels)))
        if len(devices) == 1:
            for i in order:
                run(i, devices[0])
        else:
            # one thread per device; config i runs on device i % n (the first config runs
            # alone first when it is the reference, so every other one compares against it)
            start = 0
            if not self.skip_check and ref is None:
                run(0, devices[0])
                start = 1
            with cf.ThreadPoolExecutor(len(devices)) as ex:
                list(ex.map(lambda d: [run(i, devices[d]) for i in order[start:]
                                       if i % len(devices) == d], range(len(devices))))
        bar.close()
        return latencies, ref_latency

    def _check(self, outs: list, ref: list) -> str | None:
        if self.manual_check_prog is not None:
            try:
                self.manual_check_prog(outs if len(outs) > 1 else outs[0], ref if len(ref) > 1 else ref[0])
            except AssertionError as e:
                return str(e).splitlines()[0] if str(e) else "manual_check_prog failed"
            return None
        if len(outs) != len(ref):
            return f"{len(outs)} outputs, the reference has {len(ref)}"
        for j, (o, r) in enumerate(zip(outs, ref)):
            why = compare(o, r, self.rtol, self.atol, self.max_mismatched_ratio)
            if why is not None:
                return f"output {j}: {why}"
        return None


def _merged_pass_configs(base, extra):
    """The factory's pass_configs updated with one config's own ("pass_configs" in a config)."""
    if not extra:
        return base
    return {**(base or {}), **extra}


def _as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, want, name: str):
    """A tqdm bar when tqdm is installed and the search is long (more than 4 configs) or
    `progress=True`; nothing otherwise (`progress=False`, or no tqdm)."""
    if want is False or (want is None and total <= 4):
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=f"autotune {name}", unit="config")


def autotune(func=None, *, configs=None, key=None, warmup: float = 25, rep: float = 100,
             timeout: float | None = None, supply_type: str = "auto", ref_prog=None,
             supply_prog=None, rtol: float = 1e-2, atol: float = 1e-2,
             max_mismatched_ratio: float = 0.01, skip_check: bool = False, manual_check_prog=None,
             cache_input_tensors: bool = True, workers: int | None = None,
             cache_results: bool = True, progress: bool | None = None, devices=None, **unknown):
    """Autotune a `@tilecore.jit` kernel factory over `configs` (a list of dicts of its keyword
    parameters, or a function of the call's arguments returning one).

    TileLang's arguments: `warmup`/`rep` (milliseconds of timing runs), `timeout` (seconds per
    compile), `supply_type` (a `tilecore.profiler.TensorSupplyType`), `ref_prog(*inputs)` (the
    reference outputs; default the first config that runs), `supply_prog(params)` (inputs
    for the kernel's input parameters), `rtol`/`atol`/`max_mismatched_ratio`, `skip_check`,
    `manual_check_prog(outputs, reference)` (raises AssertionError on a mismatch),
    `cache_input_tensors`. Triton's `key` names the parameters whose values key the cache.
    tilecore's own: `workers` (compile processes; 0 compiles in this process), `cache_results`,
    `progress` (a tqdm bar), `devices` (torch devices to spread the timing over).
    Any other keyword is a TileError."""
    scheduling = {k: unknown.pop(k) for k in ("early_stop", "early_stop_factor") if k in unknown}
    if scheduling.get("early_stop"):
        import warnings

        from .errors import TileConfigWarning

        warnings.warn("tilecore.autotune(early_stop=True): every config is timed in full (the "
                      "same winner, without TileLang's shortcut)", TileConfigWarning, stacklevel=2)
    if unknown:
        raise TileError(f"tilecore.autotune got unknown keyword argument(s) {', '.join(sorted(unknown))}",
                        caller_loc(), hint="see help(tilecore.autotune) for the supported arguments")
    if configs is None:
        raise TileError("tilecore.autotune needs configs=[...]", caller_loc(),
                        hint="pass configs=[dict(block_M=..., ...), ...]")

    def make(f):
        return AutoTuner(f, configs, key, warmup, rep, timeout, supply_type, ref_prog, supply_prog,
                         rtol, atol, max_mismatched_ratio, skip_check, manual_check_prog,
                         cache_input_tensors, workers, cache_results, progress, devices)

    def wrap(f):
        from .compiler import EagerJIT

        if isinstance(f, EagerJIT):
            from .autotune_eager import Configs, EagerAutoTuner

            return EagerAutoTuner(f, lambda factory: make(factory) if factory is not None
                                  else Configs(configs))
        return make(f)

    return wrap if func is None else wrap(func)


from .autotune_builder import set_autotune_inputs  # noqa: E402, F401 - TileLang's name, here too
