"""RMSNorm 16384 x 8192 fp16 variants against torch.compile's kernel, interleaved in one process.

Run on the lent GPU (after the offline install):  python benchmarks/rows_ab.py [--out DIR]
    (ROWS_AB_CONFIGS='[{...}, ...]' replaces VARIANTS; each is rmsnorm.program's keywords)

Every variant is lowered for sm_80 (the mma.sync-path lowering the issue-9 figures use; row
kernels use no matrix instructions) and compiled for the device, checked against a float32
reference with its output poisoned first, then timed with `bench_pair` (benchmarks/gpu_paired.py:
alternating with torch.compile's kernel, each after do_bench's 256 MB zeroing flush; the ratio is
the median of per-pair ratios, > 1: tilecore faster) and the best two again after a reading
flush. torch.compile's chosen Triton config (block sizes, warps, registers) is printed, and with
--out its PTX and cubin are written there (for cuobjdump on another machine).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpu  # noqa: E402
from gpu_paired import bench_pair  # noqa: E402

M, N = gpu.ROWS
# The current default (2 rows, t512: 56-62 registers, two blocks and 64 KB of loads in flight per
# multiprocessor), then the variants that hold no row in registers: staged in shared memory (40
# registers at 2 rows t256: six blocks, 192 KB) and torch.compile's two-pass shape (30-32
# registers). The persistent cp.async grids and the one-row t1024 kernels of the first run
# (BENCHMARKS.md) were 8-22% slower and are left out.
VARIANTS = [dict(block_M=2, threads=512),
            dict(block_M=2, threads=256, staged=True),
            dict(block_M=1, threads=256, staged=True),
            dict(block_M=2, threads=512, staged=True),
            dict(block_M=4, threads=512, staged=True),
            dict(block_M=1, threads=256, block_N=2048, l2_reread=True),
            dict(block_M=1, threads=512, block_N=4096, l2_reread=True),
            dict(block_M=2, threads=256, block_N=2048, l2_reread=True)]


def triton_kernels(out_dir):
    """The config, registers and spills of every Triton kernel torch.compile launched; PTX and
    cubin of each written to out_dir (if given)."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    lines = []
    for i, o in enumerate(x for x in gc.get_objects() if isinstance(x, CachingAutotuner)):
        for launcher in getattr(o, "launchers", []):
            b = getattr(launcher, "bin", None)
            regs, spills = getattr(launcher, "n_regs", "?"), getattr(launcher, "n_spills", "?")
            lines.append(f"{o.fn.__name__}: config {launcher.config} regs {regs} spills {spills} "
                         f"shared {getattr(launcher, 'shared', '?')}")
            if out_dir and i == 0 and b is not None and hasattr(b, "asm"):  # few files come back
                for key in ("ptx", "cubin"):
                    if key in b.asm:
                        data = b.asm[key]
                        mode = "wb" if key == "cubin" else "w"
                        with open(os.path.join(out_dir, f"triton_{i}.{key}"), mode) as f:
                            f.write(data)
            if out_dir and i == 0:
                try:
                    import inspect
                    with open(os.path.join(out_dir, f"triton_{i}.py"), "w") as f:
                        f.write(inspect.getsource(o.fn.fn))
                except Exception as e:  # source not kept: the config line above still stands
                    lines.append(f"  (no source: {e})")
    return lines


def main(argv=None) -> int:
    """Build, check and time every variant beside torch.compile; print a table last."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="directory for results.json and torch.compile's kernel")
    ap.add_argument("--reps", type=int, default=100)
    ns = ap.parse_args(argv)
    variants = json.loads(os.environ["ROWS_AB_CONFIGS"]) if os.environ.get("ROWS_AB_CONFIGS") else VARIANTS
    import torch

    gpu.LOWER_ARCH = "sm_80"
    from tilecore_cuda.launch import device_arch

    arch = device_arch(torch.cuda.current_device())
    params = dict(M=M, N=N, eps=1e-6)
    pool, pending = gpu.start_precompile([("rmsnorm", dict(params, **v)) for v in variants], arch)
    torch.manual_seed(0)
    args, ref, eager, nbytes = gpu.row_problem(torch, "rmsnorm")
    compiled = torch.compile(eager, dynamic=False)
    c_err = gpu.rel_err(compiled(*args), ref)
    try:
        for line in triton_kernels(ns.out):
            print("torch.compile kernel:", line, flush=True)
    except Exception as e:  # introspection of inductor internals: informative only
        print(f"torch.compile kernel: not read ({type(e).__name__}: {e})", flush=True)
    pre = gpu.finish_precompile(pool, pending)
    print(f"precompiled {len(pre)}; failed: {[(p, e) for _, p, _, e in pre if e]}", flush=True)
    copy_gbs = gpu.copy_bandwidth(torch)
    t_c = gpu.bench(lambda: compiled(*args))
    print(f"copy {copy_gbs:.0f} GB/s; torch.compile {t_c:.4f} ms ({nbytes / t_c / 1e6:.0f} GB/s) "
          f"err {c_err:.1e}", flush=True)
    rows = []
    for v in variants:
        try:
            k = gpu.build("rmsnorm", dict(params, **v), arch)
            y = torch.empty_like(args[0])

            def run(k=k, y=y):
                k(*args, y)
                return y

            run().fill_(float("nan"))
            err = gpu.checked(run, ref, 1e-2)
            p = bench_pair(torch, run, lambda: compiled(*args), reps=ns.reps)
            rows.append(dict(cfg=v, err=err, **p))
            print(f"{v}: {p['a_ms']:.4f} ms vs compile {p['b_ms']:.4f} ratio {p['ratio']:.3f} "
                  f"({p['mhz']} MHz, {p['watts']} W) err {err:.1e}", flush=True)
        except Exception as e:  # report and go on
            print(f"{v}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    best = sorted(rows, key=lambda r: -r["ratio"])[:2]
    for r in best:
        k = gpu.build("rmsnorm", dict(params, **r["cfg"]), arch)
        y = torch.empty_like(args[0])
        mine, theirs = (lambda k=k, y=y: k(*args, y)), (lambda: compiled(*args))
        r["read_flushed"] = bench_pair(torch, mine, theirs, reps=ns.reps, read_flush=True)
        r["again"] = bench_pair(torch, mine, theirs, reps=ns.reps)
    if ns.out:
        with open(os.path.join(ns.out, "rows_ab.json"), "w") as f:
            json.dump(dict(copy_gbs=copy_gbs, compile_ms=t_c, rows=rows), f, indent=1, default=str)
    print("\n| variant | tilecore ms | GB/s | % of copy | torch.compile ms | ratio (compile/tilecore) | "
          "read-flushed ratio | again |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        rf = r.get("read_flushed")
        ag = r.get("again")
        print(f"| {r['cfg']} | {r['a_ms']:.4f} | {nbytes / r['a_ms'] / 1e6:.0f} | "
              f"{nbytes / r['a_ms'] / 1e6 / copy_gbs:.1%} | {r['b_ms']:.4f} | {r['ratio']:.3f} | "
              + (f"{rf['ratio']:.3f} ({rf['a_ms']:.4f}/{rf['b_ms']:.4f})" if rf else "") + " | "
              + (f"{ag['ratio']:.3f}" if ag else "") + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
