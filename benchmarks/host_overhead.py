"""Host-side costs of tilecore: compile (cold and from the compile cache in a new process), a
kernel call against torch.add, and target discovery, on `--target cpu` (any machine) or `cuda`
(default: cuda when it is runnable here). `--cases rmsnorm,quickstart,gemm,call`; `--first`
(gemm cold in the machine's first compiling process, see benchmarks/host_gpu.sh).

Every compile figure is measured in a fresh Python process (`--child`), so nothing is warm but
what the case says: "cold" uses an empty $TILECORE_CACHE_DIR (and NUMBA_CACHE_DIR) and has to
lower and build; "hit" is a second process on that same directory, where `tilecore.jit` finds
the kernel in the compile cache. The jit times exclude `import tilecore` and, on cuda, torch's
import and CUDA context creation (a user's script has made tensors before it compiles); both
are reported separately. Cases:

- `gemm 4096^3 jit`: examples/gemm.py at M = N = K = 4096 (fp16), jit only;
- `rmsnorm 64x128 jit+call`: examples/rmsnorm.py, jit plus the first call (issue 15's cpu line);
- `quickstart jit+call`: the README's 256x256x128 GEMM from empty caches (issue 16 item 17);
- `Kernel.__call__`: host microseconds per call of examples/elementwise_add.py on 1024
  elements against `torch.add` on the same tensors (cuda: launches only, no synchronization in
  the loop; cpu: the call including the tiny kernel's run);
- `targets()`: `import tilecore` + `tilecore.plugins.targets(runnable_only=True)` in a fresh
  process, and whether that imported torch or initialised CUDA.
The markdown table is printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLES = os.path.join(ROOT, "examples")


# ----------------------------------------------------------------------------- child cases
def _child(case: str, target: str) -> dict:
    """Run one case in this (fresh) process; returns its timings in seconds."""
    t0 = time.perf_counter()
    import numpy as np

    sys.path.insert(0, EXAMPLES)
    import tilecore

    t_import = time.perf_counter() - t0
    out: dict = {"import_tilecore_s": t_import}
    torch = None
    if target == "cuda":
        t = time.perf_counter()
        import torch

        torch.empty(1, device="cuda")  # the CUDA context, as a script that made tensors has
        torch.cuda.synchronize()
        out["torch_cuda_init_s"] = time.perf_counter() - t
    if case == "gemm":
        import gemm

        func = gemm.program(M=4096, N=4096, K=4096)
        t = time.perf_counter()
        tilecore.plugins.target_infos()  # backend discovery (entry points): once per process
        out["discovery_s"] = time.perf_counter() - t
        parts = os.environ.get("HOST_OVERHEAD_PARTS", "")
        prof = _profiler() if parts == "profile" else None
        phases = None
        if parts.startswith("phases"):
            import host_phases

            phases = host_phases.install(target)
            if parts == "phases-prewarm":  # the same cold jit with the (opt-in) NVRTC reader thread
                os.environ["TILECORE_CUDA_PREWARM"] = "1"
        t = time.perf_counter()
        k = tilecore.jit(func, out_idx=[-1], target=target)
        out["jit_s"] = time.perf_counter() - t
        if prof is not None:
            out["profile"] = _profile_text(prof)
        if phases is not None:
            out["phases"] = dict(phases)
        if "tilecore_cuda.prewarm" in sys.modules:
            out["prewarm"] = sys.modules["tilecore_cuda.prewarm"].report()
        t = time.perf_counter()
        tilecore.jit(func, out_idx=[-1], target=target)
        out["jit_again_s"] = time.perf_counter() - t  # the in-memory layer
        out["jit_with_frontend_s"] = out["jit_s"]
        t = time.perf_counter()
        gemm.program(M=4096, N=4096, K=4096)
        out["frontend_s"] = time.perf_counter() - t
        out["jit_with_frontend_s"] += out["frontend_s"]
        out["compile_cache"] = tilecore.compile_cache.stats()
        out["bytecode_cache"] = _tilecore_bytecode()
        if os.environ.get("HOST_OVERHEAD_PARTS") == "cold":
            out.update(_cold_parts(func, target, k))
        elif torch is not None:
            # what a user waits for next: the first call (cubin load, driver, the GEMM itself)
            a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
            b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
            torch.cuda.synchronize()
            t = time.perf_counter()
            k(a, b)
            torch.cuda.synchronize()
            out["first_call_s"] = time.perf_counter() - t
        del k
    elif case in ("rmsnorm", "quickstart"):
        tilecore.jit  # noqa: B018 - the compiler module (tilecore's imports are lazy) is not timed
        c0 = time.process_time()
        if case == "rmsnorm":
            import rmsnorm

            t = time.perf_counter()
            k = tilecore.jit(rmsnorm.program(M=64, N=128), out_idx=[-1], target=target)
            args = rmsnorm.make_inputs(np.random.default_rng(0), M=64, N=128)
        else:
            t = time.perf_counter()
            k = tilecore.jit(_quickstart(256, 256, 128), out_idx=[-1], target=target)
            rng = np.random.default_rng(0)
            args = [rng.standard_normal((256, 128)).astype(np.float16),
                    rng.standard_normal((128, 256)).astype(np.float16)]
        out["jit_s"] = time.perf_counter() - t
        if torch is not None:
            args = [torch.from_numpy(a).cuda() for a in args]
        t1 = time.perf_counter()
        y = k(*args)
        if torch is not None:
            torch.cuda.synchronize()
        out["first_call_s"] = time.perf_counter() - t1
        out["jit_call_s"] = out["jit_s"] + out["first_call_s"]
        out["jit_call_cpu_s"] = time.process_time() - c0  # CPU seconds: robust on a loaded machine
        out["scipy_linalg_imported"] = "scipy.linalg" in sys.modules  # (tilecore_cpu.blas)
        del y
    elif case == "call":
        out.update(_call_overhead(target))
    elif case == "targets":
        pass  # measured by the parent around a bare interpreter
    return out


def _tilecore_bytecode() -> bool:
    """Whether tilecore's compiler came from a .pyc beside its source (as pip installs it)."""
    import importlib.util

    mod = sys.modules.get("tilecore.compiler")
    path = getattr(mod, "__file__", None)
    return bool(path) and os.path.exists(importlib.util.cache_from_source(path))


