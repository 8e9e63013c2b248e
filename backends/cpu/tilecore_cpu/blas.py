"""Keep OpenBLAS single-threaded while a kernel runs: kernels call BLAS once per tile from numba's
block threads, and a threaded OpenBLAS on tile-sized products spins up its own pool for every
call, which made a small GEMM 25-100x slower on two cores. Parallelism comes from blocks instead.

OpenBLAS exposes `*_set_num_threads` / `*_get_num_threads`; the libraries numba's `np.dot`
reaches (scipy's, NumPy's) are found among the shared objects this process has mapped. Where none
is found (another BLAS, another OS), this does nothing.

`preload_cython_blas` loads the one module numba takes BLAS from without the package around it.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
import sys
import threading
from contextlib import contextmanager
from functools import lru_cache

_PREFIXES = ("scipy_openblas", "openblas")
_SUFFIXES = ("", "64_", "_")
_lock = threading.Lock()


_CYTHON_BLAS = "scipy.linalg.cython_blas"


@lru_cache(maxsize=1)
def preload_cython_blas() -> bool:
    """Put scipy's `cython_blas` extension into `sys.modules` without running `scipy.linalg`'s
    `__init__` (0.2-0.3 s: it imports most of scipy.linalg and, through scipy's array-API
    layer, numpy.f2py), unless scipy.linalg is loaded already. numba needs only this module:
    its registries import `scipy.linalg.cython_blas` to see whether BLAS is there (every cold
    compile: numba.np.arraymath), and its `np.dot` takes the BLAS function pointers from the
    module's `__pyx_capi__` at the first call. The extension's own initialisation imports just
    `scipy` and `scipy._cyutility`. A later `import scipy.linalg` works as usual (and
    `from scipy.linalg import cython_blas` gives this module); only the attribute
    `scipy.linalg.cython_blas` is then missing until something imports it by that name.
    Returns whether the module is available; any failure leaves the ordinary import to numba."""
    if _CYTHON_BLAS in sys.modules or "scipy.linalg" in sys.modules:
        return True
    try:
        spec = importlib.util.find_spec("scipy")
        if spec is None or not spec.submodule_search_locations:
            return False
        folder = os.path.join(list(spec.submodule_search_locations)[0], "linalg")
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "cython_blas" + suffix)
            if os.path.exists(path):
                break
        else:
            return False
        loader = importlib.machinery.ExtensionFileLoader(_CYTHON_BLAS, path)
        mspec = importlib.util.spec_from_file_location(_CYTHON_BLAS, path, loader=loader)
        module = importlib.util.module_from_spec(mspec)
        sys.modules[_CYTHON_BLAS] = module
        try:
            loader.exec_module(module)
        except BaseException:
            sys.modules.pop(_CYTHON_BLAS, None)
            raise
        return True
    except (ImportError, OSError):
        return False


@lru_cache(maxsize=1)
def _controls() -> tuple:
    """(get, set) function pairs of every mapped OpenBLAS library."""
    try:
        preload_cython_blas()
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
