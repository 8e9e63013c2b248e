"""Hopper (wgmma) GEMM on the H200 against cuBLAS, in one process beside torch.

Run on the lent GPU:  python benchmarks/hopper_gemm.py [--out results.json] [--quick]

- every config of CONFIGS on GEMM fp16 4096^3 (checked against a float32 torch reference, then
  timed), the TOP_K fastest on bf16 4096^3 and fp16/bf16 8192^3 and, the fastest, on the LLM
  projection shapes (M = 4096; (N, K) in LLM_NK), each against torch.matmul;
- the fp8 example (e4m3 x e4m3 -> fp32 -> bf16) at 8192^3 against torch._scaled_mm;
- a ragged GEMM (M, N, K not tile multiples) and a ragged fp8 GEMM for correctness.
Times are `triton.testing.do_bench` medians (L2 flushed before each repetition, see gpu.py).
Kernels are compiled ahead in a process pool (the cubins land in the on-disk cache).
HOPPER_CONFIGS='[[gemm configs], [fp8 configs]]' (JSON) replaces the two config lists.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)

import gemm  # noqa: E402
import gemm_fp8  # noqa: E402

import tilecore  # noqa: E402

CONFIGS = [dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128),
           dict(block_M=128, block_N=128, block_K=64, num_stages=4, threads=128),
           dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256),
           dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256),
           dict(block_M=256, block_N=128, block_K=64, num_stages=4, threads=256),
           dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256, panel=8)]
FP8_CONFIGS = [dict(block_M=128, block_N=256, block_K=128, num_stages=4, threads=256),
               dict(block_M=128, block_N=256, block_K=128, num_stages=3, threads=256)]
if os.environ.get("HOPPER_CONFIGS"):  # a JSON [[gemm configs], [fp8 configs]] for a focused run
    CONFIGS, FP8_CONFIGS = json.loads(os.environ["HOPPER_CONFIGS"])
LLM_NK = [(4096, 4096), (14336, 4096), (4096, 14336), (28672, 8192)]
TOP_K = 2
EXAMPLES = dict(gemm=gemm, gemm_fp8=gemm_fp8)


def _compile_one(job):
    """Pool worker: build one kernel's cubin into the disk cache."""
    name, params, arch = job
    t0 = time.perf_counter()
    try:
        tilecore.compile(EXAMPLES[name].program(**params), target=f"cuda:{arch}").artifact.cubin(arch)
        return name, params, time.perf_counter() - t0, None
    except Exception as e:
        return name, params, time.perf_counter() - t0, f"{type(e).__name__}: {str(e)[:300]}"