def _profiler():
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    return prof


def _profile_text(prof, n: int = 35) -> str:
    """The top `n` functions of a (stopped here) profile by cumulative time ($HOST_PROFILE_SORT:
    another pstats key, e.g. tottime)."""
    import io
    import pstats

    prof.disable()
    text = io.StringIO()
    key = os.environ.get("HOST_PROFILE_SORT", "cumulative")
    pstats.Stats(prof, stream=text).sort_stats(key).print_stats(n)
    return text.getvalue()


def _cold_parts(func, target: str, kernel) -> dict:
    """Where a cold jit's time goes, measured after it in the same process: the description and
    pipeline, the rendering and the CUDA compiler, each rerun alone and uncached (imports are
    then warm: the rest of the cold jit is imports, the cubin cache and the entry's write)."""
    from tilecore import compiler, plugins
    from tilecore.options import options_from_pass_configs

    out: dict = {}
    t0 = time.perf_counter()
    tgt = plugins.resolve(target)
    opts = options_from_pass_configs(None)
    desc = plugins.describe(tgt, func, opts)
    stages = compiler._stages(func, tgt, opts, desc)
    t1 = time.perf_counter()
    out["part_describe_pipeline_s"] = t1 - t0
    if target.startswith("cuda"):  # the cpu target's build is numba's compile: not broken down here
        from tilecore_cuda import build
        from tilecore_cuda.render import render_cuda

        render_cuda(stages[-1][1], tgt)
        out["part_render_s"] = time.perf_counter() - t1
        art = kernel.artifact
        t = time.perf_counter()
        build.compile_cuda(art.source, art.arch, name=art.rendered.entry, use_cache=False)
        out["part_cuda_compiler_s"] = time.perf_counter() - t
        out["cuda_compiler"] = build.default_compiler()
    return out


def _quickstart(M, N, K, block_M=64, block_N=64, block_K=32, dtype="float16"):
    """The README's quickstart GEMM, verbatim."""
    import tilecore.language as T

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


