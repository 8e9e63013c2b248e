"""`kernel.get_profiler()`: input supply, timing through the backend, and correctness checks.

TileLang's names where they overlap (`do_bench`, `assert_allclose`, `run_once`,
`TensorSupplyType`). Timing goes through the kernel's backend: a kernel whose artifact runs on
torch CUDA (or ROCm) tensors is timed with CUDA events, flushing L2 by zeroing a 256 MB buffer
before every repetition, and reports the median; every other target (interp, cpu, emu,
metal-cpu) is timed with the wall clock (`time.perf_counter`), also as the median.
The timing functions take the device to use explicitly (`device=`), so a search can fan out
over several GPUs by giving each worker its own device.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from . import dtypes as dt
from .errors import TileError, caller_loc
from .ir.expr import Var

L2_FLUSH_BYTES = 256 * 1024 * 1024


class TensorSupplyType:
    """How `Profiler.supply_inputs` fills input tensors (TileLang's enum names, as strings, and
    TileLang's distributions, which its examples' tolerances assume)."""

    Auto = "auto"        # floats uniform in [-1, 1), integers -2..2 (0..2 unsigned), float8 -128..127
    Normal = "normal"    # normal with mean -1 and standard deviation 1 (TileLang's)
    Randn = "randn"      # standard normal
    Uniform = "uniform"  # uniform in [-1, 1)
    Integer = "integer"  # integers in [-2, 2] (exact in every dtype: sums compare with ==)
    One = "one"
    Zero = "zero"


_SUPPLY = {v for k, v in vars(TensorSupplyType).items() if not k.startswith("_")}


def _is_torch_artifact(kernel) -> bool:
    return getattr(kernel.artifact, "array_api", "numpy") == "torch"


def random_array(shape: tuple, dtype: dt.DType, supply: str, rng: np.random.Generator) -> np.ndarray:
    """A NumPy array of `shape` in `dtype` filled per `supply` (a TensorSupplyType value)."""
    if supply not in _SUPPLY:
        raise TileError(f"unknown tensor supply type {supply!r}",
                        hint=f"use one of {sorted(_SUPPLY)}")
    if supply == TensorSupplyType.Zero:
        return np.zeros(shape, dtype.np)
    if supply == TensorSupplyType.One:
        return np.ones(shape, dtype.np)
    if dtype.is_bool:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.name == "int8" and supply in (TensorSupplyType.Uniform, TensorSupplyType.Normal):
        return np.ones(shape, dtype.np)  # TileLang's choice for int8 under these supplies
    if dtype.name.startswith("float8") and supply == TensorSupplyType.Auto:
        return rng.integers(-128, 128, shape).astype(np.float32).astype(dtype.np)  # TileLang's
    if dtype.is_int or supply == TensorSupplyType.Integer:
        lo = 0 if dtype.kind == "uint" else -2
        return rng.integers(lo, 3, shape).astype(np.float64).astype(dtype.np)
    if supply in (TensorSupplyType.Uniform, TensorSupplyType.Auto):
        return rng.uniform(-1.0, 1.0, shape).astype(np.float32).astype(dtype.np)
    if supply == TensorSupplyType.Normal:
        return rng.normal(-1.0, 1.0, shape).astype(np.float32).astype(dtype.np)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype.np)


def to_device(kernel, arrays: list, device=None) -> list:
    """`arrays` (NumPy) as torch tensors when torch is installed, as TileLang's profiler gives
    them (a reference written with torch operations then runs unchanged): on the artifact's (or
    the given) device for torch artifacts, on the CPU for the others (interp, cpu, emu, which
    read CPU tensors without copies). Without torch, the arrays themselves."""
    if not _is_torch_artifact(kernel):
        try:
            import torch  # noqa: F401 - only whether it is installed
        except ImportError:
            return list(arrays)
    from .kernel import _from_numpy

    dev = device if device is not None else getattr(kernel.artifact, "device", "cpu")
    return [_from_numpy(np.ascontiguousarray(a)).to(dev) if isinstance(a, np.ndarray) else a
            for a in arrays]


def as_numpy(x) -> np.ndarray:
    """A NumPy copy of an array or (any device's) torch tensor, narrow floats included."""
    if isinstance(x, np.ndarray):
        return x
    from .kernel import _is_torch, _to_numpy

    if _is_torch(x):
        return np.array(_to_numpy(x.detach()))
    return np.asarray(x)


def compare(got, want, rtol: float, atol: float, max_mismatched_ratio: float = 0.0) -> str | None:
    """None when `got` matches `want` within rtol/atol (allowing that fraction of elements to
    differ), else a one-line description of the mismatch. NaN matches only NaN."""
    g = as_numpy(got).astype(np.float64)
    w = as_numpy(want).astype(np.float64)
    if g.shape != w.shape:
        return f"shape {g.shape} != reference shape {w.shape}"
    bad = ~np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    n = int(bad.sum())
    if n == 0 or n <= max_mismatched_ratio * g.size:
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{n} of {g.size} elements differ (rtol={rtol}, atol={atol}); first at {idx}: "
            f"{g[idx]!r} vs reference {w[idx]!r}")


