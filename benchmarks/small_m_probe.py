"""Small-M probe (issue 10): what a split-K reduction that needs no zeroed C could win, measured
by timing split-K kernels *without* the C.zero_() their atomic adds need (their result is then
wrong after the first call; only the time is read), beside the same kernels with the zeroing,
the shipped config, thinner blocks (fewer warps), and the floor of any launch under this
timing (a 2-element zero_()). Every config is first checked once against a float32 reference
with C zeroed. Times: do_bench medians (256 MB zeroing flush: dirty L2), read-flushed medians
(gpu.bench_read_flushed: clean L2), and the interleaved ratio against torch.matmul
(gpu_paired.bench_pair, the robust figure).

Run on the lent GPU:  python benchmarks/small_m_probe.py
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)

import gemm  # noqa: E402
import gpu  # noqa: E402
import gpu_paired  # noqa: E402

import tilecore  # noqa: E402

EF = dict(b_eviction="evict_first")
SHAPES = [(1, 4096, 4096), (1, 14336, 4096)]
CONFIGS = ["auto",
           dict(block_M=16, block_N=32, block_K=256, num_stages=4, threads=64, **EF),
           dict(block_M=16, block_N=64, block_K=256, num_stages=4, threads=128, split_k=2, **EF),
           dict(block_M=16, block_N=32, block_K=256, num_stages=4, threads=128, split_k=2, **EF),
           dict(block_M=16, block_N=64, block_K=128, num_stages=4, threads=128, split_k=2, **EF),
           dict(block_M=16, block_N=64, block_K=256, num_stages=2, threads=128, split_k=4, **EF)]


def label(c: dict) -> str:
    """16x32x256 s4 t128 split2 for a config."""
    return (f"{c['block_M']}x{c['block_N']}x{c['block_K']} s{c['num_stages']} t{c['threads']}"
            + (f" split{c['split_k']}" if c.get("split_k", 1) > 1 else ""))


def config_rows(torch, arch, a, b, ref, t_mm, cfg: dict) -> list:
    """The probe's rows of one config on one shape (inputs a, b; float32 reference ref)."""
    m, k = a.shape
    n = b.shape[1]
    kern = tilecore.compile(gemm.program(M=m, N=n, K=k, dtype="float16", **cfg), target=f"cuda:{arch}")
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    split = cfg.get("split_k", 1) > 1
    if split:
        c.zero_()
    kern(a, b, c)
    err = gpu.rel_err(c, ref)
    assert err < 1e-2, f"relative error {err:.3e}"

    def plain():
        kern(a, b, c)

    def zeroed():
        c.zero_()
        kern(a, b, c)

    rows = []
    variants = [("kernel only", plain), ("with C.zero_()", zeroed)] if split else [("", plain)]
    for what, fn in variants:
        ms = gpu.bench(fn)
        clean = gpu.bench_read_flushed(torch, fn)
        pair = gpu_paired.bench_pair(torch, fn, lambda: torch.matmul(a, b), reps=60)
        rows.append((f"{m}x{n}x{k}", f"{label(cfg)} {what}".strip(), ms * 1e3, clean * 1e3, t_mm / ms,
                     pair["ratio"], err))
        print(rows[-1], flush=True)
    return rows


def main():
    import torch
    from tilecore_cuda.launch import device_arch

    arch = device_arch(0)
    tiny = torch.empty(2, device="cuda")
    print(f"floor: a 2-element zero_() {gpu.bench(tiny.zero_) * 1e3:.1f} us under do_bench, "
          f"{gpu.bench_read_flushed(torch, tiny.zero_) * 1e3:.1f} us read-flushed", flush=True)
    rows = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        t_mm = gpu.bench(lambda: torch.matmul(a, b))  # noqa: B023 - called before the loop moves on
        for cfg in CONFIGS:
            cfg = gemm.config(m, n, k) if cfg == "auto" else cfg
            try:
                rows += config_rows(torch, arch, a, b, torch.matmul(a.float(), b.float()), t_mm, cfg)
            except Exception as e:  # noqa: BLE001 - a failing config is a line, not the end of the run
                print(f"{m}x{n}x{k} {cfg}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
        print(f"{m}x{n}x{k} torch.matmul {t_mm * 1e3:.1f} us under do_bench", flush=True)
    print("\n| shape | config | us (do_bench) | us (read-flushed) | do_bench ratio | interleaved | err |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.1f} | {r[4]:.3f} | {r[5]:.3f} | {r[6]:.1e} |")


if __name__ == "__main__":
    main()