def _call_overhead(target: str, n: int = 1024, reps: int = 2000) -> dict:
    """Host microseconds per Kernel.__call__ and per torch.add on the same tensors."""
    import elementwise_add
    import torch

    import tilecore

    k = tilecore.jit(elementwise_add.program(), out_idx=[-1], target=target)
    dev = "cuda" if target == "cuda" else "cpu"
    a = torch.randn(n, device=dev)
    b = torch.randn(n, device=dev)
    assert torch.equal(k(a, b), a + b)

    def per_call(fn) -> float:
        for _ in range(50):
            fn(a, b)
        if dev == "cuda":
            torch.cuda.synchronize()
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(reps):
                fn(a, b)
            best = min(best, (time.perf_counter() - t) / reps)
            if dev == "cuda":
                torch.cuda.synchronize()
        return best * 1e6

    res = {"kernel_call_us": per_call(k), "torch_add_us": per_call(torch.add)}
    # where a call's host time goes: the signature, the allocation, the prepared launch
    from tilecore.kernel import _signature

    plan = k._plans[_signature((a, b))]
    launch_fn = plan.__closure__ and next((c.cell_contents for c in plan.__closure__
                                           if hasattr(c.cell_contents, "prepared")
                                           or type(c.cell_contents).__name__ == "Launch"), None)
    out_t = torch.empty_like(a)
    res["signature_us"] = per_call(lambda x, y: _signature((x, y)))
    res["empty_like_us"] = per_call(lambda x, y: torch.empty_like(x))
    if launch_fn is not None:
        res["launch_us"] = per_call(lambda x, y: launch_fn([x, y, out_t]))
    return res


# ----------------------------------------------------------------------------- parent


def _run_child(case: str, target: str, cache_dir: str, parts: str = "") -> dict:
    env = dict(os.environ, TILECORE_CACHE_DIR=cache_dir, NUMBA_CACHE_DIR=os.path.join(cache_dir, "numba"))
    if parts:
        env["HOST_OVERHEAD_PARTS"] = parts
    cmd = [sys.executable, os.path.abspath(__file__), "--child", case, "--target", target]
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"]}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["process_wall_s"] = wall
    return res


def _targets_time() -> dict:
    code = ("import time, sys; t = time.perf_counter(); import tilecore; "
            "ts = tilecore.plugins.targets(runnable_only=True); d = time.perf_counter() - t; "
            "import json; print(json.dumps({'targets_s': d, 'targets': ts, "
            "'torch_imported': 'torch' in sys.modules, "
            "'cuda_bindings_imported': 'cuda.bindings.driver' in sys.modules}))")
    best = None
    for _ in range(3):
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        r["process_wall_s"] = wall
        if best is None or r["targets_s"] < best["targets_s"]:
            best = r
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tilecore", "targets"], capture_output=True, check=True)
    best["cli_wall_s"] = time.perf_counter() - t
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=None, help="cpu, cuda, or cuda:<arch> (compile only, no GPU: "
                                                   "the gemm case offline)")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--quick", action="store_true", help="skip the 4096^3 GEMM cold compile")
    ap.add_argument("--cases", default="rmsnorm,quickstart,gemm,call",
                    help="comma-separated subset of rmsnorm, quickstart, gemm, call")
    ap.add_argument("--parts", action="store_true",
                    help="also break the gemm jit down: a profile of a hit, the cold phases")
    ap.add_argument("--bytecode-cache", action="store_true",
                    help="byte-compile tilecore first (as pip install does; removed afterwards)")
    ap.add_argument("--first", action="store_true",
                    help="gemm: the cold compile first of all (this machine's first process to "
                         "compile), then hits, then a later cold process; cold phases timed")
    ap.add_argument("--cache-dir", help="gemm: use (and keep) this compile-cache directory; when it "
                                        "holds the kernel already, only hits are measured")
    ap.add_argument("--hits", type=int, default=2, choices=(0, 1, 2), help="gemm hit processes (--first)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.target not in (None, "cpu", "cuda") and not args.target.startswith("cuda:"):
        ap.error(f"--target {args.target}: expected cpu, cuda or cuda:<arch>")
    if args.child:
        print(json.dumps(_child(args.child, args.target)))
        return
    made: list[str] = []
    if args.bytecode_cache:
        made = _byte_compile()
    try:
        _main(args, made)
    finally:
        for d in made:  # the tree as it was: a later run without the flag compiles source again
            shutil.rmtree(d, ignore_errors=True)


def _byte_compile() -> list[str]:
    """Write .pyc files beside tilecore's, the backends' and the examples' sources, as a
    non-editable `pip install` does at install time (compileall writes them even under
    PYTHONDONTWRITEBYTECODE=1, which only stops the interpreter writing them on import; the
    children, run with the environment unchanged, read them). Returns the __pycache__
    directories it created, removed again at the end."""
    dirs = [os.path.join(ROOT, "tilecore"), EXAMPLES, os.path.join(ROOT, "backends")]
    before = set(_pycache_dirs(dirs))
    subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], check=False, capture_output=True)
    return sorted(set(_pycache_dirs(dirs)) - before)


def _pycache_dirs(dirs: list[str]) -> list[str]:
    return [os.path.join(r, "__pycache__") for d in dirs for r, sub, _ in os.walk(d) if "__pycache__" in sub]


