"""@tilecore.autotune on the GEMM beside the hand-picked config, and the second (cached) run.

Run: python benchmarks/autotune.py [--target cuda] [--size 4096] [--dtype float16] [--out f.json]
     python benchmarks/autotune.py --target cpu --size 256 --dtype float32   # the CPU check

1. builds and times the hand-picked config (the BENCHMARKS.md row: 128x128x64 s2 t128 on the
   H200) with the profiler (`kernel.get_profiler().do_bench`: CUDA events, L2 flushed before
   each run, median; wall clock on the CPU);
2. autotunes over benchmarks/gpu.py's GEMM_CONFIGS (CPU_CONFIGS on cpu), with the hand-picked
   config among them, and times the winner the same way: the autotuned row must be equal or
   faster (within 3 % of noise it is reported as equal);
3. runs the same autotune in a new process against the same cache directory and reports what
   it did: it must read the stored result, time nothing and ask only for the winner, which
   the compile cache serves (`compiled` = 0: nothing lowered or built). Run the whole script
   twice on one TILECORE_CACHE_DIR and the second run's own search is read from the cache too
   ("this process: from cache=True", no compile-cache misses).
Each run uses a fresh cache directory unless TILECORE_CACHE_DIR is set.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)

import gemm  # noqa: E402

import tilecore  # noqa: E402
import tilecore.autotuner as autotuner  # noqa: E402

HAND = {"cuda": dict(block_M=128, block_N=128, block_K=64, num_stages=2, threads=128),
        "cpu": dict(block_M=128, block_N=128, block_K=128, num_stages=0, threads=128)}
CPU_CONFIGS = [dict(block_M=bm, block_N=bn, block_K=bk, num_stages=0, threads=128)
               for bm, bn, bk in ((64, 64, 64), (128, 128, 128), (256, 256, 128), (256, 256, 256))]


def configs_for(kind: str) -> list[dict]:
    if kind == "cpu":
        return CPU_CONFIGS
    from gpu import GEMM_CONFIGS

    return list(GEMM_CONFIGS)


def tuner(target: str, dtype: str):
    kind = target.split(":")[0]
    factory = tilecore.jit(gemm.program, out_idx=[-1], target=target)
    return tilecore.autotune(configs=configs_for(kind), warmup=25, rep=100, rtol=1e-2, atol=1e-2,
                             progress=True)(factory)


def bench(kernel, n: int) -> float:
    prof = kernel.get_profiler(tensor_supply_type="normal")
    return prof.do_bench(warmup=25, rep=200)


def second_run(args) -> dict:
    """In this (new) process: the same autotune; count builds (kernels asked of the tuner),
    timings, and what the compile cache did: `compiled` (misses: kernels lowered and built) must
    be 0, the winner a disk hit."""
    from tilecore import compile_cache

    builds, timings = [], []
    tuner_cls = getattr(autotuner, "AutoTuner", None)
    orig_compile = getattr(tuner_cls, "_compile", None)
    orig_time = getattr(autotuner, "time_call", None)
    if orig_compile is not None:
        tuner_cls._compile = lambda self, p: builds.append(p) or orig_compile(self, p)
    if orig_time is not None:
        autotuner.time_call = lambda *a, **k: timings.append(1) or orig_time(*a, **k)
    t0 = time.perf_counter()
    t = tuner(args.target, args.dtype)
    k = t(M=args.size, N=args.size, K=args.size, dtype=args.dtype)
    cc = compile_cache.stats()
    return dict(from_cache=t.last_result.from_cache, builds=len(builds), timings=len(timings),
                compiled=cc["misses"], cache_hits=cc["disk_hits"] + cc["memory_hits"],
                seconds=time.perf_counter() - t0, config=k.config)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--out")
    ap.add_argument("--second", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.second:
        print(json.dumps(second_run(args)))
        return {}
    os.environ.setdefault("TILECORE_CACHE_DIR", tempfile.mkdtemp(prefix="tilecore-autotune-"))
    kind = args.target.split(":")[0]
    n = args.size
    hand_cfg = HAND.get(kind, HAND["cuda"])
    hand = tilecore.compile(gemm.program(M=n, N=n, K=n, dtype=args.dtype, **hand_cfg), out_idx=[-1],
                            target=args.target)
    t_hand = bench(hand, n)
    t0 = time.perf_counter()
    t = tuner(args.target, args.dtype)
    best = t(M=n, N=n, K=n, dtype=args.dtype)
    search_s = time.perf_counter() - t0
    t_best = bench(best, n)
    flops = 2.0 * n ** 3
    unit, scale = ("TFLOP/s", 1e9) if kind != "cpu" else ("GFLOP/s", 1e6)
    out = subprocess.run([sys.executable, __file__, "--second", "--target", args.target, "--size", str(n),
                          "--dtype", args.dtype], capture_output=True, text=True, env=os.environ.copy())
    if out.returncode:
        raise SystemExit(out.stderr)
    second = json.loads(out.stdout.strip().splitlines()[-1])
    ratio = t_hand / t_best
    verdict = "faster" if ratio > 1.03 else "equal" if ratio >= 0.97 else "SLOWER"
    res = dict(case=f"gemm {args.dtype} {n}^3 on {best.target}", hand=dict(config=hand_cfg, ms=t_hand),
               autotuned=dict(config=best.config, ms=t_best, search_s=search_s,
                              configs=len(t.last_result.results),
                              failed=[r.config for r in t.last_result.results if r.latency is None]),
               ratio=ratio, verdict=verdict, second_run=second)
    print(f"| {res['case']} | hand-picked {_cfg(hand_cfg)}: {t_hand:.3f} ms, {flops / t_hand / scale:.0f} "
          f"{unit} | autotuned {_cfg(best.config)}: {t_best:.3f} ms, {flops / t_best / scale:.0f} {unit} | "
          f"{ratio:.2f}x ({verdict}) | search {search_s:.1f} s over {res['autotuned']['configs']} configs |")
    print(f"second run (new process): from cache={second['from_cache']}, {second['timings']} timings, "
          f"{second['builds']} build (the winner) = {second['cache_hits']} compile-cache hit(s), "
          f"{second['compiled']} compiled, {second['seconds']:.2f} s")
    from tilecore import compile_cache

    cc = res["this_process_compile_cache"] = compile_cache.stats()
    print(f"this process: from cache={t.last_result.from_cache}, compile cache {cc} (misses = kernels "
          "lowered and built here; a search builds its configs in worker processes)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1, default=str)
    return res


def _cfg(c: dict) -> str:
    panel = f" p{c['panel']}" if c.get("panel") else ""
    return f"{c['block_M']}x{c['block_N']}x{c['block_K']} s{c['num_stages']} t{c['threads']}{panel}"


if __name__ == "__main__":
    main()