def precompile(jobs, arch):
    """Compile `jobs` in a spawned pool with no GPU visible; the errors, printed."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        with ProcessPoolExecutor(max(1, min(14, (os.cpu_count() or 2) - 2)),
                                 mp_context=mp.get_context("spawn")) as ex:
            for name, params, s, err in ex.map(_compile_one, [(n, p, arch) for n, p in jobs]):
                print(f"  compiled {name} {params} in {s:.1f}s{' FAILED ' + err if err else ''}", flush=True)
    finally:
        if old is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true", help="4096^3 fp16 sweep and fp8 only")
    ap.add_argument("--budget", type=float, default=1e9, help="seconds after which no new case starts")
    args = ap.parse_args()
    import torch
    from gpu import bench, rel_err
    from tilecore_cuda.launch import device_arch

    arch = device_arch(0)
    print(f"device: {torch.cuda.get_device_name()} ({arch}) torch {torch.__version__}", flush=True)
    t_start = time.perf_counter()
    sizes = [(4096, 4096, 4096)] + ([] if args.quick else [(8192, 8192, 8192)] +
                                    [(4096, n, k) for n, k in LLM_NK])
    # the LLM shapes only for the configs likely to win (the others build on demand)
    jobs = [("gemm", dict(M=m, N=n, K=k, dtype=d, **c)) for c in CONFIGS for d in ("float16", "bfloat16")
            for m, n, k in sizes if (m, n, k) in ((4096,) * 3, (8192,) * 3)
            or (d == "bfloat16" and c["block_N"] == 256 and c["num_stages"] == 4)]
    jobs += [("gemm_fp8", dict(M=8192, N=8192, K=8192, **c)) for c in FP8_CONFIGS]
    precompile(jobs, arch)
    print(f"precompiled at {time.perf_counter() - t_start:.0f}s", flush=True)
    rows, notes = [], []

    def gemm_case(m, n, k, dtype_name, cfg):
        if time.perf_counter() - t_start > args.budget:
            raise TimeoutError("out of the run's time budget")
        dtype = getattr(torch, dtype_name)
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        kern = tilecore.compile(gemm.program(M=m, N=n, K=k, dtype=dtype_name, **cfg), target=f"cuda:{arch}")
        c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        kern(a, b, c)
        err = rel_err(c, torch.matmul(a.float(), b.float()))
        if not err < 1e-2:
            raise AssertionError(f"relative error {err:.3e}")
        ms = bench(lambda: kern(a, b, c))
        t_torch = bench(lambda: torch.matmul(a, b))
        return ms, t_torch, err

    def record(case, cfg, ms, t_torch, err, flops):
        row = dict(case=case, cfg=cfg, ms=ms, torch_ms=t_torch, tflops=flops / ms / 1e9,
                   torch_tflops=flops / t_torch / 1e9, ratio=t_torch / ms, err=err)
        rows.append(row)
        print(f"{case} {cfg}: {ms:.3f} ms {row['tflops']:.0f} TFLOP/s, torch {row['torch_tflops']:.0f}, "
              f"ratio {row['ratio']:.3f}, err {err:.1e} ({time.perf_counter() - t_start:.0f}s)", flush=True)

    # sweep on fp16 4096^3
    timed = []
    for cfg in CONFIGS:
        try:
            ms, tt, err = gemm_case(4096, 4096, 4096, "float16", cfg)
            record("gemm fp16 4096^3", cfg, ms, tt, err, 2.0 * 4096 ** 3)
            timed.append((ms, cfg))
        except Exception as e:
            notes.append(f"fp16 4096 {cfg}: FAILED {type(e).__name__}: {str(e)[:300]}")
            traceback.print_exc()
    timed.sort(key=lambda t: t[0])
    best = [c for _, c in timed[:TOP_K]]
    cases = [(4096, 4096, 4096, "bfloat16")]
    if not args.quick:
        cases += [(8192, 8192, 8192, "float16"), (8192, 8192, 8192, "bfloat16")]
    for m, n, k, d in cases:
        for cfg in best:
            try:
                ms, tt, err = gemm_case(m, n, k, d, cfg)
                record(f"gemm {d} {m}x{n}x{k}", cfg, ms, tt, err, 2.0 * m * n * k)
            except Exception as e:
                notes.append(f"{d} {m} {cfg}: FAILED {type(e).__name__}: {str(e)[:300]}")
    if best and not args.quick:
        for n, k in LLM_NK:
            try:
                ms, tt, err = gemm_case(4096, n, k, "bfloat16", best[0])
                record(f"gemm bf16 4096x{n}x{k}", best[0], ms, tt, err, 2.0 * 4096 * n * k)
            except Exception as e:
                notes.append(f"llm {n}x{k}: FAILED {type(e).__name__}: {str(e)[:300]}")
    # ragged correctness
    try:
        ms, tt, err = gemm_case(1000, 520, 300, "float16", dict(block_M=128, block_N=128, block_K=64,
                                                                num_stages=3, threads=128))
        notes.append(f"ragged gemm fp16 1000x520x300: err {err:.2e}")
    except Exception as e:
        notes.append(f"ragged gemm: FAILED {type(e).__name__}: {str(e)[:300]}")
    def fp8_case(m, n, k, cfg):
        """(tilecore ms, _scaled_mm ms, tilecore error, _scaled_mm error); times only at 8192."""
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        kern = tilecore.compile(gemm_fp8.program(M=m, N=n, K=k, **cfg), target=f"cuda:{arch}")
        y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        kern(a, b, y)
        ref = a.float() @ b.float().t()  # the example's scales multiply to 1
        one = torch.ones((), device="cuda")

        def scaled():
            return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        err, err_t = rel_err(y, ref), rel_err(scaled(), ref)
        if m != 8192:
            return None, None, err, err_t
        return bench(lambda: kern(a, b, y)), bench(scaled), err, err_t

    for (m, n, k), cfgs in (((8192, 8192, 8192), FP8_CONFIGS), ((1000, 528, 400), FP8_CONFIGS[:1])):
        for cfg in cfgs:
            try:
                ms, tt, err, err_t = fp8_case(m, n, k, cfg)
                if ms is None:
                    notes.append(f"ragged fp8 {m}x{n}x{k}: err {err:.2e} (scaled_mm {err_t:.2e})")
                else:
                    record(f"gemm fp8 e4m3 {m}^3 (_scaled_mm err {err_t:.1e})", cfg, ms, tt, err,
                           2.0 * m * n * k)
            except Exception as e:
                notes.append(f"fp8 {m} {cfg}: FAILED {type(e).__name__}: {str(e)[:300]}")
                traceback.print_exc()
    print("\n".join(notes))
    print("\n| case | config | ms | TFLOP/s | torch TFLOP/s | ratio |\n|---|---|---|---|---|---|")
    for r in rows:
        c = r["cfg"]
        cs = f"{c['block_M']}x{c['block_N']}x{c['block_K']} s{c['num_stages']} t{c['threads']}" + \
            (f" p{c['panel']}" if c.get("panel") else "")
        print(f"| {r['case']} | {cs} | {r['ms']:.3f} | {r['tflops']:.0f} | {r['torch_tflops']:.0f} | "
              f"{r['ratio']:.3f} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(rows=rows, notes=notes), f, indent=1)
    print(f"total {time.perf_counter() - t_start:.0f}s")


if __name__ == "__main__":
    main()
