"""Run shards of the long conformance profile on this machine, one process, until a deadline.

The long profile (`--tile-long`) is meant for a many-core host (`tools/ci_long_gpu.sh`); this
runs further shards of it where only idle cores are to be had (start it under `nice -n 19`),
so a profile can be completed over several sessions. Shards are numbered from `--first`;
shard i draws its programs from Hypothesis seed `--seed + i` (as `--tile-long --tile-seed`
does), so a rerun with the same options checks the same programs:

    nice -n 19 python tools/ci_long_local.py --target emu:sm_90 --seed 2000 --first 0 \\
        --shards 146 --per-shard 25 --minutes 40

Prints one line per shard (programs passed, seconds) and the totals; a failing program is
shrunk by the suite and its case file named, and the run goes on with the next shard.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    """Run the shards the options name; exit status 1 when any program failed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="emu:sm_90")
    ap.add_argument("--seed", type=int, required=True, help="the seed of shard 0")
    ap.add_argument("--first", type=int, default=0, help="the first shard to run")
    ap.add_argument("--shards", type=int, required=True, help="how many shards to run")
    ap.add_argument("--per-shard", type=int, default=25, help="programs per shard")
    ap.add_argument("--minutes", type=float, default=30.0, help="stop starting shards after this")
    args = ap.parse_args()

    from tilecore_conformance.profile import Profile
    from tilecore_conformance.report import ConformanceFailure
    from tilecore_conformance.suite import check_shard

    total = args.per_shard * (args.first + args.shards)
    profile = Profile(total, args.first + args.shards, args.seed, False)
    stop = time.monotonic() + 60 * args.minutes
    passed = done = 0
    failures = []
    for shard in range(args.first, args.first + args.shards):
        if time.monotonic() > stop:
            break
        t = time.monotonic()
        try:
            _, ran = check_shard(args.target, profile, shard)
        except ConformanceFailure as f:
            failures.append((shard, f))
            print(f"shard {shard} (seed {profile.shard_seed(shard)}): FAILED {f}", flush=True)
            continue
        finally:
            done += 1
        passed += ran
        print(f"shard {shard} (seed {profile.shard_seed(shard)}): {ran} programs passed, "
              f"{time.monotonic() - t:.1f} s", flush=True)
    print(f"TOTAL {args.target}: {done} shards, {passed} programs passed, {len(failures)} failing "
          f"shards (seeds {args.seed + args.first}..{args.seed + args.first + done - 1})", flush=True)
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