@dataclass(frozen=True)
class Timing:
    """How one function was timed: the per-run milliseconds and the clock that measured them."""

    times_ms: tuple
    clock: str  # "cuda-events" or "wall"

    def summary(self, return_mode: str = "median", quantiles=None):
        """The median / mean / min / max of the runs, or the given quantiles (a list)."""
        t = sorted(self.times_ms)
        if quantiles is not None:
            return [float(np.quantile(t, q)) for q in quantiles]
        fns = {"median": statistics.median, "mean": statistics.fmean, "min": min, "max": max}
        if return_mode not in fns:
            raise TileError(f"do_bench return_mode {return_mode!r} is not one of {sorted(fns)}",
                            hint="pass return_mode='median', 'mean', 'min' or 'max'")
        return float(fns[return_mode](t))


def _counts(est_ms: float, warmup: float, rep: float, n_warmup, n_repeat) -> tuple[int, int]:
    """Repetition counts: explicit counts win, else `warmup`/`rep` milliseconds of runs
    (Triton's and TileLang's convention), at least one of each."""
    est = max(est_ms, 1e-4)
    nw = int(n_warmup) if n_warmup else max(1, int(warmup / est))
    nr = int(n_repeat) if n_repeat else max(1, int(rep / est))
    return nw, min(nr, 100_000)


def time_wall(fn, warmup: float = 25, rep: float = 100, n_warmup=None, n_repeat=None,
              sync=None) -> Timing:
    """Time `fn()` with the wall clock (after `sync()` each run when given)."""
    def once() -> float:
        t0 = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        return (time.perf_counter() - t0) * 1e3

    once()  # the first call may build lazily (numba's parallel launcher): never the estimate
    est = once()
    nw, nr = _counts(est, warmup, rep, n_warmup, n_repeat)
    for _ in range(nw - 1):
        once()
    return Timing(tuple(once() for _ in range(nr)), "wall")


def time_cuda(fn, device, warmup: float = 25, rep: float = 100, n_warmup=None, n_repeat=None,
              flush_l2: bool = True) -> Timing:
    """Time `fn()` on torch CUDA `device` with one pair of events per run, zeroing a 256 MB
    buffer before each (outside the events) so every run starts with a cold L2."""
    import torch

    with torch.cuda.device(device):
        flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device) if flush_l2 else None
        fn()
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            fn()
        end.record()
        torch.cuda.synchronize(device)
        nw, nr = _counts(start.elapsed_time(end) / 5, warmup, rep, n_warmup, n_repeat)
        for _ in range(nw):
            fn()
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(nr)]
        for s, e in pairs:
            if flush is not None:
                flush.zero_()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize(device)
        return Timing(tuple(s.elapsed_time(e) for s, e in pairs), "cuda-events")


