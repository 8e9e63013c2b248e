"""Hopper (wgmma) GEMM on the H200 against cuBLAS, in one process beside torch.

Run on the lent GPU:  python benchmarks/hopper_gemm.py [--out results.json] [--quick]
                      [--sections sweep,large,llm,small,fp8,ragged] [--budget S]

- sweep: every config of CONFIGS on GEMM fp16 4096^3 (checked against a float32 torch
  reference, then timed); large: the TOP_K fastest on bf16 4096^3 and fp16/bf16 8192^3;
- llm: the LLM projection shapes (M in LLM_M; (N, K) in LLM_NK), bf16, every config of
  LLM_CONFIGS (the best per shape is the row that counts), each against torch.matmul;
- small: small M (SMALL_SHAPES: M = 1 and 16 with N = K = 4096, M = 1 with N = 14336), every
  config of SMALL_CONFIGS ("auto": examples/gemm.py's small_m_config; split-K configs zero C in
  every timed call, except "split_reduce": "workspace" ones, which need no zeroed C), then
  SMALL_EXTRA_SHAPES with SMALL_EXTRA_CONFIGS, beside the floors (B.sum(),
  C.zero_()), against torch.matmul of the same shapes, with the achieved GB/s
  (A + B + C bytes once) beside a device copy's;
- gemv: examples/gemv.py (B streamed through registers, no tensor cores) at M = 1, every
  config of GEMV_CONFIGS, against torch.matmul of the same shapes, with GB/s;
- fp8: the fp8 example (e4m3 x e4m3 -> fp32 -> bf16) at 8192^3 against torch._scaled_mm;
- ragged: a ragged GEMM (M, N, K not tile multiples) and a ragged fp8 GEMM for correctness, and
  stream-K against the plain kernel on the same inputs (bit-identical repeat calls);
- host: host microseconds per call of a TMA GEMM (prepared launch with its tensor-map slots,
  against the general launch path that encodes every map per call) beside torch.matmul.
Times are `triton.testing.do_bench` medians (L2 flushed before each repetition, see gpu.py).
Kernels are compiled ahead in a process pool (the cubins land in the on-disk cache).
HOPPER_CONFIGS='[[gemm configs], [fp8 configs]]' (JSON) replaces the two config lists;
HOPPER_LLM_CONFIGS / HOPPER_SMALL_CONFIGS (JSON lists) replace LLM_CONFIGS / SMALL_CONFIGS;
HOPPER_TOP_K: how many sweep winners "large" runs (default 2). "auto" in any list is
examples/gemm.py's `config(M, N, K)` for the case's shape (the shipped choice by shape).
Every timed row also gets an interleaved A/B against torch (gpu_paired.bench_pair: alternate
calls after the same flush, the median of per-pair ratios: robust to the board's clock drift)
and the SM clock / power each kernel sustains (NVML); HOPPER_PAIRED=0 leaves them out.
A config's "tma_store": false compiles it with `tilecore.disable_tma_store` (the per-thread
staged epilogue instead of TMA stores, tilecore/lower/tma_store.py: an A/B of that lowering);
"pingpong": true with `tilecore.ws_pingpong` (tilecore/lower/pingpong.py; e.g. block 128x128,
threads=128: two consumer warpgroups on alternate tiles); "suspend_hint": true with
`tilecore.mbarrier_suspend_hint` (mbarrier waits parked by a suspend-time hint); "scale_d":
false with `tilecore.disable_wgmma_scale_d` (accumulators zeroed by stores before the k loop
instead of wgmma's scale-d 0 on the first k step, tilecore/lower/accum_zero.py); "stream_k": true
(examples/gemm.py / gemm_fp8.py `program(stream_k=True)`) passes the program its W and Flags
(`stream_k_shapes`; NaN W, Flags zeroed once); "programmatic":
true with `tilecore.programmatic_launch` (griddepcontrol.wait first, launched as a programmatic
dependent of the previous kernel in the stream).
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
import gemv  # noqa: E402
import gpu  # noqa: E402  (benchmarks/gpu.py: its read-flushed timing)
import gpu_paired  # noqa: E402  (interleaved A/B timing, SM clock and power)

import tilecore  # noqa: E402

CONFIGS = ["auto",  # examples/gemm.py's config(M, N, K): the shipped choice
           dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128),
           dict(block_M=128, block_N=128, block_K=64, num_stages=4, threads=128),
           dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256),
           dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256),
           dict(block_M=256, block_N=128, block_K=64, num_stages=4, threads=256),
           dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256, panel=8),
           # two consumer warpgroups on alternate 128x128 tiles (3-5% slower, BENCHMARKS.md)
           dict(block_M=128, block_N=128, block_K=64, num_stages=4, threads=128, panel=16, pingpong=True)]
# "auto" is examples/gemm_fp8.py's config (128x256x128 s3 t256 p8)
FP8_CONFIGS = ["auto", dict(block_M=128, block_N=256, block_K=128, num_stages=4, threads=256),
               dict(block_M=128, block_N=256, block_K=128, num_stages=3, threads=256)]
if os.environ.get("HOPPER_CONFIGS"):  # a JSON [[gemm configs], [fp8 configs]] for a focused run
    CONFIGS, FP8_CONFIGS = json.loads(os.environ["HOPPER_CONFIGS"])
LLM_NK = [(4096, 4096), (14336, 4096), (4096, 14336), (28672, 8192)]
LLM_M = [4096, 16384]
# 2 consumer warpgroups + a producer; `panel` rasterizes the grid (T.use_swizzle) for L2 reuse
LLM_CONFIGS = ["auto",  # 128x256x64 s3 p16 (TMA store)
               dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, panel=8),
               dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256, panel=8),
               dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256, panel=16)]
SMALL_SHAPES = [(1, 4096, 4096), (16, 4096, 4096), (1, 14336, 4096)]
# bandwidth-bound: narrow column tiles so every multiprocessor streams B through deep TMA stages;
# "auto" is examples/gemm.py's small_m_config (the shipped choice)
_EF = dict(b_eviction="evict_first")
SMALL_CONFIGS = ["auto",
                 dict(block_M=16, block_N=64, block_K=256, num_stages=4, threads=128, **_EF),
                 dict(block_M=16, block_N=32, block_K=256, num_stages=4, threads=128, **_EF)]
# beyond the three: M = 64 (the top of "small M") and a narrow N with a long K, where
# 32-column tiles leave most multiprocessors idle and examples/gemm.py's choice splits k
SMALL_EXTRA_SHAPES = [(64, 4096, 4096), (1, 1024, 16384)]
SMALL_EXTRA_CONFIGS = ["auto", dict(block_M=64, block_N=64, block_K=128, num_stages=4, threads=128, **_EF),
                       dict(block_M=16, block_N=32, block_K=256, num_stages=4, threads=128, **_EF)]
for _env, _name in (("HOPPER_LLM_CONFIGS", "LLM_CONFIGS"), ("HOPPER_SMALL_CONFIGS", "SMALL_CONFIGS"),
                    ("HOPPER_SMALL_EXTRA_CONFIGS", "SMALL_EXTRA_CONFIGS")):
    if os.environ.get(_env):
        globals()[_name] = json.loads(os.environ[_env])
GEMV_SHAPES = [(1, 4096, 4096), (1, 14336, 4096)]
# examples/gemv.py: B streamed into registers (block_K x block_N per iteration and block)
GEMV_CONFIGS = [dict(block_N=32, block_K=512, threads=256), dict(block_N=16, block_K=512, threads=256),
                dict(block_N=16, block_K=1024, threads=256), dict(block_N=32, block_K=1024, threads=256),
                dict(block_N=64, block_K=512, threads=256), dict(block_N=32, block_K=512, threads=512)]
if os.environ.get("HOPPER_GEMV_CONFIGS"):
    GEMV_CONFIGS = json.loads(os.environ["HOPPER_GEMV_CONFIGS"])
SECTIONS = ("sweep", "large", "llm", "small", "gemv", "fp8", "ragged", "host")
TOP_K = int(os.environ.get("HOPPER_TOP_K", "2"))
EXAMPLES = dict(gemm=gemm, gemm_fp8=gemm_fp8, gemv=gemv)


def split_cfg(params: dict) -> tuple[dict, dict | None]:
    """(the example's program() arguments, pass_configs) of a benchmark config: its keys
    "tma_store" (False: no TMA-store epilogue) and "pingpong" (True: two consumer warpgroups
    on alternate tiles, for a 128-thread tile program) are compile options, not arguments."""
    params = dict(params)
    configs = {}
    if not params.pop("tma_store", True):
        configs["tilecore.disable_tma_store"] = True
    if params.pop("pingpong", False):
        configs["tilecore.ws_pingpong"] = True
    if params.pop("suspend_hint", False):
        configs["tilecore.mbarrier_suspend_hint"] = True
    if not params.pop("scale_d", True):
        configs["tilecore.disable_wgmma_scale_d"] = True
    if params.pop("programmatic", False):
        configs["tilecore.programmatic_launch"] = True
    return params, configs or None


def _compile_one(job):
    """Pool worker: build one kernel's cubin into the disk cache."""
    name, params, arch = job
    t0 = time.perf_counter()
    try:
        args, configs = split_cfg(params)
        tilecore.compile(EXAMPLES[name].program(**args), target=f"cuda:{arch}",
                         pass_configs=configs).artifact.cubin(arch)
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


def small_cfg(c, m: int, n: int, k: int, sms: int = 132) -> dict:
    """A config of any list: "auto" is examples/gemm.py's `config` for the shape (the config it
    picks by shape: small_m_config for M <= 64), "auto:no-tma-store" the same without the
    TMA-store epilogue; a dict is itself."""
    if c == "auto":
        return gemm.config(m, n, k, sms)
    if c == "auto:no-tma-store":
        return dict(gemm.config(m, n, k, sms), tma_store=False)
    return c


def fp8_cfg(c) -> dict:
    """An fp8 config: "auto" is examples/gemm_fp8.py's `config`; a dict is itself."""
    return gemm_fp8.config(8192, 8192, 8192) if c == "auto" else c


def _cfg_str(c: dict) -> str:
    if "block_M" not in c:  # gemv
        return f"{c['block_N']} cols x {c['block_K']} rows t{c.get('threads', 256)}"
    return f"{c['block_M']}x{c['block_N']}x{c['block_K']} s{c['num_stages']} t{c['threads']}" + \
        (f" p{c['panel']}" if c.get("panel") else "") + \
        (f" split{c['split_k']}" if c.get("split_k", 1) > 1 else "") + \
        (" ws" if c.get("split_reduce") == "workspace" else "") + \
        (" stream-K" if c.get("stream_k") else "") + \
        (" ef" if c.get("b_eviction") else "") + ("" if c.get("tma_store", True) else " no-tma-store") + \
        (" pingpong" if c.get("pingpong") else "") + (" hint" if c.get("suspend_hint") else "")


def _paired_str(row: dict) -> str:
    """", interleaved 1.012, 1755 MHz 690 W (torch 1740 MHz 695 W)" for a row that has them."""
    out = f", interleaved {row['paired_ratio']:.3f}" if row.get("paired_ratio") else ""
    if row.get("mhz") and row.get("torch_mhz"):
        out += (f", {row['mhz']:.0f} MHz {row['watts']:.0f} W (torch {row['torch_mhz']:.0f} MHz "
                f"{row['torch_watts']:.0f} W)")
    return out


def host_case(torch, arch: str, reps: int = 2000) -> str:
    """Host microseconds per call of a small TMA GEMM (the launch path, not the kernel)."""
    from tilecore_cuda.artifact import CudaArtifact

    m = 256
    a, b = (torch.randn(m, m, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty(m, m, device="cuda", dtype=torch.float16)
    prog = gemm.program(M=m, N=m, K=m, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128)

    def per_call(fn) -> float:
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(reps):
                fn()
            best = min(best, (time.perf_counter() - t) / reps)
            torch.cuda.synchronize()
        return best * 1e6

    kern = tilecore.compile(prog, target=f"cuda:{arch}")
    if not kern.artifact.tensor_maps:
        return "host: the kernel has no tensor maps (no TMA): not measured"
    fast = per_call(lambda: kern(a, b, c))
    launcher = CudaArtifact.launcher
    CudaArtifact.launcher = lambda self, dyn, device: None  # the general path, as before
    try:
        slow_k = tilecore.compile(prog, target=f"cuda:{arch}")
        slow_k._plans.clear()
        slow = per_call(lambda: slow_k(a, b, c))
    finally:
        CudaArtifact.launcher = launcher
    mm = per_call(lambda: torch.matmul(a, b, out=c))
    return (f"host per call, TMA GEMM 256^3 ({len(kern.artifact.tensor_maps)} tensor maps): prepared launch "
            f"{fast:.1f} us, general launch path {slow:.1f} us, torch.matmul(out=) {mm:.1f} us")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true", help="4096^3 fp16 sweep and fp8 only")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="comma-separated subset of " + ",".join(SECTIONS))
    ap.add_argument("--budget", type=float, default=1e9, help="seconds after which no new case starts")
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    if args.quick:
        sections &= {"sweep", "fp8"}
    import torch
    from gpu import bench, rel_err
    from tilecore_cuda.launch import device_arch

    arch = device_arch(0)
    print(f"device: {torch.cuda.get_device_name()} ({arch}) torch {torch.__version__}", flush=True)
    t_start = time.perf_counter()
    jobs = []
    if "sweep" in sections or "large" in sections:
        jobs += [("gemm", dict(M=4096, N=4096, K=4096, dtype="float16", **small_cfg(c, 4096, 4096, 4096)))
                 for c in CONFIGS]
    if "large" in sections:  # every config: the winners of the sweep are not known yet
        jobs += [("gemm", dict(M=m, N=m, K=m, dtype=d, **small_cfg(c, m, m, m))) for c in CONFIGS
                 for m, d in ((4096, "bfloat16"), (8192, "float16"), (8192, "bfloat16"))]
    if "llm" in sections:
        jobs += [("gemm", dict(M=m, N=n, K=k, dtype="bfloat16", **small_cfg(c, m, n, k))) for c in LLM_CONFIGS
                 for m in LLM_M for n, k in LLM_NK]
    if "small" in sections:
        jobs += [("gemm", dict(M=m, N=n, K=k, dtype="float16", **small_cfg(c, m, n, k)))
                 for cfgs, shapes in ((SMALL_CONFIGS, SMALL_SHAPES),
                                      (SMALL_EXTRA_CONFIGS, SMALL_EXTRA_SHAPES))
                 for c in cfgs for m, n, k in shapes]
    if "gemv" in sections:
        jobs += [("gemv", dict(M=m, N=n, K=k, **c)) for c in GEMV_CONFIGS for m, n, k in GEMV_SHAPES]
    if "fp8" in sections:
        jobs += [("gemm_fp8", dict(M=8192, N=8192, K=8192, **fp8_cfg(c))) for c in FP8_CONFIGS]
    precompile(jobs, arch)
    print(f"precompiled at {time.perf_counter() - t_start:.0f}s", flush=True)
    rows, notes = [], []

    def gemm_case(m, n, k, dtype_name, cfg, example=gemm, clean_l2=False):
        if time.perf_counter() - t_start > args.budget:
            raise TimeoutError("out of the run's time budget")
        dtype = getattr(torch, dtype_name)
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        prog_args, configs = split_cfg(cfg)
        prog = example.program(M=m, N=n, K=k, dtype=dtype_name, **prog_args)
        kern = tilecore.compile(prog, target=f"cuda:{arch}", pass_configs=configs)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        if cfg.get("split_k", 1) > 1 and cfg.get("split_reduce") == "workspace":
            # partials in W (NaN: each call must write what it reads), counters zero once
            (ws, _), (cs, _) = example.workspace_shapes(m, n, **cfg)
            w = torch.full(ws, float("nan"), device="cuda", dtype=torch.float32)
            cnt = torch.zeros(cs, device="cuda", dtype=torch.int32)

            def call():
                kern(a, b, w, cnt, c)
        elif cfg.get("stream_k"):  # W needs no initialization, the counters zero once
            (ws, _), (fs, _) = example.stream_k_shapes(m, n, **cfg)
            w = torch.full(ws, float("nan"), device="cuda", dtype=torch.float32)
            flags = torch.zeros(fs, device="cuda", dtype=torch.int32)

            def call():
                kern(a, b, w, flags, c)
        elif cfg.get("split_k", 1) > 1:  # the blocks add into C: zeroing it is part of every call
            def call():
                c.zero_()
                kern(a, b, c)
        else:
            def call():
                kern(a, b, c)
        call()
        err = rel_err(c, torch.matmul(a.float(), b.float()))
        if not err < 1e-2:
            raise AssertionError(f"relative error {err:.3e}")
        ms = bench(call)
        t_torch = bench(lambda: torch.matmul(a, b))
        extra = paired(call, lambda: torch.matmul(a, b), ms, t_torch)
        if clean_l2:
            mc, tc = bench_clean(call), bench_clean(lambda: torch.matmul(a, b))
            nb = 2 * (m * k + k * n + m * n)
            notes.append(f"{m}x{n}x{k} {_cfg_str(cfg)} with L2 flushed by a read (no dirty lines): "
                         f"{mc * 1e3:.1f} us ({nb / mc / 1e6:.0f} GB/s), torch.matmul {tc * 1e3:.1f} us "
                         f"({nb / tc / 1e6:.0f} GB/s), ratio {tc / mc:.3f}")
        return ms, t_torch, err, extra

    def stream_k_check(m, n, k, dtype_name="bfloat16") -> str:
        """Stream-K against the same kernel without it, on the same inputs: two stream-K calls
        bit-identical (the partials are summed in block order), the error of both against a
        float32 torch reference, and the largest difference between them."""
        base = dict(gemm.LARGE_CONFIG)
        dtype = getattr(torch, dtype_name)
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        kb = tilecore.compile(gemm.program(M=m, N=n, K=k, dtype=dtype_name, **base), target=f"cuda:{arch}")
        ks = tilecore.compile(gemm.program(M=m, N=n, K=k, dtype=dtype_name, stream_k=True, **base),
                              target=f"cuda:{arch}")
        (ws, _), (fs, _) = gemm.stream_k_shapes(m, n, **base)
        w = torch.full(ws, float("nan"), device="cuda", dtype=torch.float32)
        flags = torch.zeros(fs, device="cuda", dtype=torch.int32)
        outs = [torch.full((m, n), float("nan"), device="cuda", dtype=dtype) for _ in range(3)]
        kb(a, b, outs[0])
        ks(a, b, w, flags, outs[1])
        ks(a, b, w, flags, outs[2])
        ref = torch.matmul(a.float(), b.float())
        same = bool(torch.equal(outs[1], outs[2]))
        diff = (outs[1].float() - outs[0].float()).abs().max().item()
        errs = rel_err(outs[1], ref), rel_err(outs[0], ref)
        return (f"stream-K check {dtype_name} {m}x{n}x{k}: bit-identical across calls {same}, flags left "
                f"zero {not bool(flags.any())}, err {errs[0]:.2e} (no stream-K {errs[1]:.2e}), "
                f"max |stream-K - no stream-K| {diff:.3g}")

    def paired(ours, theirs, ms, t_theirs) -> dict:
        """The interleaved ratio and both kernels' sustained clock / power (module docstring)."""
        if os.environ.get("HOPPER_PAIRED", "1") == "0":
            return {}
        p = gpu_paired.bench_pair(torch, ours, theirs, reps=60 if ms < 1.0 else 24)
        mhz, w = gpu_paired.clocked(torch, ours, ms)
        tmhz, tw = gpu_paired.clocked(torch, theirs, t_theirs)
        return dict(paired_ratio=p["ratio"], paired_ms=p["a_ms"], paired_torch_ms=p["b_ms"],
                    mhz=mhz, watts=w, torch_mhz=tmhz, torch_watts=tw)

    def bench_clean(fn, reps: int = 40) -> float:
        """Median ms of `fn` after L2 was flushed by *reading* 256 MB (gpu.bench_read_flushed)."""
        return gpu.bench_read_flushed(torch, fn, reps)

    def record(case, cfg, ms, t_torch, err, flops, nbytes=0, extra=None):
        row = dict(case=case, cfg=cfg, ms=ms, torch_ms=t_torch, tflops=flops / ms / 1e9,
                   torch_tflops=flops / t_torch / 1e9, ratio=t_torch / ms, err=err, **(extra or {}))
        if nbytes:
            row.update(gbs=nbytes / ms / 1e6, torch_gbs=nbytes / t_torch / 1e6)
        rows.append(row)
        bw = f", {row['gbs']:.0f} GB/s (torch {row['torch_gbs']:.0f})" if nbytes else ""
        print(f"{case} {cfg}: {ms:.4f} ms {row['tflops']:.0f} TFLOP/s, torch {row['torch_tflops']:.0f}{bw}, "
              f"ratio {row['ratio']:.3f}{_paired_str(row)}, err {err:.1e} "
              f"({time.perf_counter() - t_start:.0f}s)", flush=True)

    def run(case, m, n, k, d, cfg, nbytes=0, example=gemm):
        try:
            ms, tt, err, extra = gemm_case(m, n, k, d, cfg, example, clean_l2=bool(nbytes))
            record(case, cfg, ms, tt, err, 2.0 * m * n * k, nbytes, extra)
            return ms
        except Exception as e:
            notes.append(f"{case} {cfg}: FAILED {type(e).__name__}: {str(e)[:300]}")
            traceback.print_exc()
            return None

    timed = []
    if "sweep" in sections or "large" in sections:
        for cfg in CONFIGS:
            ms = run("gemm fp16 4096^3", 4096, 4096, 4096, "float16", small_cfg(cfg, 4096, 4096, 4096))
            if ms is not None:
                timed.append((ms, cfg))
    timed.sort(key=lambda t: t[0])
    best = [c for _, c in timed[:TOP_K]]
    if "large" in sections:
        for m, n, k, d in [(4096, 4096, 4096, "bfloat16"), (8192, 8192, 8192, "float16"),
                           (8192, 8192, 8192, "bfloat16")]:
            for cfg in best:
                run(f"gemm {d} {m}x{n}x{k}", m, n, k, d, small_cfg(cfg, m, n, k))
    if "llm" in sections:
        for m in LLM_M:
            for n, k in LLM_NK:
                for cfg in LLM_CONFIGS:
                    run(f"gemm bf16 {m}x{n}x{k} (LLM)", m, n, k, "bfloat16", small_cfg(cfg, m, n, k))
    if "small" in sections:
        copy_gbs = None
        try:
            x = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
            y = torch.empty_like(x)
            copy_gbs = 2 * x.numel() / bench(lambda: y.copy_(x)) / 1e6
            notes.append(f"device copy: {copy_gbs:.0f} GB/s (read + write of 256 MB)")
            del x, y
        except Exception as e:
            notes.append(f"copy bandwidth: FAILED {e}")
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        for m, n, k, cfgs in [(*shape, SMALL_CONFIGS) for shape in SMALL_SHAPES] + \
                [(*shape, SMALL_EXTRA_CONFIGS) for shape in SMALL_EXTRA_SHAPES]:
            try:  # the floors: a read of B alone (torch's sum) and the zeroing split-K adds
                b = torch.randn(k, n, device="cuda", dtype=torch.float16)
                c0 = torch.empty(m, n, device="cuda", dtype=torch.float16)
                notes.append(f"{m}x{n}x{k}: B.sum() {bench(b.sum) * 1e3:.1f} us under do_bench, "
                             f"{bench_clean(b.sum) * 1e3:.1f} us read-flushed ({2 * k * n / 1e6:.1f} MB); "
                             f"C.zero_() {bench(c0.zero_) * 1e3:.1f} us")
                del b, c0
            except Exception as e:
                notes.append(f"small-M floors: FAILED {e}")
            for cfg in cfgs:
                cfg = small_cfg(cfg, m, n, k, sms)
                run(f"gemm fp16 {m}x{n}x{k} (small M)", m, n, k, "float16", cfg, 2 * (m * k + k * n + m * n))
    if "gemv" in sections:
        for m, n, k in GEMV_SHAPES:
            for cfg in GEMV_CONFIGS:
                run(f"gemv fp16 {m}x{n}x{k}", m, n, k, "float16", cfg, 2 * (m * k + k * n + m * n), gemv)
    if "ragged" in sections:
        try:
            ms, tt, err, _ = gemm_case(1, 1000, 1000, "float16", dict(block_N=32, block_K=512), gemv)
            notes.append(f"ragged gemv fp16 1x1000x1000: err {err:.2e}")
            ms, tt, err, _ = gemm_case(1000, 520, 300, "float16", dict(block_M=128, block_N=128, block_K=64,
                                                                    num_stages=3, threads=128))
            notes.append(f"ragged gemm fp16 1000x520x300: err {err:.2e}")
            ms, tt, err, _ = gemm_case(1000, 520, 304, "float16", dict(block_M=128, block_N=256, block_K=64,
                                                                    num_stages=3, threads=256))
            notes.append(f"ragged gemm fp16 1000x520x304 (128x256 s3 t256, producer): err {err:.2e}")
            for st in (4, 3):  # s3: the TMA-store epilogue on a persistent, ragged grid
                big = dict(block_M=128, block_N=256, block_K=64, num_stages=st, threads=256, panel=16)
                ms, tt, err, _ = gemm_case(4000, 4000, 1000, "float16", big)
                notes.append(f"ragged gemm fp16 4000x4000x1000 (128x256 s{st} t256 p16, persistent: "
                             f"512 tiles on 132 blocks): err {err:.2e}")
            for m, n, k in ((4000, 4000, 1000), (4096, 4096, 4096)):
                notes.append(stream_k_check(m, n, k))
            for small in (dict(block_M=16, block_N=64, block_K=256, num_stages=4, threads=128),
                          dict(block_M=16, block_N=64, block_K=128, num_stages=4, threads=128, split_k=3,
                               b_eviction="evict_first"),
                          dict(block_M=16, block_N=64, block_K=128, num_stages=4, threads=128, split_k=3,
                               b_eviction="evict_first", split_reduce="workspace")):
                ms, tt, err, _ = gemm_case(3, 1000, 1000, "float16", small)
                notes.append(f"ragged small-M fp16 3x1000x1000 ({_cfg_str(small)}): err {err:.2e}")
        except Exception as e:
            notes.append(f"ragged gemm: FAILED {type(e).__name__}: {str(e)[:300]}")

    def fp8_case(m, n, k, cfg):
        """(tilecore ms, _scaled_mm ms, tilecore error, _scaled_mm error); times only at 8192."""
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        prog_args, configs = split_cfg(cfg)
        kern = tilecore.compile(gemm_fp8.program(M=m, N=n, K=k, **prog_args), target=f"cuda:{arch}",
                                pass_configs=configs)
        y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        if cfg.get("stream_k"):
            (ws, _), (fs, _) = gemm_fp8.stream_k_shapes(m, n, **cfg)
            w = torch.full(ws, float("nan"), device="cuda", dtype=torch.float32)
            flags = torch.zeros(fs, device="cuda", dtype=torch.int32)
            plain = kern
            kern = lambda a, b, y: plain(a, b, w, flags, y)  # noqa: E731
        kern(a, b, y)
        ref = a.float() @ b.float().t()  # the example's scales multiply to 1
        one = torch.ones((), device="cuda")

        def scaled():
            return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        err, err_t = rel_err(y, ref), rel_err(scaled(), ref)
        if m != 8192:
            return None, None, err, err_t, None
        ms, tt = bench(lambda: kern(a, b, y)), bench(scaled)
        return ms, tt, err, err_t, paired(lambda: kern(a, b, y), scaled, ms, tt)

    fp8_runs = []
    if "fp8" in sections:
        fp8_runs.append(((8192, 8192, 8192), FP8_CONFIGS))
    if "ragged" in sections:
        fp8_runs.append(((1000, 528, 400), FP8_CONFIGS[:1]))
    for (m, n, k), cfgs in fp8_runs:
        for cfg in map(fp8_cfg, cfgs):
            if time.perf_counter() - t_start > args.budget:
                notes.append(f"fp8 {m} {cfg}: skipped (budget)")
                continue
            try:
                ms, tt, err, err_t, extra = fp8_case(m, n, k, cfg)
                if ms is None:
                    notes.append(f"ragged fp8 {m}x{n}x{k}: err {err:.2e} (scaled_mm {err_t:.2e})")
                else:
                    record(f"gemm fp8 e4m3 {m}^3 (_scaled_mm err {err_t:.1e})", cfg, ms, tt, err,
                           2.0 * m * n * k, extra=extra)
            except Exception as e:
                notes.append(f"fp8 {m} {cfg}: FAILED {type(e).__name__}: {str(e)[:300]}")
                traceback.print_exc()
    if "host" in sections:
        try:
            notes.append(host_case(torch, arch))
        except Exception as e:
            notes.append(f"host: FAILED {type(e).__name__}: {str(e)[:300]}")
            traceback.print_exc()
    print("\n".join(notes))
    print("\n| case | config | ms | TFLOP/s | torch TFLOP/s | GB/s (torch) | ratio | interleaved ratio "
          "| MHz / W (torch) |\n" + "|---" * 9 + "|")
    for r in rows:
        bw = f"{r['gbs']:.0f} ({r['torch_gbs']:.0f})" if "gbs" in r else ""
        pr = f"{r['paired_ratio']:.3f}" if r.get("paired_ratio") else ""
        clk = (f"{r['mhz']:.0f} / {r['watts']:.0f} ({r['torch_mhz']:.0f} / {r['torch_watts']:.0f})"
               if r.get("mhz") and r.get("torch_mhz") else "")
        print(f"| {r['case']} | {_cfg_str(r['cfg'])} | {r['ms']:.4f} | {r['tflops']:.0f} | "
              f"{r['torch_tflops']:.0f} | {bw} | {r['ratio']:.3f} | {pr} | {clk} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(rows=rows, notes=notes), f, indent=1)
    print(f"total {time.perf_counter() - t_start:.0f}s")


if __name__ == "__main__":
    main()
