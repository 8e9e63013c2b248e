"""tilecore on the GPU beside its strongest peers, in one process: GEMM, attention, row kernels.

Run on a CUDA machine (the lent H200):  python benchmarks/gpu.py [--out results.json] [--quick]
    [--arch sm_80] [--fragment-ab]   (GPU_GEMM_CONFIGS='[{...}, ...]' replaces GEMM_CONFIGS;
    GPU_FA_CONFIGS / GPU_ROW_CONFIGS likewise; --cases gemm,attention,softmax,rmsnorm,layernorm
    picks cases, --gemm-cases float16:4096,bfloat16:8192 the GEMM shapes, --top-k how many
    of the first GEMM case's fastest configs run on the others)

Cases, back to back in this one process:
- GEMM fp16 and bf16 at 4096^3 and 8192^3 against torch.matmul (cuBLAS), TFLOP/s; every tile
  configuration in GEMM_CONFIGS on the first case, the fastest TOP_K of them on the others;
- FlashAttention forward b8 h16 s2048 d128, causal and not, against torch SDPA with the cuDNN
  backend forced (flash when cuDNN is not available; the table says which), TFLOP/s;
- softmax, RMSNorm and LayerNorm on 16384 x 8192 fp16 against eager torch and torch.compile,
  GB/s (bytes of every input read once plus every output written once) and the fraction of
  the device-to-device copy bandwidth measured in this run on a tensor of the same size.
Every kernel (tilecore's, eager torch's and torch.compile's) is checked against a float32
torch reference (relative error in the 2-norm) on fresh random inputs, with tilecore's output
poisoned with NaN first, before it is timed. Times are `triton.testing.do_bench` medians; the
run records whether that do_bench flushes L2 before each repetition (triton 3.x zeroes a
256 MB buffer: `runtime.driver.active.clear_cache`). Outputs are preallocated (kernels built
without out_idx), so no allocation is timed. A case that fails to build or check is reported
and the others still run. tilecore kernels are compiled ahead in a process pool (the cubins
land in the on-disk cache) while torch.compile warms up, so the serial part is lowering only.
The last thing printed is the markdown table; --out writes everything as JSON.
"""

from __future__ import annotations

import argparse
import inspect
import json
import multiprocessing as mp
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import elementwise_add  # noqa: E402
import flash_attention  # noqa: E402
import gemm  # noqa: E402
import layernorm  # noqa: E402
import rmsnorm  # noqa: E402
import softmax  # noqa: E402

import tilecore  # noqa: E402

EXAMPLES = dict(gemm=gemm, flash_attention=flash_attention, softmax=softmax, rmsnorm=rmsnorm,
                layernorm=layernorm, elementwise_add=elementwise_add)

# GEMM tile configurations: all are tried on the first GEMM case, the TOP_K fastest on the rest.
GEMM_CONFIGS = [dict(block_M=128, block_N=128, block_K=32, num_stages=3, threads=128),
                dict(block_M=128, block_N=128, block_K=64, num_stages=2, threads=128),
                dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128),
                dict(block_M=128, block_N=128, block_K=64, num_stages=4, threads=128),
                dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256),
                dict(block_M=128, block_N=256, block_K=32, num_stages=3, threads=256),
                dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256),
                # what the line above compiled to on sm_80 before the stage budget counted the
                # epilogue tile's reuse of the stages (two stages, cp.async.wait_group 0)
                dict(block_M=128, block_N=256, block_K=64, num_stages=2, threads=256),
                # the fastest on sm_90a (wgmma, one group in flight, copies 2 tiles ahead)
                dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256),
                dict(block_M=256, block_N=128, block_K=64, num_stages=3, threads=256),
                # the same with blocks rasterized in panels of 8 grid rows (T.use_swizzle)
                dict(block_M=128, block_N=128, block_K=64, num_stages=2, threads=128, panel=8),
                dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128, panel=8),
                dict(block_M=256, block_N=128, block_K=64, num_stages=3, threads=256, panel=8),
                dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, panel=8)]
