"""Per-program numba compile cost of the cpu target on the conformance suite's CI programs.

    python tools/cpu_compile_cost.py --shards 0          # shard 0 of the CI profile (50 cases)
    python tools/cpu_compile_cost.py --shards 0,1 --parts

Draws the programs of the given CI shards exactly as `test_generated_programs[cpu-s<i>]` does
(same Hypothesis seeds; nothing is executed, so the draw can differ from the suite's after a
skipped case), then compiles each distinct program for `cpu` in this process with private empty
caches (TILECORE_CACHE_DIR and NUMBA_CACHE_DIR in a temporary directory, as a cold CI run) and
prints the CPU seconds per program: total, mean, median, first (it compiles the runtime helpers
it calls). `--parts` splits the total into numba's type inference, its Python-level lowering and
LLVM (optimization and machine code), measured by wrapping numba's own entry points. CPU
seconds, not wall time: the machine is shared. Used for the figures in BENCHMARKS.md
("cpu compile cost").
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections import Counter


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def draw(shards: list[int]) -> list:
    """The distinct cases the CI profile's `shards` draw on cpu (in order)."""
    from tilecore_conformance import runner, suite
    from tilecore_conformance.profile import from_options

    got: dict = {}

    def record(case, target, seed, func=None):
        why = runner.unsupported(case, target)
        if why:
            return runner.Outcome("skip", why)
        got.setdefault(case.key, case)
        return runner.Outcome("pass")

    plain = suite.check_case
    suite.check_case = record
    try:
        profile = from_options(None, False, None, None)
        for s in shards:
            suite.check_shard("cpu", profile, s)
    finally:
        suite.check_case = plain
    return list(got.values())


def _wrap_parts(parts: Counter) -> None:
    """Count CPU seconds in numba's typing, lowering and LLVM (outermost call only)."""
    from numba.core import codegen, lowering, typeinfer

    def wrap(owner, name, label):
        plain = getattr(owner, name)
        depth = [0]

        def timed(*a, **k):
            if depth[0]:
                return plain(*a, **k)
            depth[0] += 1
            t = time.process_time()
            try:
                return plain(*a, **k)
            finally:
                parts[label] += time.process_time() - t
                depth[0] -= 1

        setattr(owner, name, timed)

    wrap(typeinfer.TypeInferer, "propagate", "type inference")
    wrap(lowering.Lower, "lower", "lowering (Python)")
    wrap(codegen.CPUCodeLibrary, "finalize", "LLVM (optimize + machine code)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", default="0", help="comma-separated CI shard numbers (0-5)")
    ap.add_argument("--parts", action="store_true", help="split into typing / lowering / LLVM")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cpu_compile_cost_")
    os.environ["TILECORE_CACHE_DIR"] = os.path.join(tmp, "tilecore")
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(tmp, "numba")
    cases = draw([int(s) for s in args.shards.split(",")])
    from tilecore_conformance import loader

    import tilecore

    parts: Counter = Counter()
    if args.parts:
        _wrap_parts(parts)
    times = []
    for case in cases:
        func = loader.prim_func(case)
        t = _cpu()
        tilecore.compile(func, out_idx=None, target="cpu")
        times.append(_cpu() - t)
    print(f"{len(times)} programs: {sum(times):.1f} CPU-s, mean {statistics.mean(times):.3f}, "
          f"median {statistics.median(times):.3f}, first {times[0]:.2f}")
    for label, s in parts.most_common():
        print(f"  {label}: {s:.1f} CPU-s")


if __name__ == "__main__":
    sys.exit(main())
