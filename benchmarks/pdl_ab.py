"""Programmatic dependent launch on the H200 (option `tilecore.programmatic_launch`): the GEMM
configs of examples/gemm.py / gemm_fp8.py compiled with it ("pdl": griddepcontrol.wait first,
launched with programmatic stream serialization) and without it ("base", the default), against
each other and against torch, in one process.

Run on the lent GPU:  python3 benchmarks/pdl_ab.py [--rounds 3] [--llm-rounds 1] [--only ...]

For every case both kernels are compiled (a process pool, then loaded) and checked against a
float32 torch reference with a NaN-poisoned output, A rewritten by a torch kernel right before
the launch (no synchronization between them: with PDL the GEMM must still see the new A), and
compared with each other bit for bit. Then per round and case: `gpu_paired.bench_pair` of pdl
against torch, base against torch and pdl against base (ratios t_other / t_pdl: > 1 means pdl
is faster), and a chained figure: the per-call time of `flush; fn` repeated in one stream with
one event pair around the loop, minus the flushes alone (no event between the flush and the
kernel, as in a real stream of kernels). The LLM projection shapes (bf16) get `--llm-rounds`
rounds and their geomean. The last lines printed are the tables.
"""

from __future__ import annotations

import argparse
import math
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
from hopper_gemm import LLM_M, LLM_NK, precompile  # noqa: E402

import tilecore  # noqa: E402

PDL = {"tilecore.programmatic_launch": True}
# (name, example, M, N, K, dtype)
CASES = [
    ("bf16 4096^3", "gemm", 4096, 4096, 4096, "bfloat16"),
    ("fp16 4096^3", "gemm", 4096, 4096, 4096, "float16"),
    ("fp16 M=1 N=K=4096", "gemm", 1, 4096, 4096, "float16"),
    ("fp16 M=16 N=K=4096", "gemm", 16, 4096, 4096, "float16"),
    ("fp16 M=1 N=14336 K=4096", "gemm", 1, 14336, 4096, "float16"),
    ("bf16 8192^3", "gemm", 8192, 8192, 8192, "bfloat16"),
    ("fp8 e4m3 8192^3", "gemm_fp8", 8192, 8192, 8192, "float8_e4m3fn"),
]
LLM = [(f"LLM bf16 {m}x{n}x{k}", "gemm", m, n, k, "bfloat16") for m in LLM_M for n, k in LLM_NK]
EXAMPLES = dict(gemm=gemm, gemm_fp8=gemm_fp8)
# variants timed against torch and pdl, each with PDL too: (label, config update, pass configs)
L2P = {"tilecore.tma_l2_promotion": 256}
EXTRAS = {
    "fp16 M=1 N=K=4096": [("l2p256", {}, L2P), ("16x64", {"block_N": 64}, {})],
    "fp16 M=1 N=14336 K=4096": [("l2p256", {}, L2P)],
    "fp16 M=16 N=K=4096": [("l2p256", {}, L2P)],
    "bf16 4096^3": [("p8", {"panel": 8}, {})],
}


def _cfg(example: str, m: int, n: int, k: int) -> dict:
    # the default as it was measured here: without stream-K (examples/gemm.py config)
    mod = gemm if example == "gemm" else gemm_fp8
    return dict(mod.config(m, n, k), stream_k=False)


def chain_ms(torch, fn, flush, n: int) -> float:
    """Per-call ms of `flush.zero_(); fn()` n times in one stream (one event pair around the
    loop), minus the same loop without fn: the kernel's cost inside a stream of kernels."""
    def loop(with_fn: bool) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(n):
            flush.zero_()
            if with_fn:
                fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)
    loop(True)
    both = statistics.median(loop(True) for _ in range(3))
    alone = statistics.median(loop(False) for _ in range(3))
    return (both - alone) / n


