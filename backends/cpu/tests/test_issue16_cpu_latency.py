"""Issue 16 item 17: the README quickstart on cpu builds and runs quickly from empty caches,
and a new process finds it in the compile cache.

The figures are CPU seconds of the child process (`benchmarks/host_overhead.py --child`, the
benchmark's own case, so the test and BENCHMARKS.md measure one thing): wall time on a shared
CI machine says more about the other jobs. The goal is 2 s cold and 0.5 s for a hit on an idle
machine (measured 2.0 and 0.6 CPU-s on the 2-core CI machine under load); the bounds leave
room for a slower machine but fail on a return of the reported 10 s build + 5.7 s first call
(a numba compile per helper, a launcher compiled twice)."""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
COLD_CPU_S = 3.5
HIT_CPU_S = 1.2


def _quickstart(cache: pathlib.Path) -> dict:
    env = dict(os.environ, TILECORE_CACHE_DIR=str(cache), NUMBA_CACHE_DIR=str(cache / "numba"))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_overhead.py"), "--child",
                          "quickstart", "--target", "cpu"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_quickstart_on_cpu_from_empty_caches_then_from_the_compile_cache(tmp_path):
    cold = _quickstart(tmp_path)
    hit = _quickstart(tmp_path)
    assert cold["jit_call_cpu_s"] <= COLD_CPU_S, cold
    assert hit["jit_call_cpu_s"] <= HIT_CPU_S, hit
    assert hit["jit_call_cpu_s"] < cold["jit_call_cpu_s"] / 2, (cold, hit)  # it really was a hit
    # numba's BLAS comes from scipy's cython_blas alone, not scipy.linalg (0.2-0.3 s of each)
    assert not cold["scipy_linalg_imported"] and not hit["scipy_linalg_imported"], (cold, hit)


_HIT = r"""
import sys
import numpy as np
import tilecore
import tilecore.language as T

@T.prim_func
def scale(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(2, threads=32) as bx:
        s = T.alloc_shared((32,), "float32")
        T.copy(A[bx * 32], s)
        for i in T.Parallel(32):
            s[i] = s[i] * 2.0 + 1.0
        T.copy(s, B[bx * 32])

k = tilecore.compile(scale, out_idx=[-1], target="cpu")
a = np.arange(64, dtype=np.float32)
assert np.array_equal(k(a), a * 2 + 1)
print("registries" if "numba.np.arraymath" in sys.modules else "lazy")
"""


def test_a_cache_hit_runs_without_loading_numbas_registries(tmp_path):
    """A new process loading a cached kernel skips numba's registry refresh (tilecore_cpu.cache
    .lazy_registries: 0.25 s of the hit, scipy's import among it), and the kernel still runs
    right (its allocations go through numba's runtime, which is initialised)."""
    env = dict(os.environ, TILECORE_CACHE_DIR=str(tmp_path), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    script = tmp_path / "hit.py"
    script.write_text(_HIT)
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                           timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    assert runs[0].stdout.split()[-1] == "registries"  # the miss compiled (with the registries)
    assert runs[1].stdout.split()[-1] == "lazy", runs[1].stdout
