"""Digests of the cpu target's outputs on the CI shards' generated programs, to show that a
change to the cpu backend leaves every result bit-identical.

    python tools/cpu_output_digests.py --out before.json            # all six CI shards
    python tools/cpu_output_digests.py --out after.json --compare before.json
    python tools/cpu_output_digests.py --shards 2 --out s2.json

Runs `suite.check_shard("cpu", CI profile, i)` (the conformance checks included: a mismatch
against interp is counted as usual) with private empty caches, and records a SHA-256 of every
argument array (dtype, shape, bytes) after each cpu run, keyed by case, parameters and input
seed. `--compare` prints the keys whose digests differ (or that only one file has) and exits 1
when any does. Used for the figures in BENCHMARKS.md ("CI time: cpu backend compile").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import tempfile


def digests(shards: list[int]) -> dict:
    """{case|params|seed: sha256} of the cpu outputs of the given CI shards."""
    from tilecore_conformance import runner, suite
    from tilecore_conformance.profile import from_options

    out: dict = {}
    plain = runner.execute

    def execute(case, target, seed, **kw):
        args = plain(case, target, seed, **kw)
        if target == "cpu":
            h = hashlib.sha256()
            for a in args:
                h.update(f"{a.dtype}{a.shape}".encode())
                h.update(a.tobytes())
            out[f"{case.key}|{case.params}|{seed}"] = h.hexdigest()
        return args

    runner.execute = execute
    try:
        profile = from_options(None, False, None, None)
        for s in shards:
            stats, _ = suite.check_shard("cpu", profile, s)
            print(f"shard {s}: {stats.summary()}", flush=True)
    finally:
        runner.execute = plain
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", default="0,1,2,3,4,5", help="comma-separated CI shard numbers")
    ap.add_argument("--out", required=True, help="where to write the digests (JSON)")
    ap.add_argument("--compare", help="digests written before: report every difference")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cpu_output_digests_")
    for env, sub in (("TILECORE_CACHE_DIR", "tilecore"), ("NUMBA_CACHE_DIR", "numba"),
                     ("TILECORE_CONFORMANCE_DIR", "conformance")):
        os.environ[env] = os.path.join(tmp, sub)
    got = digests([int(s) for s in args.shards.split(",")])
    with open(args.out, "w") as f:
        json.dump(got, f, indent=0, sort_keys=True)
    r = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{len(got)} outputs; {r.ru_utime + r.ru_stime:.1f} CPU-s")
    if not args.compare:
        return 0
    with open(args.compare) as f:
        want = json.load(f)
    bad = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    for k in bad:
        print(f"differs: {k}")
    print(f"{len(bad)} of {len(set(want) | set(got))} outputs differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