FA_CONFIGS = [dict(block_M=64, block_N=64, num_stages=1, threads=128),
              dict(block_M=128, block_N=64, num_stages=1, threads=256),
              dict(block_M=128, block_N=64, num_stages=2, threads=256),
              dict(block_M=128, block_N=64, num_stages=3, threads=256),
              # four warps of 32 query rows each (FlashAttention-2's sm_80 shape for d = 128):
              # each warp's K and V reads from shared memory serve twice the rows (253
              # registers under nvcc for sm_80, no spills; block_N = 64 spills)
              dict(block_M=128, block_N=32, num_stages=2, threads=128),
              # 64 keys per tile: half the per-tile rescale and row statistics per key; fits in
              # 255 registers once the row sum precedes the P V gemm (TileLang's order) and each
              # V load is issued just before its mmas (tilecore/lower/gemm.py)
              dict(block_M=128, block_N=64, num_stages=2, threads=128),
              # the same two with exp2.approx / __fdividef (FlashAttention-2 builds with
              # --use_fast_math; exp2.approx's relative error, 2^-22 in the PTX ISA, is far
              # below the fp16 output's rounding): on the mma.sync path IEEE exp2f's subnormal
              # handling costs 36 FSETP + 72 FMUL per 128x32 tile (BENCHMARKS.md, issue 9)
              dict(block_M=128, block_N=32, num_stages=2, threads=128,
                   pass_configs={"tl.enable_fast_math": True}),
              dict(block_M=128, block_N=64, num_stages=2, threads=128,
                   pass_configs={"tl.enable_fast_math": True})]
ROW_CONFIGS = [dict(block_M=1, threads=256), dict(block_M=1, threads=512), dict(block_M=1, threads=128),
               dict(block_M=1, threads=1024), dict(block_M=2, threads=512)]
TOP_K = 3
PRECOMPILE_TIMEOUT_S = 90
GEMM_SIZES = (4096, 8192)
ROWS = (16384, 8192)
ATTN = dict(batch=8, heads=16, seq_len=2048, dim=128)


def bench(fn) -> float:
    """Median milliseconds of `fn` over ~100 ms of repetitions (do_bench flushes L2 before each)."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))


def do_bench_flushes() -> str:
    """How this triton's do_bench clears L2 between repetitions, read off its source."""
    from triton.testing import do_bench

    src = inspect.getsource(do_bench)
    if "clear_cache" in src or "cache.zero_()" in src:
        return "yes (a 256 MB buffer is zeroed before each repetition)"
    return "NO: this triton's do_bench does not flush L2; figures may be cache-warm"


