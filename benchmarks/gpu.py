"""tilecore on the GPU, side by side with torch in one process: GEMM, softmax, RMSNorm, attention.

Run on a CUDA machine (the lent H200):  python benchmarks/gpu.py [--out results.json] [--quick]

Every case is checked against torch on fresh random inputs before it is timed. Times are
`triton.testing.do_bench` medians (it zeroes a 256 MB buffer before each repetition, so L2 is
flushed); figures are TFLOP/s for GEMM and attention, GB/s (bytes each input read once plus each
output written once) for the memory-bound kernels, and tilecore / baseline ratios (>1: faster).
A case that fails to build or check is reported as such and the others still run. Outputs are
preallocated (kernels compiled without out_idx) so no allocation or memset is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import elementwise_add  # noqa: E402
import flash_attention  # noqa: E402
import gemm  # noqa: E402
import rmsnorm  # noqa: E402
import softmax  # noqa: E402

import tilecore  # noqa: E402

# Tile configurations tried per case (the fastest correct one is reported).
GEMM_CONFIGS = [dict(block_M=128, block_N=128, block_K=32, num_stages=3, threads=128),
                dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128),
                dict(block_M=128, block_N=256, block_K=32, num_stages=3, threads=256)]
ROW_CONFIGS = [dict(block_M=4, block_N=512), dict(block_M=2, block_N=1024), dict(block_M=8, block_N=256)]
FA_CONFIGS = [dict(block_M=64, block_N=64, num_stages=1, threads=128),
              dict(block_M=128, block_N=64, num_stages=1, threads=256)]


def bench(fn) -> float:
    """Median milliseconds of `fn`, L2 flushed before each repetition."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))


