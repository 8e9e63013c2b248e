"""Run the interpreter's NumPy matmuls on one BLAS thread.

Every `T.gemm` of a block is a small matrix product (a tile: 128x128x64 is typical). A
multithreaded OpenBLAS splits even those over its thread pool, and on a machine whose cores are
busy with other work the pool's threads spin waiting for each other: measured on a shared
2-core machine, one 128x128x64 float32 product took 34 ms on the pool and 0.14 ms on one thread.
One thread is also what a tile-sized product needs on a quiet machine, so the interpreter runs
its kernels with OpenBLAS's *thread-local* thread count set to 1 (`openblas_set_num_threads_local`,
OpenBLAS >= 0.3.27), restored afterwards: the caller's own NumPy work keeps its setting.

A split of the M/N output over threads does not change any sum, so results are identical.
Where NumPy uses another BLAS, or an OpenBLAS without the thread-local call, nothing changes.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os

import numpy as np

_SETTER = None  # the ctypes function, False once looked up and not found


def _find_setter():
    """OpenBLAS's `openblas_set_num_threads_local` in the library NumPy loaded, or None."""
    libs = []
    try:
        with open("/proc/self/maps") as f:  # the copy NumPy actually loaded (Linux)
            libs = sorted({ln.split()[-1] for ln in f if "openblas" in ln})
    except OSError:
        pass
    if not libs:  # NumPy's wheel bundles it beside the package
        base = os.path.dirname(os.path.dirname(np.__file__))
        libs = glob.glob(os.path.join(base, "numpy.libs", "*openblas*"))
    for path in libs:
        try:
            fn = ctypes.CDLL(path).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
        return fn
    return None


@contextlib.contextmanager
def one_thread():
    """BLAS calls of the current thread use one thread inside the block; restored on exit."""
    global _SETTER
    if _SETTER is None:
        _SETTER = _find_setter() or False
    if not _SETTER:
        yield
        return
    prev = _SETTER(1)
    try:
        yield
    finally:
        _SETTER(prev)
