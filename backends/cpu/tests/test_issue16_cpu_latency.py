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
