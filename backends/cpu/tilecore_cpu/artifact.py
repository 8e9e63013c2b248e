"""The `tile_build` result for target cpu: generated source, the compiled launcher, and the host
side that passes arrays in their storage form and turns recorded faults into TileRuntimeErrors."""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass

import numpy as np

from tilecore import dtypes as dt
from tilecore.errors import SourceLoc, TileRuntimeError

from . import debug
from .blas import preload_cython_blas, single_threaded
from .cache import lazy_registries, load, load_compiled, runtime_tag
from .emit import Fault
from .exprs import NARROW_BITS, SUB_BYTE_INT, storage_np
from .optlevel import SERIAL_OPT, kernel_opt, on_fresh_stack

# Below this many bytes of arguments blocks run on the calling thread: waking numba's worker
# threads costs tens of microseconds (milliseconds on a loaded machine), more than small kernels take.
PARALLEL_BYTES = 1 << 18
# "auto": above PARALLEL_BYTES, pick whichever launcher has been faster per byte for this kernel
# (LaunchChooser); on a machine whose cores are busy with other work, prange's worker threads wait
# for time slices and the serial launcher wins (measured 2-10x on a loaded 2-core machine), on an
# idle one prange wins. "always" / "never" override (env TILECORE_CPU_PARALLEL, or tests).
PARALLEL = os.environ.get("TILECORE_CPU_PARALLEL", "auto")
# "auto" compiles the parallel (prange) launcher, which costs about a second, only once this
# kernel's serial runs of large calls have taken this long in the process: a kernel run once or
# twice (the quickstart) never pays for a compile worth more than its runs (ski rental: at worst
# twice the best total).
PARALLEL_COMPILE_AFTER = float(os.environ.get("TILECORE_CPU_PARALLEL_AFTER", "0.5"))
ENTRY_FORMAT = 2  # 2: T.print sites and device-assertion messages
_HINT = "guard the access with `if` or T.if_then_else, or size the grid to the tensor"


class LaunchChooser:
    """Measures both launchers on large calls and uses the faster, re-trying the other one every
    `EXPLORE` calls so a change in machine load is noticed."""

    EXPLORE = 8

    def __init__(self):
        self.cost = [None, None]  # seconds per byte: [serial, parallel], exponential averages
        self.calls = 0

    def pick(self, nbytes: int) -> int:
        """0 for the serial launcher, 1 for the parallel one."""
        if PARALLEL == "always":
            return 1
        if PARALLEL == "never" or nbytes < PARALLEL_BYTES:
            return 0
        self.calls += 1
        for mode in (1, 0):
            if self.cost[mode] is None:
                return mode
        best = 0 if self.cost[0] <= self.cost[1] else 1
        return 1 - best if self.calls % self.EXPLORE == 0 else best

    def record(self, mode: int, nbytes: int, seconds: float) -> None:
        """Fold one measured call into the mode's average cost."""
        c = seconds / max(nbytes, 1)
        old = self.cost[mode]
        self.cost[mode] = c if old is None else 0.5 * old + 0.5 * c


def _numba_signature(params, prints: bool = False, scalars: int = 0):
    """numba's signature of a launcher for `params` ([(DType, rank)]): C arrays of the storage
    dtypes, then `scalars` int64 scalar parameters, then the int64 error record, then (when the
    kernel prints) the T.print logs."""
    import numba
    from numba import types

    arrays = [types.Array(numba.from_dtype(storage_np(d)), rank, "C") for d, rank in params]
    log = (types.Array(types.int64, 2, "C"), types.Array(types.float64, 2, "C")) if prints else ()
    return tuple(arrays) + (types.int64,) * scalars + (types.Array(types.int64, 1, "C"),) + log


@dataclass(frozen=True)
class FaultBuffer:
    """What a fault message says about a buffer (a cache entry's stand-in for the Buffer)."""

    name: str
    scope: str
    shape: tuple