def bench_read_flushed(torch, fn, reps: int = 40) -> float:
    """Median ms of `fn` with L2 flushed by *reading* 256 MB before each run (do_bench zeroes its
    flush buffer, which leaves L2 full of dirty lines that a bandwidth-bound kernel writes back)."""
    flush = torch.empty(128 << 20, dtype=torch.float16, device="cuda").fill_(1)
    ev = [tuple(torch.cuda.Event(enable_timing=True) for _ in range(2)) for _ in range(reps)]
    for _ in range(5):
        fn()
    for s, e in ev:
        flush.sum()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return sorted(s.elapsed_time(e) for s, e in ev)[reps // 2]


# row kernels: the best tilecore config and torch.compile are timed again, alternately, this
# many times (the spread says what "faster" means in this run)
ROW_REPEATS = 3


def rel_err(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64 (inf when out is not finite)."""
    o, r = out.double(), ref.double()
    if not bool(o.isfinite().all()):
        return float("inf")
    return float((o - r).norm() / r.norm().clamp_min(1e-30))


def checked(run, ref, tol: float) -> float:
    """Run once, return the relative error; raise when it exceeds `tol`."""
    err = rel_err(run(), ref)
    if err > tol:
        raise AssertionError(f"relative error {err:.3e} > {tol:.0e}")
    return err


# --------------------------------------------------------------------------- building kernels


# --arch: lower for this arch instead of the device's (sm_80 on an H200: the mma.sync + cp.async
# path); the code is still compiled for the device. None: the device's arch.
LOWER_ARCH: str | None = None
# --fragment-ab: every GEMM config also runs with the fragment-pipeline pass off
FRAGMENT_OFF = {"tilecore.disable_fragment_pipeline": True}


def compile_example(name, params, arch, lower_arch=None):
    """tilecore.compile of an example config lowered for `lower_arch` (default `arch`); a
    "pass_configs" entry of `params` goes to the compiler, the rest to the example's program."""
    params = dict(params)
    pass_configs = params.pop("pass_configs", None)
    return tilecore.compile(EXAMPLES[name].program(**params), target=f"cuda:{lower_arch or arch}",
                            pass_configs=pass_configs)


def _precompile_one(job):
    """Pool worker: lower one example config and compile its cubin into the disk cache."""
    name, params, arch, lower_arch = job
    t0 = time.perf_counter()
    try:
        k = compile_example(name, params, arch, lower_arch)
        k.artifact.cubin(arch)
        return name, params, time.perf_counter() - t0, None
    except Exception as e:  # reported by the main process; it builds the kernel itself later
        return name, params, time.perf_counter() - t0, f"{type(e).__name__}: {str(e)[:200]}"


def submit_without_gpu(fn, jobs: list):
    """A spawned process pool running `fn(job)` for every job with no GPU visible (workers only
    compile: no CUDA contexts); returns (executor, futures). Shared by the GPU benchmarks."""
    from concurrent.futures import ProcessPoolExecutor

    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        workers = max(1, min(12, (os.cpu_count() or 2) - 2))
        ex = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"))
        # a spawning pool starts its workers inside submit(), so they all see the env above
        futures = [ex.submit(fn, job) for job in jobs]
    finally:
        if old is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old
    return ex, futures


def start_precompile(jobs, arch):
    """A spawned process pool compiling `jobs` ((example, params)) with no GPU visible; returns
    (executor, futures). A worker that dies breaks the pool (its futures raise) rather than
    hanging it, and the main process then builds those kernels itself."""
    return submit_without_gpu(_precompile_one, [(n, p, arch, LOWER_ARCH) for n, p in jobs])


def finish_precompile(ex, futures) -> list:
    """Wait for the pool (at most PRECOMPILE_TIMEOUT_S); [(example, params, seconds, error)]."""
    from concurrent.futures import wait

    wait(futures, timeout=PRECOMPILE_TIMEOUT_S)
    out = []
    for f in futures:
        try:
            out.append(f.result(timeout=0))
        except Exception as e:  # timed out or the pool broke: the main process builds it later
            out.append(("?", {}, 0.0, f"{type(e).__name__}: {e}"))
    ex.shutdown(wait=False, cancel_futures=True)
    return out


def build(name, params, arch):
    """tilecore.compile of an example config for the device arch (the cubin from the cache),
    lowered for --arch when given."""
    return compile_example(name, params, arch, LOWER_ARCH)


def sweep(make_run, configs, ref, tol, label):
    """Build, check and time each config; returns (sorted [(ms, cfg, err)], notes)."""
    timed, notes = [], []
    for cfg in configs:
        try:
            t0 = time.perf_counter()
            run = make_run(cfg)
            build_s = time.perf_counter() - t0
            run().fill_(float("nan"))
            err = checked(run, ref, tol)
            ms = bench(run)
            timed.append((ms, cfg, err))
            notes.append(f"{label} {cfg}: {ms:.3f} ms err {err:.2e} build {build_s:.1f}s")
        except Exception as e:  # report and try the next config
            notes.append(f"{label} {cfg}: FAILED {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            traceback.print_exc()
    timed.sort(key=lambda t: t[0])
    return timed, notes


# --------------------------------------------------------------------------- cases


def case_gemm(torch, n, dtype_name, configs, arch):
    """GEMM n^3 against torch.matmul (cuBLAS)."""
    dtype = getattr(torch, dtype_name)
    a, b = (torch.randn(n, n, device="cuda", dtype=dtype) for _ in range(2))
    ref = torch.matmul(a.float(), b.float())
    flops = 2.0 * n ** 3

    def make_run(cfg):
        k = build("gemm", dict(M=n, N=n, K=n, dtype=dtype_name, **cfg), arch)
        c = torch.empty(n, n, device="cuda", dtype=dtype)
        return lambda: (k(a, b, c), c)[1]

    timed, notes = sweep(make_run, configs, ref, 1e-2, "tilecore")
    t_torch = bench(lambda: torch.matmul(a, b))
    row = dict(kind="gemm", case=f"gemm {dtype_name} {n}^3", timed=timed, notes=notes,
               peer="torch.matmul", peer_ms=t_torch, peer_rate=flops / t_torch / 1e9,
               peer_err=rel_err(torch.matmul(a, b), ref), unit="TFLOP/s")
    if timed:
        ms, cfg, err = timed[0]
        row.update(ms=ms, rate=flops / ms / 1e9, ratio=t_torch / ms, err=err, config=cfg)
    return row


def sdpa_backend(torch, q, k, v, causal):
    """The SDPA backend to compare against: cuDNN when it runs here, else flash; (name, ctx)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    for name in ("CUDNN_ATTENTION", "FLASH_ATTENTION"):
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        try:
            with sdpa_kernel(backend):
                torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.synchronize()
            return name.lower(), lambda b=backend: sdpa_kernel(b)
        except Exception as e:  # not available for these inputs: try the next backend
            print(f"SDPA {name} unavailable: {type(e).__name__}: {str(e)[:120]}", flush=True)
    import contextlib

    return "default", contextlib.nullcontext


def case_attention(torch, causal, configs, arch):
    """FlashAttention forward against torch SDPA (cuDNN backend forced where available)."""
    B, H, S, D = ATTN["batch"], ATTN["heads"], ATTN["seq_len"], ATTN["dim"]
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.float16) for _ in range(3))
    # torch gets its preferred contiguous (B, H, S, D) layout; tilecore's kernel takes (B, S, H, D)
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(qt.float(), kt.float(), vt.float(),
                                                           is_causal=causal).transpose(1, 2)
    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)

    def make_run(cfg):
        kern = build("flash_attention", dict(ATTN, is_causal=causal, **cfg), arch)
        o = torch.empty_like(q)
        return lambda: (kern(q, k, v, o), o)[1]

    timed, notes = sweep(make_run, configs, ref, 2e-2, "tilecore")
    backend, ctx = sdpa_backend(torch, qt, kt, vt, causal)

    def sdpa():
        return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    with ctx():
        peer_err = rel_err(sdpa().transpose(1, 2), ref)
        t_torch = bench(sdpa)
    name = f"flash_attention fp16 b{B} h{H} s{S} d{D}{' causal' if causal else ''}"
    row = dict(kind="attention", case=name, timed=timed, notes=notes, peer=f"SDPA ({backend})",
               peer_ms=t_torch, peer_rate=flops / t_torch / 1e9, peer_err=peer_err, unit="TFLOP/s")
    if timed:
        ms, cfg, err = timed[0]
        row.update(ms=ms, rate=flops / ms / 1e9, ratio=t_torch / ms, err=err, config=cfg)
    return row


def row_problem(torch, name):
    """(inputs, float32 reference, eager torch function, bytes moved) for a row kernel."""
    M, N = ROWS
    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    xf = x.float()
    if name == "softmax":
        return (x,), torch.softmax(xf, -1), lambda x: torch.softmax(x, -1), 2 * M * N * 2
    w = torch.rand(N, device="cuda", dtype=torch.float16) + 0.5
    if name == "rmsnorm":
        ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
        return (x, w), ref, lambda x, w: torch.nn.functional.rms_norm(x, (N,), w, 1e-6), 2 * M * N * 2 + N * 2
    b = torch.rand(N, device="cuda", dtype=torch.float16) - 0.5
    ref = torch.nn.functional.layer_norm(xf, (N,), w.float(), b.float(), 1e-5)
    return ((x, w, b), ref, lambda x, w, b: torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5),
            2 * M * N * 2 + 2 * N * 2)


def case_rows(torch, name, problem, compiled, configs, copy_gbs, arch):
    """A row kernel against eager torch and torch.compile of the same function, GB/s."""
    M, N = ROWS
    args, ref, eager, nbytes = problem
    params = dict(M=M, N=N, eps=1e-5 if name == "layernorm" else 1e-6)
    if name == "softmax":
        del params["eps"]

    def make_run(cfg):
        k = build(name, dict(params, **cfg), arch)
        y = torch.empty_like(args[0])
        return lambda: (k(*args, y), y)[1]

    timed, notes = sweep(make_run, configs, ref, 1e-2, "tilecore")
    t_eager = bench(lambda: eager(*args))
    row = dict(kind="rows", case=f"{name} fp16 {M}x{N}", timed=timed, notes=notes, peer="torch",
               peer_ms=t_eager, peer_rate=nbytes / t_eager / 1e6, peer_err=rel_err(eager(*args), ref),
               unit="GB/s", copy_gbs=copy_gbs)
    if compiled is not None:
        try:
            err = rel_err(compiled(*args), ref)
            t_c = bench(lambda: compiled(*args))
            row.update(compile_ms=t_c, compile_rate=nbytes / t_c / 1e6, compile_err=err)
        except Exception as e:  # torch.compile broken here: the eager figures still stand
            notes.append(f"torch.compile: FAILED {type(e).__name__}: {str(e)[:200]}")
    if timed and "compile_ms" in row:
        run = make_run(timed[0][1])
        pairs = [(bench(run), bench(lambda: compiled(*args))) for _ in range(ROW_REPEATS)]
        flushed = (bench_read_flushed(torch, run), bench_read_flushed(torch, lambda: compiled(*args)))
        row.update(alternating=pairs, read_flushed=flushed)
        notes.append("alternating do_bench (tilecore / torch.compile ms): "
                     + ", ".join(f"{a:.4f}/{b:.4f}" for a, b in pairs)
                     + f"; L2 flushed by a read: {flushed[0]:.4f}/{flushed[1]:.4f} ms "
                     f"(ratio {flushed[1] / flushed[0]:.3f})")
    if timed:
        ms, cfg, err = timed[0]
        gbs = nbytes / ms / 1e6
        row.update(ms=ms, rate=gbs, ratio=t_eager / ms, err=err, config=cfg, of_copy=gbs / copy_gbs)
    row["peer_of_copy"] = row["peer_rate"] / copy_gbs
    if "compile_rate" in row:
        row["compile_of_copy"] = row["compile_rate"] / copy_gbs
        if "compile_ms" in row:
            row["ratio_compile"] = row["compile_ms"] / ms
    return row


def copy_bandwidth(torch) -> float:
    """Device-to-device copy of a 16384 x 8192 fp16 tensor, bytes read + written, GB/s."""
    x = torch.randn(*ROWS, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    ms = bench(lambda: y.copy_(x))
    return 2 * x.numel() * 2 / ms / 1e6


def launch_overhead_us(torch, arch) -> float:
    """Host time of one `Kernel.__call__` on a tiny problem (argument checks, launch), in us."""
    k = build("elementwise_add", {}, arch)
    a, b, c = (torch.randn(1024, device="cuda") for _ in range(3))
    for _ in range(10):
        k(a, b, c)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(1000):
        k(a, b, c)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


# --------------------------------------------------------------------------- report


def _cfg(c) -> str:
    """A tile configuration, short: GEMM 128x128x64 s3 t128, attention 128x64 s1 t256, rows;
    a config's pass_configs follow as the keys' last words (no-fragment-pipeline, ...)."""
    if "block_K" in c:
        panel = f" p{c['panel']}" if c.get("panel") else ""
        off = "".join(f" {k.split('.')[-1].replace('disable_', 'no-').replace('_', '-')}"
                      for k, v in (c.get("pass_configs") or {}).items() if v)
        return f"{c['block_M']}x{c['block_N']}x{c['block_K']} s{c['num_stages']} t{c['threads']}{panel}{off}"
    if "num_stages" in c:
        return f"{c['block_M']}x{c['block_N']} s{c['num_stages']} t{c['threads']}"
    hints = "".join(f" {k[0]}:{v or 'normal'}" for k, v in c.items() if k.endswith("_policy"))
    return f"{c['block_M']} row/block, t{c['threads']}{hints}"


def table(results) -> str:
    """The summary table (markdown): tilecore, its best config, the peers, ratios (>1: faster)."""
    lines = ["| case | tilecore | config | peer | tilecore/peer | torch.compile | tilecore/compile "
             "| % of copy BW | rel. err (tilecore / peer) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        u = r["unit"]
        peer = f"{r['peer']}: {r['peer_ms']:.3f} ms, {r['peer_rate']:.0f} {u}"
        comp = f"{r['compile_ms']:.3f} ms, {r['compile_rate']:.0f} {u}" if "compile_ms" in r else ""
        if "ms" not in r:
            why = r["notes"][-1][:80] if r["notes"] else ""
            lines.append(f"| {r['case']} | FAILED | {why} | {peer} | | {comp} | | | |")
            continue
        vs_comp = f"{r['ratio_compile']:.2f}x" if "ratio_compile" in r else ""
        of_copy = f"{r['of_copy']:.0%}" if "of_copy" in r else ""
        lines.append(f"| {r['case']} | {r['ms']:.3f} ms, {r['rate']:.0f} {u} | {_cfg(r['config'])} | {peer} "
                     f"| {r['ratio']:.2f}x | {comp} | {vs_comp} | {of_copy} "
                     f"| {r['err']:.1e} / {r['peer_err']:.1e} |")
    return "\n".join(lines)


ALL_CASES = ("gemm", "attention", "softmax", "rmsnorm", "layernorm")


def plan(quick: bool, cases=ALL_CASES, gemm_cases=None):
    """(gemm cases, every (example, params) the run may build) for precompiling; `cases` picks
    the kinds of case, `gemm_cases` the (n, dtype) GEMMs (default: both dtypes at GEMM_SIZES)."""
    if gemm_cases is None:
        sizes = GEMM_SIZES[:1] if quick else GEMM_SIZES
        gemm_cases = [(n, d) for d in ("float16", "bfloat16") for n in sizes]
    if "gemm" not in cases:
        gemm_cases = []
    jobs = [("elementwise_add", {})]
    for n, d in gemm_cases:
        jobs += [("gemm", dict(M=n, N=n, K=n, dtype=d, **c)) for c in GEMM_CONFIGS]
    if "attention" in cases:
        for causal in (False, True):
            jobs += [("flash_attention", dict(ATTN, is_causal=causal, **c)) for c in FA_CONFIGS]
    for name in ("softmax", "rmsnorm", "layernorm"):
        if name in cases:
            eps = {} if name == "softmax" else dict(eps=1e-5 if name == "layernorm" else 1e-6)
            jobs += [(name, dict(M=ROWS[0], N=ROWS[1], **eps, **c)) for c in ROW_CONFIGS]
    return gemm_cases, jobs


def main(argv=None) -> int:
    """Run every case; print the table last, optionally write JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--quick", action="store_true", help="two configs per case, 4096^3 GEMMs only")
    ap.add_argument("--no-precompile", action="store_true", help="build every kernel in this process")
    ap.add_argument("--arch", help="lower for this arch (e.g. sm_80: the mma.sync path on an H200); "
                                   "the code is compiled for the device")
    ap.add_argument("--fragment-ab", action="store_true",
                    help="also run every GEMM config with the fragment-pipeline pass off")
    ap.add_argument("--cases", default=",".join(ALL_CASES), help="comma list of " + ",".join(ALL_CASES))
    ap.add_argument("--gemm-cases", help="comma list of dtype:n GEMMs (default: float16 and bfloat16 at "
                                         "4096 and 8192)")
    ap.add_argument("--top-k", type=int, default=TOP_K,
                    help="the first GEMM case's fastest configs the other GEMM cases run")
    ns = ap.parse_args(argv)
    cases = tuple(c for c in ns.cases.split(",") if c)
    bad = [c for c in cases if c not in ALL_CASES]
    if bad:
        ap.error(f"unknown case(s) {bad}; pick from {ALL_CASES}")
    gemm_cases = None
    if ns.gemm_cases:
        gemm_cases = [(int(n), d) for d, n in (c.split(":") for c in ns.gemm_cases.split(","))]
    global LOWER_ARCH
    LOWER_ARCH = ns.arch
    import torch

    if not torch.cuda.is_available():
        print("benchmarks/gpu.py needs a CUDA device")
        return 2
    if ns.quick:
        del GEMM_CONFIGS[2:], FA_CONFIGS[2:], ROW_CONFIGS[2:]
    if os.environ.get("GPU_GEMM_CONFIGS"):  # a JSON list of GEMM tile configs replacing the above
        GEMM_CONFIGS[:] = json.loads(os.environ["GPU_GEMM_CONFIGS"])
    if os.environ.get("GPU_FA_CONFIGS"):
        FA_CONFIGS[:] = json.loads(os.environ["GPU_FA_CONFIGS"])
    if os.environ.get("GPU_ROW_CONFIGS"):
        ROW_CONFIGS[:] = json.loads(os.environ["GPU_ROW_CONFIGS"])
    if ns.fragment_ab:
        GEMM_CONFIGS[:] = [v for c in GEMM_CONFIGS for v in (c, dict(c, pass_configs=FRAGMENT_OFF))]
    t_start = time.perf_counter()
    torch.manual_seed(0)
    torch.cuda.init()
    from tilecore_cuda.launch import device_arch

    arch = device_arch(torch.cuda.current_device())
    print(f"device: {torch.cuda.get_device_name()} ({arch})  torch {torch.__version__}"
          f"  lowered for: {LOWER_ARCH or arch}", flush=True)
    gemm_cases, jobs = plan(ns.quick, cases, gemm_cases)
    pool = pending = None
    if not ns.no_precompile:
        pool, pending = start_precompile(jobs, arch)
    flush = do_bench_flushes()
    print(f"do_bench flushes L2: {flush}", flush=True)
    # torch.compile warms up (its own compile) while the pool compiles tilecore's kernels
    problems, compiled = {}, {}
    for name in ("softmax", "rmsnorm", "layernorm"):
        if name not in cases:
            continue
        problems[name] = row_problem(torch, name)
        try:
            compiled[name] = torch.compile(problems[name][2], dynamic=False)
            compiled[name](*problems[name][0])
        except Exception as e:  # reported in the table as a missing column
            print(f"torch.compile {name} FAILED: {type(e).__name__}: {str(e)[:200]}", flush=True)
            compiled[name] = None
    print(f"torch.compile warm-up done at {time.perf_counter() - t_start:.0f}s", flush=True)
    if pool is not None:
        pre = finish_precompile(pool, pending)
        bad = [f"{n} {p}: {e}" for n, p, _, e in pre if e]
        print(f"precompiled {len(pre)} kernels (slowest {max(s for *_, s, _ in pre):.1f}s), "
              f"{len(bad)} failed, at {time.perf_counter() - t_start:.0f}s", flush=True)
        for b in bad:
            print(f"  precompile FAILED {b}", flush=True)
    copy_gbs = copy_bandwidth(torch)
    print(f"copy bandwidth (read+write): {copy_gbs:.0f} GB/s", flush=True)
    overhead = launch_overhead_us(torch, arch)
    print(f"Kernel.__call__ host time, tiny kernel: {overhead:.1f} us per call", flush=True)
    results: list[dict] = []

    def save():
        if ns.out:
            with open(ns.out, "w") as f:
                json.dump(dict(device=torch.cuda.get_device_name(), arch=arch, lowered_for=LOWER_ARCH or arch,
                               torch=torch.__version__,
                               do_bench_flush=flush, copy_gbs=copy_gbs, call_overhead_us=overhead,
                               total_s=time.perf_counter() - t_start, results=results), f, indent=1,
                          default=str)

    def done(row):
        results.append(row)
        save()  # after every case, so a run killed by a timeout still leaves what it measured
        print(f"{row['case']}: {row.get('ms')} ms ({time.perf_counter() - t_start:.0f}s)", flush=True)

    configs = list(GEMM_CONFIGS)
    for i, (n, d) in enumerate(gemm_cases):
        done(case_gemm(torch, n, d, configs, arch))
        if i == 0 and results[-1]["timed"]:
            configs = [c for _, c, _ in results[-1]["timed"][:ns.top_k]]
    if "attention" in cases:
        for causal in (False, True):
            done(case_attention(torch, causal, FA_CONFIGS, arch))
    for name in problems:
        done(case_rows(torch, name, problems[name], compiled[name], ROW_CONFIGS, copy_gbs, arch))
    total = time.perf_counter() - t_start
    for r in results:
        for note in r["notes"]:
            print(f"  {r['case']}: {note}")
    save()
    print(f"\ntotal {total:.0f}s; copy bandwidth {copy_gbs:.0f} GB/s; do_bench L2 flush: {flush}\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
