"""W4A16 dequantizing GEMV on the GPU (examples/dequant_gemv_w4a16.py) beside torch, in one process.

Run on a CUDA machine (the lent H200):  python benchmarks/dequant.py [--out results.json]
(the figures in BENCHMARKS.md, "the streaming kernel": benchmarks/dequant_h200.json is its call 2)
    [--configs '[{"threads": 256, "rows": 8, "num_stages": 3}, ...]']

Peers, at M = 1 and 16 with N = K = 4096 and at M = 1, N = 14336, K = 4096 (group size 128,
bfloat16 activations and scales, symmetric int4 codes with offset 8):
- `torch.ops.aten._weight_int4pack_mm` (tinygemm) on the same codes and scales, packed by
  `_convert_weight_to_int4pack` (inner_k_tiles 8) from the [N, K / 2] uint8 form torchao uses;
  zero points 0 (its dequantization is (q - 8) * scale + zero); which nibble holds the even k in
  that input is found by checking both against the reference (the figure says which);
- `torch.matmul` with the dequantized bfloat16 weight (cuBLAS reading 4x the bytes).
Every kernel is checked against a float64 reference of the dequantized product on random
inputs (relative 2-norm error), tilecore's output poisoned with NaN first; tilecore's also
exactly against `reference` on the example's exact-arithmetic inputs. Times: `do_bench` medians
(L2 flushed by zeroing 256 MB before each repetition) and the read-flushed median of
benchmarks/gpu.py; the tilecore/torch ratio also interleaved (benchmarks/gpu_paired.py). GB/s
counts the packed weight stream (K N / 2 bytes) plus scales, X and Y once, against the
device-to-device copy bandwidth measured here on 256 MB. The last thing printed is the table.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)

import dequant_gemv_w4a16 as ex  # noqa: E402
import numpy as np  # noqa: E402
from gpu import bench, bench_read_flushed, do_bench_flushes, rel_err  # noqa: E402
from gpu_paired import bench_pair  # noqa: E402

import tilecore  # noqa: E402

GROUP = 128
SHAPES = [(1, 4096, 4096), (16, 4096, 4096), (1, 14336, 4096)]
# every M = 1 config on both M = 1 shapes (threads x rows x stages: a tile of threads / 2 * rows
# packed rows of a 32-column strip, 16-byte cp.async); the first is the example's default
CONFIGS = [dict(threads=256, rows=8, num_stages=2),
           dict(threads=256, rows=4, num_stages=3),
           dict(threads=256, rows=8, num_stages=3),
           dict(threads=256, rows=4, num_stages=4),
           dict(threads=512, rows=4, num_stages=2),
           dict(threads=512, rows=2, num_stages=4),
           dict(threads=128, rows=8, num_stages=3),
           dict(threads=256, rows=16, num_stages=2)]

# M > 1: the fastest M = 1 config with several rows of X per block (block_M)
SMALL_M = [dict(block_M=2), dict(block_M=4), dict(block_M=4, threads=128)]  # 8 and more spill


def copy_bandwidth(torch) -> float:
    """GB/s of a 256 MB device-to-device copy (read + write counted)."""
    a = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    return 2 * a.numel() / (bench(lambda: b.copy_(a)) * 1e-3) / 1e9


def inputs(torch, M, N, K, seed=0):
    """Random codes, scales ~ 1/64, X ~ N(0, 1): (x, wq, s) as CUDA tensors and the float64
    reference Y."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    q = torch.randint(0, 16, (K, N), generator=g, dtype=torch.uint8)
    x = torch.randn(M, K, generator=g).to(torch.bfloat16)
    s = (torch.rand(K // GROUP, N, generator=g) * 0.02 + 0.005).to(torch.bfloat16)
    wq = torch.from_numpy(ex.as_tiles(ex.pack(q.numpy())))  # the kernel's strips of int32 words
    w = (q.double() - 8) * s.double().repeat_interleave(GROUP, 0)
    ref = (x.double() @ w).cuda()
    return q, x.cuda(), wq.cuda(), s.cuda(), ref


def torch_int4pack(torch, q, s):
    """[(nibble order, packed weight, scales_and_zeros)] for `_weight_int4pack_mm`: q [K, N] as
    the [N, K / 2] uint8 input of `_convert_weight_to_int4pack`, both nibble orders."""
    qt = q.t().contiguous().to(torch.int32)  # [N, K]
    sz = torch.stack([s.float(), torch.zeros_like(s.float())], dim=-1).to(torch.bfloat16).cuda()
    out = []
    even, odd = qt[:, ::2], qt[:, 1::2]
    for order, (hi, lo) in (("even k high", (even, odd)), ("even k low", (odd, even))):
        packed = ((hi << 4) | lo).to(torch.uint8).cuda()
        out.append((order, torch.ops.aten._convert_weight_to_int4pack(packed, 8), sz))
    return out


def build(cfg, M, N, K):
    """The example compiled for this GPU without out_idx (Y preallocated by the caller)."""
    return tilecore.compile(ex.program(M=M, N=N, K=K, group_size=GROUP, **cfg), target="cuda")


def exact_check(torch, kernel, M, N, K) -> bool:
    """The kernel on make_inputs' exact-arithmetic inputs equals `reference` bit for bit."""
    x, wq, s = ex.make_inputs(np.random.default_rng(3), M=M, N=N, K=K, group_size=GROUP)
    y = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    kernel(torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16).cuda(), torch.from_numpy(wq).cuda(),
           torch.from_numpy(s.view(np.uint16)).view(torch.bfloat16).cuda(), y)
    want = ex.reference(x, wq, s, K=K, group_size=GROUP)
    got = y.view(torch.int16).cpu().numpy().view(np.uint16)
    return bool(np.array_equal(got, want.view(np.uint16)))


def one_shape(torch, M, N, K, configs) -> dict:
    """Check and time every config of `configs` at (M, N, K), then the fastest beside the peers."""
    q, x, wq, s, ref = inputs(torch, M, N, K)
    y = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    row = dict(M=M, N=N, K=K, bytes=K * N // 2 + s.numel() * 2 + x.numel() * 2 + M * N * 2, tilecore=[])
    t4 = None
    for order, wp, sz in torch_int4pack(torch, q, s):  # torch's int4 kernel: the order that matches
        err = rel_err(torch.ops.aten._weight_int4pack_mm(x, wp, GROUP, sz), ref)
        if err < 2e-2:
            row["int4pack"] = dict(order=order, err=err)
            t4 = functools.partial(torch.ops.aten._weight_int4pack_mm, x, wp, GROUP, sz)
            break
        row.setdefault("int4pack_rejected", []).append(dict(order=order, err=err))
    wd = ((q.double() - 8) * s.cpu().double().repeat_interleave(GROUP, 0)).to(torch.bfloat16).cuda()
    tmm = functools.partial(torch.matmul, x, wd)
    row["matmul_err"] = rel_err(tmm(), ref)
    for cfg in configs:
        try:
            t0 = time.perf_counter()
            run = functools.partial(build(cfg, M, N, K), x, wq, s, y)
            y.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            err = rel_err(y, ref)
            exact = exact_check(torch, build(cfg, M, N, K), M, N, K)
            ms = bench(run)
            row["tilecore"].append(dict(cfg=cfg, ms=ms, err=err, exact=exact,
                                        build_s=time.perf_counter() - t0))
            print(f"M={M} N={N} K={K} {cfg}: {ms * 1e3:.2f} us err {err:.1e} exact {exact}", flush=True)
        except Exception as e:  # noqa: BLE001 - reported, the other configs still run
            row["tilecore"].append(dict(cfg=cfg, error=f"{type(e).__name__}: {str(e)[:300]}"))
            print(f"M={M} N={N} K={K} {cfg}: {type(e).__name__}: {str(e)[:300]}", flush=True)
    ok = [t for t in row["tilecore"] if "ms" in t and t["err"] < 2e-2]
    if not ok:
        return row
    top = min(ok, key=lambda t: t["ms"])
    run = functools.partial(build(top["cfg"], M, N, K), x, wq, s, y)
    row["best"] = top
    row["matmul_ms"] = bench(tmm)
    row["tilecore_read_flushed_ms"] = bench_read_flushed(torch, run)
    if t4 is not None:
        row["int4pack_ms"] = bench(t4)
        row["int4pack_read_flushed_ms"] = bench_read_flushed(torch, t4)
        row["paired"] = bench_pair(torch, run, t4)
    print(json.dumps(row, default=str), flush=True)
    return row


def table_row(r: dict, bw: float) -> str:
    """One markdown row of the results table."""
    if "best" not in r:
        return f"| {r['M']}, {r['N']}, {r['K']} | failed: {r['tilecore']} |"
    b = r["best"]
    gbs = r["bytes"] / (b["ms"] * 1e-3) / 1e9
    cfg = "x".join(str(b["cfg"][k]) for k in ("threads", "rows", "num_stages"))
    cfg += f" M{b['cfg'].get('block_M', 1)}"
    i4 = ratio = "n/a"
    if "int4pack_ms" in r:
        i4 = f"{r['int4pack_ms'] * 1e3:.2f} ({r['int4pack_read_flushed_ms'] * 1e3:.2f})"
        ratio = f"{r['int4pack_ms'] / b['ms']:.2f} ({r['paired']['ratio']:.2f})"
    ours = f"{b['ms'] * 1e3:.2f} ({r['tilecore_read_flushed_ms'] * 1e3:.2f})"
    errs = f"{b['err']:.1e} / {r.get('int4pack', {}).get('err', float('nan')):.1e}"
    return (f"| {r['M']}, {r['N']}, {r['K']} | {cfg} | {ours} | {gbs:.0f} ({100 * gbs / bw:.0f}%) | {i4} | "
            f"{ratio} | {r['matmul_ms'] * 1e3:.2f} | {b['exact']} | {errs} |")


def main(argv=None):
    import torch

    p = argparse.ArgumentParser()
    p.add_argument("--out")
    p.add_argument("--configs", help="JSON list replacing CONFIGS")
    args = p.parse_args(argv)
    configs = json.loads(args.configs) if args.configs else CONFIGS
    dev = torch.cuda.get_device_name()
    bw = copy_bandwidth(torch)
    print(f"{dev}; torch {torch.__version__}; do_bench flush: {do_bench_flushes()}; copy {bw:.0f} GB/s",
          flush=True)
    results = []
    best = None
    for si, (M, N, K) in enumerate(SHAPES):
        cfgs = configs  # every config at M = 1; at M > 1 the first shape's fastest, rows of X per block
        if M > 1 and best is not None:
            cfgs = [best] + [{**best, **extra} for extra in SMALL_M]
        row = one_shape(torch, M, N, K, cfgs)
        results.append(row)
        if si == 0 and "best" in row:
            best = row["best"]["cfg"]
    lines = [f"{dev}, copy bandwidth {bw:.0f} GB/s; do_bench medians (L2 zero-flushed), read-flushed in ()",
             "",
             "| M, N, K | tilecore config | tilecore us | GB/s (% of copy) | _weight_int4pack_mm us | "
             "ratio (paired) | bf16 matmul us | exact | err ours / int4pack |",
             "|---|---|---|---|---|---|---|---|---|"]
    table = "\n".join(lines + [table_row(r, bw) for r in results])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(device=dev, copy_gbs=bw, results=results, table=table), f, indent=1, default=str)
    print(table)


if __name__ == "__main__":
    main()
