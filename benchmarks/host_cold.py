"""Issue 15's cold-compile bullet (<= 1.2 s): the 4096^3 GEMM's cold `tilecore.jit` in fresh
processes on empty compile caches, alternating four configurations ROUNDS times so that drift
on the machine falls on each alike:

- `installed`: tilecore byte-compiled, as `pip install` leaves it (a copy of the tree with .pyc
  files written by compileall), or `source`: the tree as it is (on the lent GPU machine, with
  PYTHONDONTWRITEBYTECODE=1 and no __pycache__, every module compiles from source);
- with or without the NVRTC reader thread (`tilecore_cuda.prewarm`, TILECORE_CUDA_PREWARM=1).

The first child is the machine's first compiling process when the machine is fresh (the
report says `first`). Then one cold process under cProfile, sorted by own time (where the
pipeline's time goes on this machine). Children are `host_overhead.py --child gemm`, phases
timed by `host_phases.py`. Prints a markdown table; `--out` writes the raw results as JSON.

Usage (repository root, cuda runnable): python benchmarks/host_cold.py --rounds 2 --out r.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TREE = ("tilecore", "backends", "examples", "benchmarks", "conformance")
CONFIGS = (("installed", True), ("installed", False), ("source", True), ("source", False))


def installed_copy(dest: str) -> str:
    """A copy of the tree's Python packages under `dest`, byte-compiled as pip does."""
    for d in TREE:
        src = os.path.join(ROOT, d)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(dest, d), ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0",
                    *(os.path.join(dest, d) for d in ("tilecore", "backends", "examples", "benchmarks"))],
                   check=False, capture_output=True)
    return dest


def _env_for(tree: str, cache: str, parts: str, reader: bool) -> dict:
    """The environment of a child importing tilecore from `tree` (the PYTHONPATH entries under
    the repository root are moved there), with the NVRTC reader thread on or off."""
    env = dict(os.environ, TILECORE_CACHE_DIR=cache, HOST_OVERHEAD_PARTS=parts,
               TILECORE_CUDA_PREWARM="1" if reader else "0")
    paths = env.get("PYTHONPATH", "").split(os.pathsep) if env.get("PYTHONPATH") else []
    moved = [tree + p[len(ROOT):] if p == ROOT or p.startswith(ROOT + os.sep) else p for p in paths]
    if tree not in moved:
        moved.insert(0, tree)
    env["PYTHONPATH"] = os.pathsep.join(moved)
    return env


def run_child(tree: str, parts: str, target: str, reader: bool) -> dict:
    """One cold gemm jit in a fresh process importing tilecore from `tree`."""
    with tempfile.TemporaryDirectory(prefix="tilecore_cold_") as cache:
        cmd = [sys.executable, os.path.join(tree, "benchmarks", "host_overhead.py"), "--child", "gemm",
               "--target", target]
        t = time.perf_counter()
        proc = subprocess.run(cmd, env=_env_for(tree, cache, parts, reader), cwd=tree, capture_output=True,
                              text=True, check=False)
        wall = time.perf_counter() - t
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-3:], "process_wall_s": wall}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["process_wall_s"] = wall
    return res


def _ms(v) -> str:
    return f"{v * 1e3:.0f}" if isinstance(v, (int, float)) else "n/a"


def table(results: list[dict]) -> str:
    """Min / median of the jit and of each phase, per configuration."""
    rows = ["| tilecore | reader thread | runs | cold jit, min / median (ms) | phases, median (ms) "
            "| errors |",
            "|---|---|---|---|---|---|"]
    for kind, reader in CONFIGS:
        runs = [r for r in results if r["config"] == [kind, reader]]
        ok = [r for r in runs if "jit_s" in r]
        if not runs:
            continue
        jit = [r["jit_s"] for r in ok]
        names = sorted({k for r in ok for k in r.get("phases", {})})
        ph = ", ".join(f"{n} {_ms(statistics.median(r['phases'].get(n, 0.0) for r in ok))}" for n in names)
        first = " (first process: " + _ms(runs[0].get("jit_s")) + ")" if runs[0].get("first") else ""
        lo, mid = (min(jit), statistics.median(jit)) if jit else (None, None)
        rows.append(f"| {kind} | {'yes' if reader else 'no'} | {len(ok)} | {_ms(lo)} / {_ms(mid)}{first} | "
                    f"{ph} | {len(runs) - len(ok)} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--configs", default="installed:1,installed:0,source:1,source:0",
                    help="which of the four, in order: installed|source : reader thread 1|0")
    ap.add_argument("--out")
    args = ap.parse_args()
    uptime = open("/proc/uptime").read().split()[0] if os.path.exists("/proc/uptime") else "?"
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="tilecore_installed_") as inst:
        t = time.perf_counter()
        installed_copy(inst)
        print(f"byte-compiled copy in {time.perf_counter() - t:.1f} s; uptime {uptime} s", flush=True)
        trees = {"source": ROOT, "installed": inst}
        chosen = [(k, r == "1") for k, r in (c.split(":") for c in args.configs.split(","))]
        for rnd in range(args.rounds):
            for kind, reader in chosen:
                r = run_child(trees[kind], "phases", args.target, reader)
                r["config"], r["round"], r["first"] = [kind, reader], rnd, not results
                results.append(r)
                print(kind, "reader" if reader else "no reader", _ms(r.get("jit_s")), r.get("error", ""),
                      flush=True)
        prof = None
        if not args.no_profile:
            os.environ["HOST_PROFILE_SORT"] = "tottime"
            prof = run_child(trees["installed"], "profile", args.target, False)
    print(table(results))
    if prof is not None:
        print(f"cold jit under cProfile (installed, no reader thread): {_ms(prof.get('jit_s'))} ms")
        print(prof.get("profile", prof.get("error")))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"uptime_s": uptime, "runs": results, "profile": prof}, f, indent=1)


if __name__ == "__main__":
    main()
