"""The generated suite spread over every visible device of a host, several workers per device.

    python -m tilecore_conformance.shard --target cuda --programs 1600 [--workers-per-device 8]

Each worker is a fresh process pinned to one device (CUDA_VISIBLE_DEVICES is set before anything
initializes CUDA in it) that runs its share of the programs with `derandomize` off, so the
workers draw different programs; the totals and every failing worker's report (the case file it
wrote, printed in full) are printed at the end and the exit status is 1 when any worker failed.
Devices are `--devices` (a comma list), else CUDA_VISIBLE_DEVICES, else the GPUs `nvidia-smi -L`
lists; a target that does not run on a GPU gets one unpinned group of workers.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context

GPU_KINDS = ("cuda",)  # targets whose workers are pinned to a device


@dataclass(frozen=True)
class Shard:
    """One worker's share: its index, the device it is pinned to (None: unpinned), and how many
    programs it runs."""

    index: int
    device: str | None
    programs: int


@dataclass
class ShardResult:
    """What a worker reports back."""

    index: int
    device: str | None
    ran: int = 0
    exact: int = 0
    skipped: dict = field(default_factory=dict)
    error: str | None = None
    seen_devices: str | None = None  # CUDA_VISIBLE_DEVICES inside the worker


def visible_devices(env: dict | None = None) -> list[str]:
    """The GPU ids workers may be pinned to: CUDA_VISIBLE_DEVICES when set, else nvidia-smi's."""
    env = os.environ if env is None else env
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip()]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def plan(programs: int, devices: list[str | None], workers_per_device: int) -> list[Shard]:
    """Split `programs` as evenly as possible over `workers_per_device` workers on each device
    (workers are interleaved over devices, so a short run still uses every device)."""
    if workers_per_device < 1:
        raise ValueError("workers_per_device must be at least 1")
    devices = devices or [None]
    slots = [devices[i % len(devices)] for i in range(len(devices) * workers_per_device)]
    base, extra = divmod(programs, len(slots))
    return [Shard(i, dev, base + (i < extra)) for i, dev in enumerate(slots) if base + (i < extra)]


def run_shard(target: str, shard: Shard) -> ShardResult:
    """A worker's whole life (in its own spawned process): pin the device, run its programs."""
    if shard.device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = shard.device
    res = ShardResult(shard.index, shard.device, seen_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
    from .suite import RESULTS, check_target

    try:
        st = check_target(target, max_examples=shard.programs, derandomize=False, shrink=False)
    except BaseException as e:  # a disagreement: its report names the case file
        st = RESULTS.get(target)
        res.error = f"{type(e).__name__}: {e}"
    if st is not None:
        res.ran, res.exact, res.skipped = st.ran, st.exact, dict(st.skipped)
    return res


def _case_files(error: str) -> list[pathlib.Path]:
    """The case files a failure report names (`case (...): /path/case_x.py`)."""
    out = []
    for line in error.splitlines():
        path = line.strip().split("): ")[-1]
        if path.endswith(".py") and os.path.exists(path):
            out.append(pathlib.Path(path))
    return out


def run(target: str, programs: int, devices: list[str | None], workers_per_device: int,
        echo=print) -> tuple[int, int, list[ShardResult]]:
    """Run the shards in parallel; (programs passed, compared exactly, every worker's result)."""
    shards = plan(programs, devices, workers_per_device)
    results: list[ShardResult] = []
    ctx = get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(shards), mp_context=ctx, max_tasks_per_child=1) as pool:
        for res in pool.map(run_shard, [target] * len(shards), shards):
            results.append(res)
            echo(f"{time.strftime('%X')} worker {res.index} (device {res.device}): ran {res.ran} "
                 f"({res.exact} exact) skipped {sum(res.skipped.values())}")
            if res.error:
                echo(f"worker {res.index} FAILED:\n{res.error}")
                for path in _case_files(res.error):
                    echo(path.read_text())
    return sum(r.ran for r in results), sum(r.exact for r in results), results


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m tilecore_conformance.shard", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--programs", type=int, default=600, help="programs in all, over every worker")
    ap.add_argument("--workers-per-device", type=int, default=8)
    ap.add_argument("--devices", default=None, help="comma list of GPU ids (default: every visible GPU)")
    args = ap.parse_args(argv)
    from tilecore.target import Target

    pinned = Target.parse(args.target).kind in GPU_KINDS
    devices: list[str | None]
    if args.devices is not None:
        devices = [d for d in args.devices.split(",") if d]
    else:
        devices = visible_devices() if pinned else []
    ran, exact, results = run(args.target, args.programs, devices or [None], args.workers_per_device)
    fails = [r for r in results if r.error]
    skipped = Counter()
    for r in results:
        skipped.update(r.skipped)
    used = sorted({str(r.device) for r in results})
    print(f"CONFORMANCE {args.target}: {ran} programs passed ({exact} exact), {len(fails)} failing "
          f"workers, {len(results)} workers over devices {', '.join(used)}")
    return 1 if fails else 0


if __name__ == "__main__":
    raise SystemExit(main())