def rel_err(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64."""
    o, r = out.double(), ref.double()
    if not bool(o.isfinite().all()):
        return float("inf")
    return float((o - r).norm() / r.norm().clamp_min(1e-30))


def best_kernel(build, configs, check):
    """Build each config, keep those that check; returns (ms, config, err) of the fastest.

    `build(cfg)` returns a no-argument runner that returns its (preallocated) output; the
    output is poisoned with NaN before the checked run, so an unwritten element fails."""
    best, notes = None, []
    for cfg in configs:
        try:
            t0 = time.perf_counter()
            run = build(cfg)
            build_s = time.perf_counter() - t0
            run().fill_(float("nan"))
            err = check(run)
            ms = bench(run)
            notes.append(f"{cfg}: {ms:.3f} ms err {err:.2e} build {build_s:.1f}s")
            if best is None or ms < best[0]:
                best = (ms, cfg, err)
        except Exception as e:  # report and try the next config
            notes.append(f"{cfg}: FAILED {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            traceback.print_exc()
    return best, notes


def case_gemm(torch, n, dtype_name, results):
    """GEMM n^3 in `dtype_name` against torch.matmul (cuBLAS), TFLOP/s."""
    dtype = getattr(torch, dtype_name)
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    ref = torch.matmul(a, b)
    flops = 2.0 * n ** 3

    def build(cfg):
        k = tilecore.jit(gemm.program(M=n, N=n, K=n, dtype=dtype_name, **cfg), target="cuda")
        c = torch.empty(n, n, device="cuda", dtype=dtype)
        return lambda: (k(a, b, c), c)[1]

    def check(run):
        err = rel_err(run(), ref)
        if err > 1e-2:
            raise AssertionError(f"relative error {err:.3e} > 1e-2")
        return err

    best, notes = best_kernel(build, GEMM_CONFIGS, check)
    t_torch = bench(lambda: torch.matmul(a, b))
    row = dict(case=f"gemm {dtype_name} {n}^3", torch_ms=t_torch, torch_tflops=flops / t_torch / 1e9,
               notes=notes)
    if best:
        row.update(ms=best[0], tflops=flops / best[0] / 1e9, ratio=t_torch / best[0], err=best[2],
                   config=best[1])
    results.append(row)


def case_rows(torch, name, results, copy_gbs):
    """softmax / rmsnorm on 16384 x 8192 fp16, against torch and the copy bandwidth."""
    M, N = 16384, 8192
    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    if name == "softmax":
        ref = torch.softmax(x.float(), dim=-1).half()

        def torch_fn():
            return torch.softmax(x, dim=-1)

        nbytes = 2 * M * N * 2
        mod, args = softmax, (x,)
    else:
        w = torch.randn(N, device="cuda", dtype=torch.float16)
        xf = x.float()
        ref = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).half()

        def torch_fn():
            return torch.nn.functional.rms_norm(x, (N,), w, 1e-6)

        nbytes = 2 * M * N * 2 + N * 2
        mod, args = rmsnorm, (x, w)

    def build(cfg):
        k = tilecore.jit(mod.program(M=M, N=N, **cfg), target="cuda")
        y = torch.empty_like(x)
        return lambda: (k(*args, y), y)[1]

    def check(run):
        err = rel_err(run(), ref)
        if err > 1e-2:
            raise AssertionError(f"relative error {err:.3e} > 1e-2")
        return err

    best, notes = best_kernel(build, ROW_CONFIGS, check)
    t_torch = bench(torch_fn)
    row = dict(case=f"{name} fp16 {M}x{N}", torch_ms=t_torch, torch_gbs=nbytes / t_torch / 1e6,
               copy_gbs=copy_gbs, notes=notes)
    if best:
        gbs = nbytes / best[0] / 1e6
        row.update(ms=best[0], gbs=gbs, ratio=t_torch / best[0], of_copy=gbs / copy_gbs, err=best[2],
                   config=best[1])
    results.append(row)


def case_attention(torch, causal, results):
    """FlashAttention forward b8 h16 s2048 d128 against torch SDPA, TFLOP/s."""
    B, H, S, D = 8, 16, 2048, 128
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.float16) for _ in range(3))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))

    def sdpa():
        return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    ref = sdpa().transpose(1, 2)
    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)

    def build(cfg):
        kern = tilecore.jit(flash_attention.program(batch=B, heads=H, seq_len=S, dim=D, is_causal=causal,
                                                    **cfg), target="cuda")
        o = torch.empty_like(q)
        return lambda: (kern(q, k, v, o), o)[1]

    def check(run):
        err = rel_err(run(), ref)
        if err > 2e-2:
            raise AssertionError(f"relative error {err:.3e} > 2e-2")
        return err

    best, notes = best_kernel(build, FA_CONFIGS, check)
    t_torch = bench(sdpa)
    row = dict(case=f"flash_attention fp16 b{B} h{H} s{S} d{D}{' causal' if causal else ''}",
               torch_ms=t_torch, torch_tflops=flops / t_torch / 1e9, notes=notes)
    if best:
        row.update(ms=best[0], tflops=flops / best[0] / 1e9, ratio=t_torch / best[0], err=best[2],
                   config=best[1])
    results.append(row)


def launch_overhead_us(torch) -> float:
    """Host time of one `Kernel.__call__` on a tiny problem (argument checks, launch), in us."""
    k = tilecore.jit(elementwise_add.program(), target="cuda")
    a, b, c = (torch.randn(1024, device="cuda") for _ in range(3))
    for _ in range(10):
        k(a, b, c)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(1000):
        k(a, b, c)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def copy_bandwidth(torch) -> float:
    """Device-to-device copy of the 16384 x 8192 fp16 tensor, bytes read + written, GB/s."""
    x = torch.randn(16384, 8192, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    ms = bench(lambda: y.copy_(x))
    return 2 * x.numel() * 2 / ms / 1e6


def table(results) -> str:
    """The summary table (markdown)."""
    lines = ["| case | tilecore ms | tilecore | torch ms | torch | tilecore/torch speed | note |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        unit = "TFLOP/s" if "torch_tflops" in r else "GB/s"
        ours = r.get("tflops", r.get("gbs"))
        theirs = r.get("torch_tflops", r.get("torch_gbs"))
        note = f"{r['of_copy']:.0%} of copy BW" if "of_copy" in r else ""
        if "ms" not in r:
            lines.append(f"| {r['case']} | FAILED | | {r['torch_ms']:.3f} | {theirs:.1f} {unit} | | "
                         f"{r['notes'][-1][:80] if r['notes'] else ''} |")
            continue
        lines.append(f"| {r['case']} | {r['ms']:.3f} | {ours:.1f} {unit} | {r['torch_ms']:.3f} | "
                     f"{theirs:.1f} {unit} | {r['ratio']:.2f}x | {note} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    """Run every case; print the table, optionally write JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--quick", action="store_true", help="one config per case, 4096^3 GEMMs only")
    ns = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("benchmarks/gpu.py needs a CUDA device")
        return 2
    if ns.quick:
        del GEMM_CONFIGS[1:], ROW_CONFIGS[1:], FA_CONFIGS[1:]
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    results: list[dict] = []
    copy_gbs = copy_bandwidth(torch)
    print(f"copy bandwidth (read+write): {copy_gbs:.0f} GB/s", flush=True)
    overhead = launch_overhead_us(torch)
    print(f"Kernel.__call__ host time, tiny kernel: {overhead:.1f} us per call", flush=True)
    for dtype_name in ("float16", "bfloat16"):
        for n in ((4096,) if ns.quick else (4096, 8192)):
            case_gemm(torch, n, dtype_name, results)
            print(results[-1]["case"], results[-1].get("ms"), flush=True)
    for name in ("softmax", "rmsnorm"):
        case_rows(torch, name, results, copy_gbs)
        print(results[-1]["case"], results[-1].get("ms"), flush=True)
    for causal in (False, True):
        case_attention(torch, causal, results)
        print(results[-1]["case"], results[-1].get("ms"), flush=True)
    for r in results:
        for n in r["notes"]:
            print(f"  {r['case']}: {n}")
    print(table(results))
    if ns.out:
        with open(ns.out, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                           copy_gbs=copy_gbs, call_overhead_us=overhead, results=results), f, indent=1,
                      default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