def build(torch, arch, cases):
    """[(name, pdl, base, theirs, mnk)] for `cases`, each kernel checked first."""
    from gpu import rel_err

    out = []
    for name, ex, m, n, k, d in cases:
        mod = EXAMPLES[ex]
        prog = dict(M=m, N=n, K=k, **_cfg(ex, m, n, k))
        if ex == "gemm":
            prog["dtype"] = d
        if prog.get("split_k", 1) > 1:
            raise SystemExit(f"{name}: a split-K config; this script times unsplit kernels only")
        kp = tilecore.compile(mod.program(**prog), target=f"cuda:{arch}", pass_configs=PDL)
        kb = tilecore.compile(mod.program(**prog), target=f"cuda:{arch}")
        assert "griddepcontrol.wait" in kp.get_kernel_source()
        assert "griddepcontrol.wait" not in kb.get_kernel_source()
        if ex == "gemm":
            dt = getattr(torch, d)
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(k, n, device="cuda", dtype=dt)
            a_next = torch.randn(m, k, device="cuda", dtype=dt)
            ref = torch.matmul(a_next.float(), b.float())

            def theirs(a=a, b=b):
                return torch.matmul(a, b)
        else:
            a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
            a_next = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
            ref = a_next.float() @ b.float().t()  # the example's scales multiply to 1
            one = torch.ones((), device="cuda")

            def theirs(a=a, b=b, one=one):
                return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        out_dt = torch.bfloat16 if ex == "gemm_fp8" else getattr(torch, d)
        cp = torch.full((m, n), float("nan"), device="cuda", dtype=out_dt)
        cb = torch.full((m, n), float("nan"), device="cuda", dtype=out_dt)
        kp(a, b, cp)  # warm (module load, tensor maps): the checked launches below enqueue at once
        kb(a, b, cb)
        cp.fill_(float("nan"))
        cb.fill_(float("nan"))
        for kern, c in ((kp, cp), (kb, cb)):
            a.zero_()
            torch.cuda.synchronize()
            a.copy_(a_next)  # a kernel right before the (dependent) launch writes A
            kern(a, b, c)
            torch.cuda.synchronize()
        ep, eb = rel_err(cp, ref), rel_err(cb, ref)
        equal = bool(torch.equal(cp, cb))
        tol = 2e-2 if ex == "gemm_fp8" else 1e-2
        print(f"{name}: cfg {prog}; err pdl {ep:.2e} base {eb:.2e}; pdl == base bitwise: {equal}", flush=True)
        if not (ep < tol and eb < tol and equal):
            raise SystemExit(f"{name}: wrong result")
        extras = []
        for label, upd, configs in EXTRAS.get(name, ()):
            ke = tilecore.compile(mod.program(**dict(prog, **upd)), target=f"cuda:{arch}",
                                  pass_configs=dict(PDL, **configs))
            ce = torch.full((m, n), float("nan"), device="cuda", dtype=out_dt)
            ke(a, b, ce)
            ce.fill_(float("nan"))
            a.zero_()
            torch.cuda.synchronize()
            a.copy_(a_next)
            ke(a, b, ce)
            torch.cuda.synchronize()
            ee = rel_err(ce, ref)
            print(f"  {name} + {label}: err {ee:.2e}", flush=True)
            if not ee < tol:
                raise SystemExit(f"{name} + {label}: wrong result")
            extras.append((label, lambda ke=ke, a=a, b=b, ce=ce: ke(a, b, ce)))
        out.append((name, (lambda kp=kp, a=a, b=b, cp=cp: kp(a, b, cp)),
                    (lambda kb=kb, a=a, b=b, cb=cb: kb(a, b, cb)), theirs, m * n * k, extras))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--llm-rounds", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated case-name prefixes, spaces as _")
    args = ap.parse_args()
    import torch
    from tilecore_cuda.launch import device_arch

    arch = device_arch(0)
    print(f"device: {torch.cuda.get_device_name()} ({arch}) torch {torch.__version__}", flush=True)
    t0 = time.perf_counter()
    wanted = [w for w in args.only.split(",") if w]
    pick = [c for c in CASES if not wanted or any(c[0].replace(" ", "_").startswith(w) for w in wanted)]
    llm = LLM if args.llm_rounds > 0 else []
    jobs = []
    for _, ex, m, n, k, d in pick + llm:
        prog = dict(M=m, N=n, K=k, **_cfg(ex, m, n, k))
        if ex == "gemm":
            prog["dtype"] = d
        jobs += [(ex, prog), (ex, dict(prog, programmatic=True))]
    for name, ex, m, n, k, d in pick:
        for _, upd, _ in EXTRAS.get(name, ()):
            cfg = dict(_cfg(ex, m, n, k), **upd)
            jobs.append((ex, dict(M=m, N=n, K=k, **cfg, dtype=d, programmatic=True)))
    precompile(jobs, arch)  # (the extras' pass configs other than PDL compile in the process)
    print(f"precompiled at {time.perf_counter() - t0:.0f}s", flush=True)
    torch.manual_seed(0)
    built = build(torch, arch, pick)
    built_llm = build(torch, arch, llm)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    res: dict = {}

    def measure(rows, rounds, chained):
        for r in range(rounds):
            for name, pdl, base, theirs, mnk, extras in rows:
                reps = 12 if mnk >= 16384 * 8192 * 8192 else 24 if mnk >= 8192 ** 3 else \
                    100 if mnk >= 4096 ** 3 else 300
                p1 = gpu_paired.bench_pair(torch, pdl, theirs, reps=reps)
                p2 = gpu_paired.bench_pair(torch, base, theirs, reps=reps)
                p3 = gpu_paired.bench_pair(torch, pdl, base, reps=reps)
                row = res.setdefault(name, {"pdl/torch": [], "base/torch": [], "base/pdl": [], "ms": [],
                                            "chain": []})
                row["pdl/torch"].append(p1["ratio"])
                row["base/torch"].append(p2["ratio"])
                row["base/pdl"].append(p3["ratio"])
                row["ms"].append((p1["a_ms"], p1["b_ms"], p3["b_ms"]))
                line = (f"round {r} {name}: pdl {p1['a_ms']:.4f} ms torch {p1['b_ms']:.4f} -> "
                        f"{p1['ratio']:.4f}; "
                        f"base vs torch {p2['ratio']:.4f}; base {p3['b_ms']:.4f} / pdl {p3['a_ms']:.4f} -> "
                        f"{p3['ratio']:.4f}; {p1['mhz']} MHz {p1['watts']} W")
                if chained:
                    n = 200 if mnk < 4096 ** 3 else 40
                    c = tuple(chain_ms(torch, f, flush, n) for f in (pdl, base, theirs))
                    row["chain"].append(c)
                    line += f"; chained ms pdl {c[0]:.4f} base {c[1]:.4f} torch {c[2]:.4f}"
                print(line + f" ({time.perf_counter() - t0:.0f}s)", flush=True)
                for label, fn in extras:
                    q1 = gpu_paired.bench_pair(torch, fn, theirs, reps=reps)
                    q2 = gpu_paired.bench_pair(torch, fn, pdl, reps=reps)
                    ex_row = res.setdefault(f"{name} + {label}", {"vs torch": [], "pdl/it": [], "ms": []})
                    ex_row["vs torch"].append(q1["ratio"])
                    ex_row["pdl/it"].append(q2["ratio"])
                    ex_row["ms"].append(q1["a_ms"])
                    print(f"  {name} + {label}: {q1['a_ms']:.4f} ms vs torch {q1['ratio']:.4f}; "
                          f"pdl / it {q2['ratio']:.4f}", flush=True)

    measure(built, args.rounds, True)
    measure(built_llm, args.llm_rounds, False)

    def rng(v):
        return f"{statistics.median(v):.3f} [{min(v):.3f}-{max(v):.3f}]"

    def geo(v):
        return math.exp(sum(math.log(x) for x in v) / len(v))
    print("\n| case | pdl vs torch | base vs torch | base / pdl (>1: pdl faster) | pdl ms | torch ms | "
          "TFLOP/s pdl / torch | chained us pdl / base / torch |")
    print("|---|---|---|---|---|---|---|---|")
    for name, *_, mnk, _ in built + built_llm:
        row = res[name]
        ms = statistics.median(x[0] for x in row["ms"])
        tms = statistics.median(x[1] for x in row["ms"])
        chain = "-"
        if row["chain"]:
            chain = " / ".join(f"{1e3 * statistics.median(c[i] for c in row['chain']):.1f}" for i in range(3))
        print(f"| {name} | {rng(row['pdl/torch'])} | {rng(row['base/torch'])} | {rng(row['base/pdl'])} | "
              f"{ms:.4f} | {tms:.4f} | {2 * mnk / ms * 1e-9:.0f} / {2 * mnk / tms * 1e-9:.0f} | {chain} |")
    extra_rows = [k for k in res if " + " in k]
    if extra_rows:
        print("\n| variant (with PDL) | vs torch | pdl default / it (>1: it faster) | ms |")
        print("|---|---|---|---|")
        for key in extra_rows:
            row = res[key]
            ms = statistics.median(row["ms"])
            print(f"| {key} | {rng(row['vs torch'])} | {rng(row['pdl/it'])} | {ms:.4f} |")
    if built_llm:
        for key in ("pdl/torch", "base/torch"):
            g = geo([statistics.median(res[name][key]) for name, *_ in built_llm])
            print(f"LLM geomean {key}: {g:.4f}")
    print(f"total {time.perf_counter() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