def bench_device(inputs: list):
    """The torch CUDA device the inputs live on, or None (wall-clock timing)."""
    from .kernel import _is_torch

    for a in inputs:
        if _is_torch(a) and a.device.type == "cuda":
            return a.device
    return None


def time_call(fn, inputs: list, warmup=25, rep=100, n_warmup=None, n_repeat=None) -> Timing:
    """Time `fn()` with the clock that fits where `inputs` live: CUDA events for CUDA tensors,
    the wall clock (synchronizing torch's device when it is not the CPU) otherwise."""
    dev = bench_device(inputs)
    if dev is not None:
        return time_cuda(fn, dev, warmup, rep, n_warmup, n_repeat)
    return time_wall(fn, warmup, rep, n_warmup, n_repeat)


class Profiler:
    """What `kernel.get_profiler(tensor_supply_type)` returns (see the module docstring)."""

    def __init__(self, kernel, tensor_supply_type: str = TensorSupplyType.Auto, seed: int = 0):
        """`kernel` is a compiled `tilecore.Kernel`; inputs are drawn once with `seed`."""
        self.kernel = kernel
        self.supply_type = tensor_supply_type
        self.seed = seed
        self._inputs: list | None = None
        self.last_timing: Timing | None = None

    @property
    def func(self):
        """The profiled Kernel (TileLang's name)."""
        return self.kernel

    def __call__(self, *args):
        """Run the kernel on `args`."""
        return self.kernel(*args)

    def supply_inputs(self, seed: int | None = None, device=None) -> list:
        """Fresh inputs for one call of the kernel (scalar parameters need `input_tensors`)."""
        rng = np.random.default_rng(self.seed if seed is None else seed)
        arrays = []
        for p in self.kernel.inputs:
            if isinstance(p, Var):
                raise TileError(f"kernel {self.kernel.func.name} has a scalar parameter {p.name}: "
                                "the profiler cannot invent its value", caller_loc(),
                                hint="pass input_tensors=[...] with the scalar in its place")
            shape = tuple(s for s in p.shape)
            if any(isinstance(s, Var) for s in shape):
                raise TileError(f"input {p.name} has a symbolic shape; the profiler cannot choose it",
                                caller_loc(), hint="pass input_tensors=[...]")
            arrays.append(random_array(shape, p.dtype, self.supply_type, rng))
        return to_device(self.kernel, arrays, device)

    def _inputs_for(self, input_tensors) -> list:
        if input_tensors is not None:
            return list(input_tensors)
        if self._inputs is None:
            self._inputs = self.supply_inputs()
        return self._inputs

    def run_once(self, func=None, input_tensors=None):
        """One call of `func` (default: the kernel) on the profiler's inputs."""
        fn = self.kernel if func is None else func
        return fn(*self._inputs_for(input_tensors))

    def do_bench(self, func=None, warmup: float = 25, rep: float = 100, n_warmup: int | None = None,
                 n_repeat: int | None = None, input_tensors=None, return_mode: str = "median",
                 quantiles=None, backend: str | None = None) -> float:
        """Milliseconds per call of `func` (default: the kernel) on the profiler's inputs:
        `warmup` / `rep` milliseconds of runs unless `n_warmup` / `n_repeat` give counts;
        the median by default (`return_mode` mean/min/max, or `quantiles`). `backend`
        ("event" or "wall", TileLang's keyword) forces the clock; by default CUDA events on
        CUDA tensors and the wall clock elsewhere."""
        inputs = self._inputs_for(input_tensors)
        fn = self.kernel if func is None else func

        def call():
            fn(*inputs)

        dev = bench_device(inputs)
        if backend not in (None, "event", "wall", "cupti", "cudagraph"):
            raise TileError(f"do_bench backend {backend!r} is not one of event, cupti, cudagraph, "
                            "wall", caller_loc(),
                            hint="pass backend='event' or backend='wall' (or leave it out)")
        if backend in ("cupti", "cudagraph") or (backend == "event" and dev is None):
            # TileLang's CUDA timing methods: tilecore times CUDA tensors with events and host
            # targets with the wall clock, whichever the program asked for (said once per line)
            _warn_once(f"do_bench(backend={backend!r}) times with "
                       f"{'CUDA events' if dev is not None else 'the wall clock (host tensors)'}")
        if dev is not None and backend != "wall":
            timing = time_cuda(call, dev, warmup, rep, n_warmup, n_repeat)
        else:
            timing = time_wall(call, warmup, rep, n_warmup, n_repeat, sync=_sync_for(inputs))
        self.last_timing = timing
        return timing.summary(return_mode, quantiles)

    def assert_allclose(self, reference_program, input_tensors=None, atol: float = 1e-2,
                        rtol: float = 1e-2, max_mismatched_ratio: float = 0.01) -> None:
        """Run the kernel and `reference_program` on the same inputs and raise AssertionError
        naming the first differing element of the first differing output. The reference gets
        the same objects the kernel got (NumPy arrays or torch tensors) and returns one output
        or a list of them, in the kernel's output order."""
        inputs = self._inputs_for(input_tensors)
        got = self.kernel(*inputs)
        want = reference_program(*inputs)
        got = list(got) if isinstance(got, (list, tuple)) else [got]
        want = list(want) if isinstance(want, (list, tuple)) else [want]
        if len(got) != len(want):
            raise AssertionError(f"kernel {self.kernel.func.name} returned {len(got)} output(s), "
                                 f"the reference {len(want)}")
        for i, (g, w) in enumerate(zip(got, want)):
            why = compare(g, w, rtol, atol, max_mismatched_ratio)
            if why is not None:
                raise AssertionError(f"kernel {self.kernel.func.name} output {i}: {why}")


