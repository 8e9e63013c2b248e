"""Attention kernels on the GPU beside torch's SDPA backends, in one process: FlashAttention
forward and backward, split-KV decoding (contiguous and paged caches) and MLA decoding.

Run on a CUDA machine:  python benchmarks/attention.py [--out attention.json] [--budget-s 200]
                        [--only fwd,bwd,decode,mla] [--quick] [--fwd-configs JSON] ...

Cases (bf16 unless noted; `do_bench` medians, as benchmarks/gpu.py):
- forward: D=128 (16 heads) and D=64 (32 heads), S=4096 (batch 4) and S=16384 (batch 1),
  causal and not, against the fastest of SDPA's cuDNN and flash backends (the row names it);
- backward: D=128, S=4096 and 16384, causal and not: tilecore's delta preprocess + dQ/dK/dV
  kernel (dQ zeroed inside the timed call: its atomics need it) against the fastest SDPA
  backend's backward (`torch.autograd.grad` of a saved forward);
- decoding: batch 32, 32 query heads on 8 KV heads, D=128, KV 1024 / 4096 / 16384: split
  kernel + combine against the fastest SDPA backend taking `enable_gqa=True` for a single query
  token; the paged variant (page 64, every sequence full length) against the same peer;
- MLA decoding: batch 32, 128 heads, latent 512 + rope 64, KV 4096 / 16384: TFLOP/s and the
  GB/s of the latent cache read once, against the device ceilings (dense bf16 989 TFLOP/s,
  the copy bandwidth measured in this run), and eager torch (einsum, softmax, einsum).
Every kernel is checked before it is timed (its outputs poisoned with NaN first) against a
float32 torch reference where that fits in memory, else against the peer's output. Each case
sweeps its config list (the first case of a kind sweeps all, later ones the TOP_K fastest of
it); `--*-configs` replace a list (JSON list of dicts) so tiles can be chosen without editing.
A case is not started once `--budget-s` seconds have passed (the rest are reported skipped), so
the bench stage's length is bounded; compiles run ahead in a process pool. The last thing
printed is the markdown table; --out writes everything as JSON after every case.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attention_cases as cases  # noqa: E402
import gpu  # noqa: E402

CONFIGS = {
    # sm_90a: consumer warpgroups of 64 rows each (wgmma m64), K/V by TMA from a producer
    # warpgroup (BENCHMARKS.md "GPU: attention"); d=128 here, d=64 under "fwd64"
    "fwd": [
        # FlashAttention-3's order (asynchronous gemms, tilecore.lower.wgmma_async)
        dict(block_M=128, block_N=128, num_stages=2, threads=256, overlap=True),
        # + FA3's scheduler barrier between the two consumer warpgroups (tilecore.lower.wg_turns):
        # 0.8% ahead at s=4096 interleaved, level at 16384 (BENCHMARKS.md, "warpgroup turns")
        dict(block_M=128, block_N=128, num_stages=2, threads=256, overlap=True,
             pass_configs={"tilecore.warpgroup_turns": True}),
        dict(block_M=128, block_N=128, num_stages=2, threads=256),
        # three consumer warpgroups (192 rows: 192x128 spills at d=128, so 64 keys per tile)
        dict(block_M=192, block_N=64, num_stages=3, threads=384),
        dict(block_M=192, block_N=64, num_stages=3, threads=384, overlap=True),
    ],
    "fwd64": [
        # three consumer warpgroups + the producer (3 stages: over half the shared memory)
        dict(block_M=192, block_N=128, num_stages=3, threads=384),
        dict(block_M=128, block_N=64, num_stages=2, threads=256),
        dict(block_M=192, block_N=128, num_stages=3, threads=384, overlap=True),
        dict(block_M=192, block_N=128, num_stages=4, threads=384),
    ],
    # 128 keys per block (two warpgroups of 64), 64 queries per step: every product a wgmma
    # tile (the 32x64 tile of the mma.sync era ran dQ on mma.sync and staged P through shared)
    "bwd": [
        # dQ by TMA reduce-add (dq_tma), its product issued with dV/dK (dq_early): the measured
        # best non-causal and causal (BENCHMARKS.md, "attention backward, dQ by TMA reduce-add")
        dict(block_M=64, block_N=128, num_stages=2, threads=256, stagger=True, dq_tma=True, dq_early=True),
        dict(block_M=64, block_N=128, num_stages=2, threads=256, dq_tma=True),
        dict(block_M=64, block_N=128, num_stages=2, threads=256, stagger=True),
    ],
    "decode": [
        # one launch, no combine: 256 blocks (batch 32 x 8 KV heads) fill 132 SMs, two resident
        # per SM; block_H=64: the 4 query heads of a KV head padded to one wgmma tile, K/V by TMA
        dict(num_split=1, direct=True, block_N=64, block_H=64, num_stages=2, threads=128,
             kv_eviction="evict_first"),
        dict(num_split=1, direct=True, block_N=64, num_stages=2, threads=128),
        dict(num_split=1, direct=True, block_N=32, block_H=64, num_stages=4, threads=128,
             kv_eviction="evict_first"),
        dict(num_split=1, direct=True, block_N=64, num_stages=3, threads=128),
    ],
    "mla": [
        dict(num_split=2, block_H=64, block_N=32, num_stages=2, threads=256),
        dict(num_split=4, block_H=64, block_N=32, num_stages=2, threads=256),
        dict(num_split=8, block_H=64, block_N=32, num_stages=2, threads=256),
    ],
}
TOP_K = 3
FWD = [(d, s, c) for d in (128, 64) for s in (4096, 16384) for c in (False, True)]
BWD = [(128, s, c) for s in (4096, 16384) for c in (False, True)]
DECODE_KV = (1024, 4096, 16384)
MLA_KV = (4096, 16384)
DENSE_BF16_TFLOPS = 989.0  # H100/H200 SXM dense bf16 tensor-core peak
# the order cases run in: what the budget cuts first is last
PRIORITY = (
    [("fwd", (128, 2048, c, 8, 16, "float16")) for c in (False, True)]  # issue 9's shape (gpu.py: IEEE)
    + [("fwd", (128, 4096, c)) for c in (False, True)]
    + [("fwd", (128, 16384, c)) for c in (False, True)]
    + [("bwd", (128, 4096, c)) for c in (False, True)]
    + [("decode", (kv, False)) for kv in (1024, 16384)]
    + [("mla", (4096,))]
    + [("fwd", (64, s, c)) for s in (4096, 16384) for c in (False, True)]
    + [("bwd", (128, 16384, c)) for c in (False, True)]
    + [("decode", (4096, False))]
    + [("decode", (kv, True)) for kv in DECODE_KV]
    + [("mla", (16384,))]
)


def config_key(kind: str, a) -> str:
    """The CONFIGS list a case sweeps: "fwd64" for the d=64 forward, else its kind."""
    return "fwd64" if kind == "fwd" and a[0] == 64 else kind


def _compile_one(job):
    """Pool worker: lower one kernel and compile its cubin into the disk cache."""
    kind, params, arch, pass_configs = job
    t0 = time.perf_counter()
    try:
        cases.build(kind, params, arch, pass_configs=pass_configs).artifact.cubin(arch)
        return None
    except Exception as e:  # the main process builds it again and reports the failure
        return f"{kind} {params}: {type(e).__name__}: {str(e)[:160]} ({time.perf_counter() - t0:.0f}s)"


def precompile(jobs, arch):
    """Start compiling `jobs` in a spawned pool with no GPU visible; (executor, futures)."""
    from gpu import submit_without_gpu

    pc = dict(cases.PASS_CONFIGS)
    return submit_without_gpu(_compile_one, [(kind, params, arch, pc) for kind, params in jobs])


# --------------------------------------------------------------------------- driver


def jobs(only, configs) -> list:
    """Every (kind, params) the run may build, in the order the cases run (the pool compiles
    what is needed first first)."""
    out = []
    for kind, a in PRIORITY:
        if kind not in only:
            continue
        if kind in ("fwd", "bwd"):
            d, s, c = a[:3]
            b, h = a[3:5] if len(a) > 3 else cases.fwd_shape(d, s)
            dtype = a[5] if len(a) > 3 else "bfloat16"
            base = dict(batch=b, heads=h, seq_len=s, dim=d, is_causal=c, dtype=dtype)
            if kind == "bwd":
                out.append(("fwd", dict(base, return_lse=True, **cases.FWD_FOR_LSE)))
        elif kind == "decode":
            base = dict(batch=32, heads=32, kv_heads=8, seq_kv=a[0], dim=128, dtype="bfloat16", paged=a[1],
                        page_size=cases.PAGE)
        else:
            base = dict(batch=32, heads=128, seq_kv=a[0], dim=512, pe_dim=64, dtype="bfloat16")
        out += [(kind, dict(base, **cfg)) for cfg in configs[config_key(kind, a)]]
    return out


def table(results) -> str:
    lines = ["| case | tilecore | config | peer | tilecore/peer | notes |", "|---|---|---|---|---|---|"]
    for r in results:
        peer = (
            f"{r['peer']}: {r['peer_ms']:.3f} ms, {r['peer_rate']:.0f} {r['unit']}"
            if r.get("peer_ms")
            else str(r.get("peer"))
        )
        if "ms" not in r:
            why = r.get("skipped") or (r["notes"][-1][:80] if r.get("notes") else "")
            lines.append(
                f"| {r['case']} | {'skipped' if r.get('skipped') else 'FAILED'} | {why} | {peer} | | |"
            )
            continue
        extra = ""
        if r["kind"] == "mla":
            extra = f"{r['gbs']:.0f} GB/s, {r['of_peak_flops']:.0%} of dense bf16 peak"
            extra += f", {r['of_copy']:.0%} of copy BW" if r.get("of_copy") else ""
        elif r.get("copy_fraction"):
            extra = f"{r['copy_fraction']:.0%} of copy BW"
        ratio = f"{r['ratio']:.2f}x" if r.get("ratio") else ""
        if r.get("paired"):  # interleaved with the peer: the ratio power capping does not skew
            ratio += f" (paired {r['paired']['ratio']:.2f}x)"
        cfg = " ".join(f"{k}={v}" for k, v in r["config"].items())
        lines.append(
            f"| {r['case']} | {r['ms']:.3f} ms, {r['rate']:.0f} {r['unit']} | {cfg} | {peer} | {ratio} "
            f"| {extra} err {r['err']:.1e} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--budget-s", type=float, default=float(os.environ.get("ATTN_BENCH_BUDGET_S", 170)))
    ap.add_argument("--only", default="fwd,bwd,decode,mla")
    ap.add_argument("--quick", action="store_true", help="the first two configs of each kind")
    ap.add_argument("--ieee", action="store_true", help="no fast math (IEEE division, exp2f)")
    for kind in CONFIGS:
        ap.add_argument(f"--{kind}-configs", help=f"JSON list of {kind} configs (replaces the default list)")
    ns = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("benchmarks/attention.py needs a CUDA device")
        return 2
    configs = {
        k: (json.loads(getattr(ns, f"{k}_configs")) if getattr(ns, f"{k}_configs") else list(v))
        for k, v in CONFIGS.items()
    }
    if ns.quick:
        configs = {k: v[:2] for k, v in configs.items()}
    only = set(ns.only.split(","))
    t0 = time.perf_counter()
    torch.manual_seed(0)
    from tilecore_cuda.launch import device_arch

    arch = device_arch(torch.cuda.current_device())
    print(f"device: {torch.cuda.get_device_name()} ({arch})  torch {torch.__version__}", flush=True)
    if ns.ieee:
        cases.PASS_CONFIGS.clear()
    pool, futures = precompile(jobs(only, configs), arch)
    cases.COPY_GBS.append(gpu.copy_bandwidth(torch))
    flush = gpu.do_bench_flushes()
    print(f"copy bandwidth {cases.COPY_GBS[0]:.0f} GB/s; do_bench flushes L2: {flush}", flush=True)
    plan = [c for c in PRIORITY if c[0] in only]
    results, first_of = [], {}

    def save():
        if ns.out:
            with open(ns.out, "w") as f:
                json.dump(
                    dict(
                        device=torch.cuda.get_device_name(),
                        arch=arch,
                        torch=torch.__version__,
                        copy_gbs=cases.COPY_GBS[0],
                        total_s=time.perf_counter() - t0,
                        results=results,
                    ),
                    f,
                    indent=1,
                    default=str,
                )

    for kind, a in plan:
        # the first case of a kind (per head dim for the forward) sweeps every config, later ones the TOP_K
        group = (kind, a[0]) if kind == "fwd" else kind
        cfgs = configs[config_key(kind, a)] if group not in first_of else first_of[group]
        name = f"{kind} {a}"
        if time.perf_counter() - t0 > ns.budget_s:
            results.append(
                dict(
                    kind=kind, case=name, skipped=f"time budget {ns.budget_s:.0f}s spent", peer=None, unit=""
                )
            )
            continue
        try:
            if kind == "fwd":
                r = cases.case_fwd(torch, arch, cfgs, *a)
            elif kind == "bwd":
                r = cases.case_bwd(torch, arch, cfgs, *a)
            elif kind == "decode":
                r = cases.case_decode(torch, arch, cfgs, *a)
            else:
                r = cases.case_mla(torch, arch, cfgs, *a)
        except Exception as e:  # a broken case must not stop the others
            traceback.print_exc()
            r = dict(
                kind=kind, case=name, notes=[f"FAILED {type(e).__name__}: {str(e)[:200]}"], peer=None, unit=""
            )
        if group not in first_of and r.get("timed"):
            first_of[group] = [c for _, c, _ in r["timed"][:TOP_K]]
        results.append(r)
        save()
        print(
            f"{r['case']}: {r.get('ms')} ms vs {r.get('peer_ms')} ({time.perf_counter() - t0:.0f}s)",
            flush=True,
        )
        torch.cuda.empty_cache()
    pool.shutdown(wait=False, cancel_futures=True)
    bad = [
        f.result() for f in futures if f.done() and not f.cancelled() and f.exception() is None and f.result()
    ]
    for b in bad:
        print(f"  precompile FAILED {b}")
    for r in results:
        for note in r.get("notes", []):
            print(f"  {r['case']}: {note}")
    save()
    print(f"\ntotal {time.perf_counter() - t0:.0f}s\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
