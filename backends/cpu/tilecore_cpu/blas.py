"""Keep OpenBLAS single-threaded while a kernel runs: kernels call BLAS once per tile from numba's
block threads, and a threaded OpenBLAS on tile-sized products spins up its own pool for every
call, which made a small GEMM 25-100x slower on two cores. Parallelism comes from blocks instead.

OpenBLAS exposes `*_set_num_threads` / `*_get_num_threads`; the libraries numba's `np.dot`
reaches (scipy's, NumPy's) are found among the shared objects this process has mapped. Where none
is found (another BLAS, another OS), this does nothing.
"""

from __future__ import annotations

import ctypes
import threading
from contextlib import contextmanager
from functools import lru_cache

_PREFIXES = ("scipy_openblas", "openblas")
_SUFFIXES = ("", "64_", "_")
_lock = threading.Lock()


@lru_cache(maxsize=1)
def _controls() -> tuple:
    """(get, set) function pairs of every mapped OpenBLAS library."""
    try:
        import scipy.linalg.cython_blas  # noqa: F401  (numba's np.dot links BLAS through it)

        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower()
                            and line.split()[-1].startswith("/")})
    except (ImportError, OSError):
        return ()
    out = []
    for p in paths:
        try:
            lib = ctypes.CDLL(p)
        except OSError:
            continue
        for pre in _PREFIXES:
            pair = None
            for suf in _SUFFIXES:
                get = getattr(lib, f"{pre}_get_num_threads{suf}", None)
                put = getattr(lib, f"{pre}_set_num_threads{suf}", None)
                if get is not None and put is not None and suf != "_":
                    get.restype = ctypes.c_int
                    put.argtypes = [ctypes.c_int]
                    pair = (get, put)
                    break
            if pair is not None:
                out.append(pair)
                break
    return tuple(out)


@contextmanager
def single_threaded():
    """Run the body with every OpenBLAS found limited to one thread, then restore the counts."""
    controls = _controls()
    if not controls:
        yield
        return
    with _lock:
        saved = [get() for get, _ in controls]
        for _, put in controls:
            put(1)
    try:
        yield
    finally:
        with _lock:
            for (_, put), n in zip(controls, saved):
                put(n)