_WARNED: set = set()


def _warn_once(msg: str) -> None:
    """A TileConfigWarning once per (message, caller line)."""
    import warnings

    from .errors import TileConfigWarning

    key = (msg, caller_loc())
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(msg, TileConfigWarning, stacklevel=3)


def _sync_for(inputs: list):
    """A synchronize function for torch tensors on a non-CPU, non-CUDA device (e.g. mps)."""
    from .kernel import _is_torch

    for a in inputs:
        if _is_torch(a) and a.device.type not in ("cpu", "cuda"):
            import torch

            mod = getattr(torch, a.device.type, None)
            return getattr(mod, "synchronize", None)
    return None


def do_bench(fn, warmup: float = 25, rep: float = 100, _n_warmup: int = 0, _n_repeat: int = 0,
             quantiles=None, fast_flush: bool = True, return_mode: str = "mean", **kwargs):
    """TileLang's `tilelang.profiler.do_bench`: milliseconds per call of `fn()`, timed with the
    wall clock (`fn` has no tensors to say where it runs; `Profiler.do_bench` of a kernel uses
    CUDA events on GPUs); `quantiles` returns those quantiles, `return_mode` is
    min/max/mean/median. `backend` other than "event" is accepted with a warning."""
    import warnings

    unknown = sorted(k for k in kwargs if k not in ("backend", "device", "early_stop_baseline"))
    if unknown:
        raise TileError(f"do_bench got unknown keyword(s) {', '.join(unknown)}", caller_loc(),
                        hint="warmup, rep, _n_warmup, _n_repeat, quantiles, return_mode, backend")
    if kwargs.get("backend", "event") != "event":
        warnings.warn(f"do_bench(backend={kwargs['backend']!r}) times with CUDA events / the wall clock",
                      stacklevel=2)
    timing = time_call(fn, [], warmup=warmup, rep=rep, n_warmup=_n_warmup or None,
                       n_repeat=_n_repeat or None)
    return timing.summary(return_mode, quantiles)


def get_profiler(kernel, tensor_supply_type: str = TensorSupplyType.Auto) -> Profiler:
    """`kernel.get_profiler(...)`: a Profiler for a compiled Kernel."""
    return Profiler(kernel, tensor_supply_type)