def _main(args, made: list[str]) -> None:
    target = args.target
    if target is None:
        import tilecore

        target = "cuda" if "cuda" in tilecore.plugins.targets(runnable_only=True) else "cpu"
    results: dict = {"target": target, "python": sys.version.split()[0],
                     "bytecode_cache": bool(made) or not sys.dont_write_bytecode}
    cases = [c for c in args.cases.split(",") if c in ("rmsnorm", "quickstart", "gemm")]
    if args.quick and "gemm" in cases:
        cases.remove("gemm")
    if "gemm" in cases and (args.first or args.cache_dir):
        cases.remove("gemm")
        _gemm_first(results, target, args)  # before anything else compiles on this machine
    results["targets"] = _targets_time()
    for case in cases:
        with tempfile.TemporaryDirectory(prefix="tilecore_host_") as d:
            results[f"{case}_cold"] = _run_child(case, target, d)
            results[f"{case}_hit"] = _run_child(case, target, d)
            results[f"{case}_hit2"] = _run_child(case, target, d)
            if args.parts and case == "gemm":  # breakdowns, in extra processes
                results[f"{case}_profile"] = _run_child(case, target, d, "profile")
                with tempfile.TemporaryDirectory(prefix="tilecore_host_") as d2:
                    results[f"{case}_cold_parts"] = _run_child(case, target, d2, "cold")
    if "call" in args.cases.split(","):
        with tempfile.TemporaryDirectory(prefix="tilecore_host_") as d:
            _run_child("call", target, d)  # builds the kernel
            results["call"] = _run_child("call", target, d)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    print(table(results))


def _gemm_first(results: dict, target: str, args) -> None:
    """The gemm case for issue 15's cold-compile bullet: with `--first` the cold process runs
    before any other (the machine's first NVRTC use), phases timed, then two hits, then a later
    cold process on another empty directory (phases timed; with HOST_NO_PREWARM_TOO=1 once more
    with the opt-in NVRTC reader thread, TILECORE_CUDA_PREWARM=1, the other setting since
    session 7; the name is kept for the commands in BENCHMARKS.md). With `--cache-dir` holding
    the kernel: the hits alone."""
    d = args.cache_dir or tempfile.mkdtemp(prefix="tilecore_host_")
    os.makedirs(d, exist_ok=True)
    warm = bool(args.cache_dir) and any(os.scandir(d))
    if not warm:
        results["gemm_cold"] = _run_child("gemm", target, d, "phases" if args.first else "")
    for w in ("hit", "hit2")[:args.hits]:
        results[f"gemm_{w}"] = _run_child("gemm", target, d)
    if args.first:
        later = [("gemm_cold_later", "phases")]
        if os.environ.get("HOST_NO_PREWARM_TOO") == "1":
            later.append(("gemm_cold_later_prewarm", "phases-prewarm"))
        for key, parts in later:
            with tempfile.TemporaryDirectory(prefix="tilecore_host_") as d2:
                results[key] = _run_child("gemm", target, d2, parts)
    if not args.cache_dir:
        shutil.rmtree(d, ignore_errors=True)


def _fmt(v, unit="s") -> str:
    if not isinstance(v, (int, float)):
        return "n/a"
    return f"{v * 1e3:.0f} ms" if unit == "s" else f"{v:.1f} us"


def _best(results, case, key):
    vals = [results.get(f"{case}_{w}", {}).get(key) for w in ("hit", "hit2")]
    vals = [v for v in vals if isinstance(v, (int, float))]
    return min(vals) if vals else None


def _cold_rows(r: dict, t: str) -> list[str]:
    """`--first`: the cold processes' jit, phases and NVRTC reader thread."""
    rows = []
    for key, label in (("gemm_cold", "first process"), ("gemm_cold_later", "later process"),
                       ("gemm_cold_later_prewarm", "later process, with the NVRTC reader thread")):
        c = r.get(key)
        if not c or "phases" not in c:
            continue
        ph = ", ".join(f"{k} {_fmt(v)}" for k, v in c["phases"].items())
        pw = c.get("prewarm") or {}
        reader = (f"; reader thread: {pw.get('bytes', 0) / 1e6:.0f} MB in {_fmt(pw.get('read'))}, "
                  f"NVRTC loaded at {_fmt(pw.get('loaded'))}" if pw else "")
        rows.append(f"| gemm 4096^3 jit ({t}) | cold, {label} | {_fmt(c.get('jit_s'))} ({ph}{reader}) |")
    return rows


