"""Where CI's time goes, in CPU seconds: a pytest plugin and its summary.

`--durations` reports wall time, which on a shared machine says more about the other jobs than
about the test. This plugin records, per test, the CPU seconds of the test's process plus those
of the subprocesses it waited for (nvcc, clang, a rank of the tensor-parallel example), so
runs on a loaded machine still rank tests by what they cost:

    PYTHONPATH=tools CI_CPU_DURATIONS=/tmp/cpu PYTEST_ADDOPTS="-p ci_cpu_durations" bash .ci/run
    python tools/ci_cpu_durations.py /tmp/cpu            # the 40 costliest tests and files

One tab-separated file per pytest-xdist worker: node id, CPU seconds, wall seconds, start time.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

ENV = "CI_CPU_DURATIONS"


def _cpu_seconds() -> float:
    """User + system seconds of this process and of its waited-for children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Time one test's setup, call and teardown."""
    cpu, wall = _cpu_seconds(), time.time()
    yield
    out = Path(os.environ.get(ENV, "ci-cpu-durations"))
    out.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(out / f"{worker}.tsv", "a") as f:
        f.write(f"{item.nodeid}\t{_cpu_seconds() - cpu:.3f}\t{time.time() - wall:.3f}\t{wall:.1f}\n")


def summarize(folder: str, top: int = 40) -> str:
    """The costliest tests and test files of a recorded run, and the total."""
    rows = []
    for path in sorted(Path(folder).glob("*.tsv")):
        for line in path.read_text().splitlines():
            node, cpu, wall, _ = line.split("\t")
            rows.append((float(cpu), float(wall), node))
    files: dict[str, float] = defaultdict(float)
    for cpu, _, node in rows:
        files[node.split("::")[0]] += cpu
    lines = [f"{len(rows)} tests, {sum(r[0] for r in rows):.0f} CPU-s", "", "CPU-s   wall-s  test"]
    lines += [f"{c:6.1f} {w:7.1f}  {n}" for c, w, n in sorted(rows, reverse=True)[:top]]
    lines += ["", "CPU-s  file"]
    lines += [f"{c:6.1f}  {f}" for f, c in sorted(files.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarize(sys.argv[1] if len(sys.argv) > 1 else "ci-cpu-durations"))