class CpuArtifact:
    """A kernel compiled by numba; `run` executes it on NumPy arrays in place.

    Built from the generated source, its fault sites, whether its launcher may run blocks in
    parallel, each parameter's (DType, rank) and the names of the scalar parameters:
    `build(module)` generates them, a compile-cache entry stores them (`cache_entry`,
    `from_cache_entry`)."""

    array_api = "numpy"

    def __init__(self, source: str, faults: list, parallel: bool, params: list, prints: tuple = (),
                 scalars: tuple = ()):
        self.source = source
        self.faults = faults  # [Fault], numbered from 1 in the generated code
        self.parallel = parallel
        self.params = params
        self.scalars = tuple(scalars)  # scalar parameters' names, in the launchers' order
        self.prints = tuple(prints)  # T.print sites (tilecore_cpu.debug)
        self.module, self.path = load(self.source)
        self.launch_serial = self.module.launch_serial
        # the parallel launcher is compiled only once serial calls have cost about as much as
        # compiling it would (PARALLEL_COMPILE_AFTER): a kernel called once never pays for it
        self.launch = getattr(self.module, "launch", None)
        self.serial_seconds = 0.0
        self.uses_blas = "np.dot(" in self.source
        self.chooser = LaunchChooser()
        self._compile(self.launch_serial)

    @classmethod
    def build(cls, module) -> CpuArtifact:
        """Generate and compile the tile-level `module`."""
        from .codegen import Codegen  # code generation: not imported by a compile-cache hit

        func = module.func
        gen = Codegen(func, runtime_tag()).generate()
        return cls(gen.source, list(gen.faults.sites), gen.parallel,
                   [(p.dtype, len(p.shape)) for p in func.params], gen.prints,
                   tuple(v.name for v in func.attr("scalar_params", ())))

    def _compile(self, dispatcher) -> None:
        # the serial launcher's own code at SERIAL_OPT (cheaper to compile, same results); the
        # parallel launcher, compiled for kernels that run long, at numba's level (optlevel.py)
        from numba.core import config

        level = SERIAL_OPT if dispatcher is self.launch_serial else int(config.OPT)

        sig = _numba_signature(self.params, bool(self.prints), len(self.scalars))

        def compile_there():
            with lazy_registries(dispatcher), kernel_opt(dispatcher, level):
                dispatcher.compile(sig)

        def compile_it():
            preload_cython_blas()  # before numba's registries import scipy.linalg (blas.py)
            with warnings.catch_warnings():  # the filters are the process's: the thread's too
                # np.dot on transposed (Fortran-order) tiles is fine: BLAS takes them as they are
                warnings.simplefilter("ignore", category=_perf_warning())
                on_fresh_stack(compile_there)  # a shallow Python stack (optlevel.py)

        load_compiled(self.path, compile_it)

    def _want_parallel(self, nbytes: int) -> int:
        """0 (serial) or 1 (parallel launcher) for a call moving `nbytes`."""
        if self.launch is None:
            return 0
        if not self.launch.signatures and PARALLEL != "always":
            if nbytes < PARALLEL_BYTES or PARALLEL == "never" or self.serial_seconds < PARALLEL_COMPILE_AFTER:
                return 0
        return self.chooser.pick(nbytes)

    def run(self, args, dyn) -> None:
        """Execute on arrays in parameter order (outputs included, written in place); `dyn`
        (name -> int) gives the scalar parameters, which the host checked against their dtype."""
        views = []
        for a, (d, _) in zip(args, self.params):
            if d.name in NARROW_BITS:
                a = a.view(NARROW_BITS[d.name])
            elif d.name in SUB_BYTE_INT:  # ml_dtypes nibbles -> the int8 / uint8 of each value
                a = a.astype(SUB_BYTE_INT[d.name])  # a copy: sub-byte tensors are inputs only
            views.append(a)
        nbytes = sum(a.nbytes for a in views)
        views.extend(np.int64(dyn[name]) for name in self.scalars)
        err = np.zeros(8, dtype=np.int64)
        mode = self._want_parallel(nbytes)
        fn = self.launch if mode else self.launch_serial
        compiled_now = mode and not self.launch.signatures
        if compiled_now:
            self._compile(self.launch)
        log = debug.new_log(self.prints) if self.prints else ()
        t = time.perf_counter()
        if self.uses_blas:
            with single_threaded():
                fn(*views, err, *log)
        else:
            fn(*views, err, *log)
        spent = time.perf_counter() - t
        if not mode:
            self.serial_seconds += spent
        if self.prints:
            debug.flush(self.prints, log, err)
        if nbytes >= PARALLEL_BYTES and not compiled_now:
            self.chooser.record(mode, nbytes, spent)
        if err[0]:
            raise self._fault(int(err[0]), [int(i) for i in err[1:5]])

    def _fault(self, code: int, idx: list[int]) -> TileRuntimeError:
        f: Fault = self.faults[code - 1]
        if f.kind == "assert":
            return debug.fault_error(f, idx)
        if f.kind == "divzero":
            return TileRuntimeError("integer division by zero", f.loc,
                                    hint="guard the division (`if d != 0:`) or check the divisor")
        if f.kind == "shift":  # interp's message (semantics.ShiftCountError); rank: the width
            return TileRuntimeError(f"shift count {idx[0]} is outside [0, {f.rank}) in {f.buffer}",
                                    f.loc, hint="shift by a count in [0, bit width)")
        b = f.buffer
        where = tuple(idx[: min(f.rank, 4)])
        shape = _shape_text(b.shape)
        if f.kind == "region":
            return TileRuntimeError(
                f"tile region starting at {where} lies outside {b.scope} buffer {b.name}{shape}",
                f.loc, hint="tile regions of shared/fragment buffers must stay inside the buffer")
        return TileRuntimeError(
            f"out-of-bounds {f.kind} of {b.scope} buffer {b.name}{shape} at index {where}",
            f.loc, hint=_HINT)

    # ------------------------------------------------------------------ compile cache
    def cache_entry(self):
        """(meta, blobs): the generated source (a blob), fault sites, parallelism, parameter
        layout and T.print sites (JSON). numba's machine code stays in numba's own cache beside
        the source. A device assertion's fault site keeps its message in place of a buffer."""
        faults = []
        for f in self.faults:
            if isinstance(f.buffer, str):  # an assertion's message, a shift's operation
                buffer = {"msg": f.buffer}
            elif f.buffer is None:
                buffer = None
            else:
                buffer = [f.buffer.name, f.buffer.scope, [_dim(s) for s in f.buffer.shape]]
            faults.append({"kind": f.kind, "rank": f.rank,
                           "loc": [f.loc.file, f.loc.line] if f.loc is not None else None,
                           "buffer": buffer})
        meta = {"backend": "cpu", "format": ENTRY_FORMAT, "parallel": self.parallel,
                "params": [[d.name, rank] for d, rank in self.params], "faults": faults,
                "scalars": list(self.scalars),
                "prints": [[fmt, [d.name for d in dtypes]] for fmt, dtypes in self.prints]}
        return meta, {"source": self.source.encode()}

    @classmethod
    def from_cache_entry(cls, meta: dict, blobs: dict) -> CpuArtifact | None:
        """The artifact a `cache_entry` describes (loading numba's cached machine code), or None
        when it is not a usable cpu entry."""
        if meta.get("backend") != "cpu" or meta.get("format") != ENTRY_FORMAT:
            return None
        faults = []
        for f in meta["faults"]:
            b = f["buffer"]
            loc = SourceLoc(f["loc"][0], int(f["loc"][1])) if f["loc"] else None
            if isinstance(b, dict):
                buffer = str(b["msg"])
            else:
                buffer = FaultBuffer(b[0], b[1], tuple(b[2])) if b else None
            faults.append(Fault(f["kind"], buffer, loc, int(f["rank"])))
        params = [(dt.as_dtype(d), int(rank)) for d, rank in meta["params"]]
        prints = tuple((str(fmt), tuple(dt.as_dtype(d) for d in dtypes))
                       for fmt, dtypes in meta.get("prints", ()))
        return cls(blobs["source"].decode(), faults, bool(meta["parallel"]), params, prints,
                   tuple(str(n) for n in meta.get("scalars", ())))


def _dim(s):
    return s if isinstance(s, int) else getattr(s, "name", str(s))


def _shape_text(shape) -> str:
    """`(64, n)`: a buffer's shape as a fault message spells it (symbolic sizes by name)."""
    dims = [str(_dim(s)) for s in shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _perf_warning():
    from numba.core.errors import NumbaPerformanceWarning

    return NumbaPerformanceWarning
