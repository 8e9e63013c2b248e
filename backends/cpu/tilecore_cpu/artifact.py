"""The `tile_build` result for target cpu: generated source, the compiled launcher, and the host
side that passes arrays in their storage form and turns recorded faults into TileRuntimeErrors."""

from __future__ import annotations

import os
import time
import warnings

import numpy as np

from tilecore.errors import TileRuntimeError

from .blas import single_threaded
from .cache import load, runtime_tag
from .codegen import Codegen
from .emit import Fault
from .exprs import NARROW_BITS, storage_np

# Below this many bytes of arguments blocks run on the calling thread: waking numba's worker
# threads costs tens of microseconds (milliseconds on a loaded machine), more than small kernels take.
PARALLEL_BYTES = 1 << 18
# "auto": above PARALLEL_BYTES, pick whichever launcher has been faster per byte for this kernel
# (LaunchChooser); on a machine whose cores are busy with other work, prange's worker threads wait
# for time slices and the serial launcher wins (measured 2-10x on a loaded 2-core machine), on an
# idle one prange wins. "always" / "never" override (env TILECORE_CPU_PARALLEL, or tests).
PARALLEL = os.environ.get("TILECORE_CPU_PARALLEL", "auto")
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


def _numba_signature(func):
    import numba
    from numba import types

    arrays = [types.Array(numba.from_dtype(storage_np(p.dtype)), len(p.shape), "C") for p in func.params]
    return tuple(arrays) + (types.Array(types.int64, 1, "C"),)


class CpuArtifact:
    """A kernel compiled by numba; `run` executes it on NumPy arrays in place."""

    array_api = "numpy"

    def __init__(self, module):
        self.func = module.func
        gen = Codegen(self.func, runtime_tag()).generate()
        self.source = gen.source
        self.faults = gen.faults
        self.parallel = gen.parallel
        self.module, self.path = load(self.source)
        self.launch_serial = self.module.launch_serial
        # the parallel launcher compiles on first use: small calls never need it
        self.launch = getattr(self.module, "launch", None)
        self.uses_blas = "np.dot(" in self.source
        self.chooser = LaunchChooser()
        self._compile(self.launch_serial)

    def _compile(self, dispatcher) -> None:
        with warnings.catch_warnings():
            # np.dot on transposed (Fortran-order) tiles is fine: BLAS takes them as they are
            warnings.simplefilter("ignore", category=_perf_warning())
            dispatcher.compile(_numba_signature(self.func))

    def run(self, args, dyn) -> None:
        """Execute on arrays in parameter order (outputs included, written in place)."""
        views = []
        for a, p in zip(args, self.func.params):
            if p.dtype.name in NARROW_BITS:
                a = a.view(NARROW_BITS[p.dtype.name])
            views.append(a)
        err = np.zeros(8, dtype=np.int64)
        nbytes = sum(a.nbytes for a in views)
        mode = self.chooser.pick(nbytes) if self.launch is not None else 0
        fn = self.launch if mode else self.launch_serial
        compiled_now = mode and not self.launch.signatures
        if compiled_now:
            self._compile(self.launch)  # compiled on first use: small calls never need it
        t = time.perf_counter()
        if self.uses_blas:
            with single_threaded():
                fn(*views, err)
        else:
            fn(*views, err)
        if nbytes >= PARALLEL_BYTES and not compiled_now:
            self.chooser.record(mode, nbytes, time.perf_counter() - t)
        if err[0]:
            raise self._fault(int(err[0]), [int(i) for i in err[1:5]])

    def _fault(self, code: int, idx: list[int]) -> TileRuntimeError:
        f: Fault = self.faults.sites[code - 1]
        if f.kind == "divzero":
            return TileRuntimeError("integer division by zero", f.loc,
                                    hint="guard the division (`if d != 0:`) or check the divisor")
        b = f.buffer
        where = tuple(idx[: min(f.rank, 4)])
        if f.kind == "region":
            return TileRuntimeError(
                f"tile region starting at {where} lies outside {b.scope} buffer {b.name}{tuple(b.shape)}",
                f.loc, hint="tile regions of shared/fragment buffers must stay inside the buffer")
        return TileRuntimeError(
            f"out-of-bounds {f.kind} of {b.scope} buffer {b.name}{tuple(b.shape)} at index {where}",
            f.loc, hint=_HINT)


def _perf_warning():
    from numba.core.errors import NumbaPerformanceWarning

    return NumbaPerformanceWarning