def table(r: dict) -> str:
    """The results as a markdown table."""
    t = r["target"]
    rows = ["| case | figure | value |", "|---|---|---|"]
    tg = r["targets"]
    rows.append(f"| targets() | import tilecore + targets(runnable_only=True), fresh process | "
                f"{_fmt(tg['targets_s'])} (torch imported: {tg['torch_imported']}, cuda-bindings "
                f"driver imported: {tg['cuda_bindings_imported']}; `python -m tilecore targets` "
                f"{_fmt(tg['cli_wall_s'])} wall) |")
    for case, key, label in (("rmsnorm", "jit_call_s", "rmsnorm 64x128 jit + first call"),
                             ("quickstart", "jit_call_s", "quickstart 256x256x128 jit + first call"),
                             ("gemm", "jit_s", "gemm 4096^3 jit")):
        if f"{case}_cold" not in r and f"{case}_hit" not in r:
            continue
        cold = r.get(f"{case}_cold", {})  # none: --cache-dir with the kernel in it
        for w in ("cold", "hit", "hit2"):
            if "error" in r.get(f"{case}_{w}", {}):
                rows.append(f"| {label} ({t}) | {w}: error | {r[f'{case}_{w}']['error']} |")
        cpu = ""
        if "jit_call_cpu_s" in cold:
            cpu = f" ({_fmt(cold['jit_call_cpu_s'])} CPU)"
        if cold:
            rows.append(f"| {label} ({t}) | cold (empty caches) | {_fmt(cold.get(key))}{cpu} |")
        cpu = f" ({_fmt(_best(r, case, 'jit_call_cpu_s'))} CPU)" if "jit_call_cpu_s" in cold else ""
        rows.append(f"| {label} ({t}) | compile-cache hit, new process | {_fmt(_best(r, case, key))}{cpu} |")
        if case == "gemm":
            disc = _best(r, case, "discovery_s")
            again = _best(r, case, "jit_again_s")
            rows.append(f"| {label} ({t}) | backend discovery before the first jit (entry points) | "
                        f"{_fmt(disc)} |")
            rows.append(f"| {label} ({t}) | second jit in the process (in-memory layer) | {_fmt(again)} |")
            hits = [r.get(f"{case}_hit{w}", {}) for w in ("", "2")]
            sums = [h["discovery_s"] + h["jit_s"] for h in hits if "jit_s" in h and "discovery_s" in h]
            first = _best(r, case, "first_call_s")
            rows.append(f"| {label} ({t}) | hit: discovery + jit; then the first call (cubin load + "
                        f"the GEMM, synchronized) | {_fmt(min(sums) if sums else None)}; {_fmt(first)} |")
            hit = r.get(f"{case}_hit", {})
            rows.append(f"| {label} ({t}) | hit: frontend (the factory call, not in the jit) | "
                        f"{_fmt(hit.get('frontend_s'))}; compile cache {hit.get('compile_cache')}, "
                        f"bytecode cache {hit.get('bytecode_cache')} |")
            cp = r.get(f"{case}_cold_parts", {})
            if "part_describe_pipeline_s" in cp:
                compiler = cp.get("cuda_compiler", "compiler")
                rows.append(f"| {label} ({t}) | cold parts (rerun warm): describe + pipeline | "
                            f"{_fmt(cp['part_describe_pipeline_s'])}, render {_fmt(cp.get('part_render_s'))}"
                            f", {compiler} {_fmt(cp.get('part_cuda_compiler_s'))} |")
    call = r.get("call", {})
    if "kernel_call_us" in call:
        rows.append(f"| Kernel.__call__ ({t}, 1024 fp32 add) | host time per call | "
                    f"{_fmt(call['kernel_call_us'], 'us')} (torch.add {_fmt(call['torch_add_us'], 'us')}) |")
        keys = ("signature_us", "empty_like_us", "launch_us")
        parts = ", ".join(f"{k[:-3]} {_fmt(call[k], 'us')}" for k in keys if k in call)
        rows.append(f"| Kernel.__call__ ({t}) | parts | {parts} |")
    elif call:
        rows.append(f"| Kernel.__call__ ({t}) | error | {call.get('error')} |")
    rows += _cold_rows(r, t)
    imp = r.get("rmsnorm_hit", {}).get("import_tilecore_s")
    rows.append(f"| import tilecore | fresh process | {_fmt(imp)} |")
    prof = r.get("gemm_profile", {}).get("profile")
    if prof:
        rows.append("\nProfile of a gemm jit from the disk cache (cProfile, cumulative):\n" + prof)
    return "\n".join(rows)


if __name__ == "__main__":
    main()
