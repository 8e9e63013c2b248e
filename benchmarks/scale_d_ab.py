"""The wgmma scale-d change on the H200 (tilecore/lower/accum_zero.py): with it ("new") and with
`tilecore.disable_wgmma_scale_d` ("old", the zeroing stores of before), against each other and
against torch, in one process.

Run on the lent GPU:  python3 benchmarks/scale_d_ab.py [--rounds 3] [--only bf16,fp16] [--fa]

For every case both kernels are compiled (in a process pool, then loaded), checked against a
float32 torch reference on fresh random inputs with a NaN-poisoned output, and compared with
each other bit for bit (scale-d 0 computes A @ B where the old code computed A @ B + 0: the
same fp32 sums). Then, `rounds` times, case after case: `gpu_paired.bench_pair` (alternating
calls after a 256 MB flush, the median of per-pair ratios) of new against torch, old against
torch, and new against old. Ratios are t_other / t_new: > 1 means new is faster. The last lines
printed are a table with each ratio's median and range over the rounds. `--fa` adds
FlashAttention's backward (new against old only; see `fa_bwd_cases`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)

import gemm  # noqa: E402
import gemm_fp8  # noqa: E402
import gpu_paired  # noqa: E402
from hopper_gemm import precompile  # noqa: E402  (compile jobs in a spawned pool, cubins cached)

import tilecore  # noqa: E402

OLD = {"tilecore.disable_wgmma_scale_d": True}
# (name, example, M, N, K, dtype)
CASES = [
    ("bf16 4096^3", "gemm", 4096, 4096, 4096, "bfloat16"),
    ("fp16 4096^3", "gemm", 4096, 4096, 4096, "float16"),
    ("bf16 8192^3", "gemm", 8192, 8192, 8192, "bfloat16"),
    ("fp16 8192^3", "gemm", 8192, 8192, 8192, "float16"),
    ("fp16 M=1 N=K=4096", "gemm", 1, 4096, 4096, "float16"),
    ("fp16 M=16 N=K=4096", "gemm", 16, 4096, 4096, "float16"),
    ("fp16 M=64 N=K=4096", "gemm", 64, 4096, 4096, "float16"),
    ("fp8 e4m3 8192^3", "gemm_fp8", 8192, 8192, 8192, "float8_e4m3fn"),
]
# checked, not timed: ragged in M, N and K (a K tail of 16) with the large config, 16 x 12 = 192 tiles on 132
# blocks (persistent: a block's second tile starts on its first tile's registers)
CHECK_ONLY = [("bf16 2000x3000x720 persistent", "gemm", 2000, 3000, 720, "bfloat16")]
EXAMPLES = dict(gemm=gemm, gemm_fp8=gemm_fp8)


def _cfg(example: str, m: int, n: int, k: int) -> dict:
    # the default as it was measured here: without stream-K (examples/gemm.py config)
    mod = gemm if example == "gemm" else gemm_fp8
    return dict(mod.config(m, n, k), stream_k=False)


def fa_bwd_cases(torch, arch, s: int = 4096) -> list:
    """[(name, new, old, None, flops)] of FlashAttention's backward (d128 bf16, the tuned Hopper
    configs, fast math as in benchmarks/attention.py): its dK/dV clears before the key loop and
    the S^T / dP^T / dQ clears inside it go. dK and dV of new and old are compared bit for bit,
    dQ (atomics in any order) to 1e-5."""
    import attention_cases as cases

    from tilecore.contrib.attention_configs import tuned_config

    d = 128
    b, h = cases.fwd_shape(d, s)
    out = []
    for causal in (False, True):
        q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        base = dict(batch=b, heads=h, seq_len=s, dim=d, is_causal=causal, dtype="bfloat16")
        fwd = cases.build("fwd", dict(base, return_lse=True, **cases.FWD_FOR_LSE), arch, out_idx=[-2, -1])
        o, lse = fwd(q, k, v)
        pre = cases.build("pre", dict(batch=b, heads=h, seq_len=s, dim=d, dtype="bfloat16"), arch)
        delta = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
        pre(o, do, delta)
        cfg = tuned_config("bwd", f"cuda:{arch}", d, causal, "bfloat16")
        grads = {}
        runs = {}
        for tag, extra in (("new", {}), ("old", OLD)):
            kern = cases.build("bwd", dict(base, **cfg), arch, pass_configs=dict(cases.PASS_CONFIGS, **extra))
            dq = torch.zeros(b, s, h, d, device="cuda", dtype=torch.float32)
            dk, dv = torch.full_like(k, float("nan")), torch.full_like(v, float("nan"))

            def run(kern=kern, dq=dq, dk=dk, dv=dv, ins=(q, k, v, do, lse, delta)):
                dq.zero_()
                kern(*ins, dq, dk, dv)
            run()
            torch.cuda.synchronize()
            grads[tag], runs[tag] = (dq.clone(), dk.clone(), dv.clone()), run
        (qn, kn, vn), (qo, ko, vo) = grads["new"], grads["old"]
        same = bool(torch.equal(kn, ko) and torch.equal(vn, vo))
        dq_err = float((qn - qo).norm() / qo.norm())
        finite = all(bool(t.isfinite().all()) for t in grads["new"])
        name = f"FA bwd d128 s{s}{' causal' if causal else ''}"
        print(f"{name}: cfg {cfg}; dK, dV new == old bitwise: {same}; dQ new vs old {dq_err:.1e}; "
              f"finite: {finite}", flush=True)
        if not (same and finite and dq_err < 1e-5):
            raise SystemExit(f"{name}: new and old differ")
        out.append((name, runs["new"], runs["old"], None, 0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="",
                    help="comma-separated case-name prefixes, spaces as _ (default: all)")
    ap.add_argument("--fa", action="store_true", help="also FlashAttention's backward (new vs old)")
    args = ap.parse_args()
    import torch
    from gpu import rel_err
    from tilecore_cuda.launch import device_arch

    arch = device_arch(0)
    print(f"device: {torch.cuda.get_device_name()} ({arch}) torch {torch.__version__}", flush=True)
    t0 = time.perf_counter()
    jobs = []
    wanted = [w for w in args.only.split(",") if w]
    cases = [c for c in CASES if not wanted or any(c[0].replace(" ", "_").startswith(w) for w in wanted)]
    cases += CHECK_ONLY
    for _, ex, m, n, k, d in cases:
        prog = dict(M=m, N=n, K=k, **_cfg(ex, m, n, k))
        if ex == "gemm":
            prog["dtype"] = d
        jobs.append((ex, prog))
    # both variants into the disk cache ("scale_d": False is hopper_gemm's key for OLD)
    precompile(jobs + [(ex, dict(prog, scale_d=False)) for ex, prog in jobs], arch)
    print(f"precompiled at {time.perf_counter() - t0:.0f}s", flush=True)
    torch.manual_seed(0)
    built = []
    for (name, ex, m, n, k, d), (_, prog) in zip(cases, jobs):
        mod = EXAMPLES[ex]
        kn = tilecore.compile(mod.program(**prog), target=f"cuda:{arch}")
        ko = tilecore.compile(mod.program(**prog), target=f"cuda:{arch}", pass_configs=OLD)
        same_src = kn.get_kernel_source() == ko.get_kernel_source()
        if ex == "gemm":
            dt = getattr(torch, d)
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(k, n, device="cuda", dtype=dt)
            ref = torch.matmul(a.float(), b.float())

            def theirs(a=a, b=b):
                return torch.matmul(a, b)
        else:
            a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
            ref = a.float() @ b.float().t()  # the example's scales multiply to 1
            one = torch.ones((), device="cuda")

            def theirs(a=a, b=b, one=one):
                return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        out_dt = torch.bfloat16 if ex == "gemm_fp8" else getattr(torch, d)
        cn = torch.full((m, n), float("nan"), device="cuda", dtype=out_dt)
        co = torch.full((m, n), float("nan"), device="cuda", dtype=out_dt)
        cfg = prog
        if cfg.get("split_k", 1) > 1:
            raise SystemExit(f"{name}: a split-K config; this script times unsplit kernels only")
        kn(a, b, cn)
        ko(a, b, co)
        torch.cuda.synchronize()
        en, eo = rel_err(cn, ref), rel_err(co, ref)
        equal = bool(torch.equal(cn, co))
        tol = 2e-2 if ex == "gemm_fp8" else 1e-2
        print(f"{name}: cfg {cfg}; err new {en:.2e} old {eo:.2e}; new == old bitwise: {equal}; "
              f"same source: {same_src}", flush=True)
        if not (en < tol and eo < tol):
            raise SystemExit(f"{name}: wrong result")
        if name in {c[0] for c in CHECK_ONLY}:
            continue
        built.append((name, (lambda kn=kn, a=a, b=b, cn=cn: kn(a, b, cn)),
                      (lambda ko=ko, a=a, b=b, co=co: ko(a, b, co)), theirs, m * n * k))
    if args.fa:
        built += fa_bwd_cases(torch, arch)
    res: dict = {name: {"new/torch": [], "old/torch": [], "old/new": [], "ms": [], "mhz": []}
                 for name, *_ in built}
    for r in range(args.rounds):
        for name, new, old, theirs, mnk in built:
            reps = 24 if mnk >= 8192 ** 3 or theirs is None else 100 if mnk >= 4096 ** 3 else 300
            p3 = gpu_paired.bench_pair(torch, new, old, reps=reps)
            row = res[name]
            if theirs is None:  # new against old only
                p1 = dict(p3, ratio=float("nan"), b_ms=float("nan"))
                p2 = dict(ratio=float("nan"))
            else:
                p1 = gpu_paired.bench_pair(torch, new, theirs, reps=reps)
                p2 = gpu_paired.bench_pair(torch, old, theirs, reps=reps)
            row["new/torch"].append(p1["ratio"])
            row["old/torch"].append(p2["ratio"])
            row["old/new"].append(p3["ratio"])
            row["ms"].append((p1["a_ms"], p1["b_ms"], p3["b_ms"]))
            row["mhz"].append((p1["mhz"], p1["watts"]))
            print(f"round {r} {name}: new {p1['a_ms']:.4f} ms torch {p1['b_ms']:.4f} ms -> "
                  f"{p1['ratio']:.4f}; "
                  f"old vs torch {p2['ratio']:.4f}; old {p3['b_ms']:.4f} ms / new {p3['a_ms']:.4f} ms -> "
                  f"{p3['ratio']:.4f}; {p1['mhz']} MHz {p1['watts']} W ({time.perf_counter() - t0:.0f}s)",
                  flush=True)

    def rng(v):
        return f"{statistics.median(v):.3f} [{min(v):.3f}-{max(v):.3f}]"
    print("\n| case | new vs torch | old vs torch | old / new (>1: new faster) | new ms | torch ms |")
    print("|---|---|---|---|---|---|")
    for name, row in res.items():
        ms = statistics.median(x[0] for x in row["ms"])
        tms = statistics.median(x[1] for x in row["ms"])
        print(f"| {name} | {rng(row['new/torch'])} | {rng(row['old/torch'])} | {rng(row['old/new'])} | "
              f"{ms:.4f} | {tms:.4f} |")
    print(f"total {time.perf_counter() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
