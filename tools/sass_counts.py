"""Compile one example kernel with tilecore for a CUDA arch and count the SASS instructions that
show whether it is on the fast path (no GPU needed).

    python tools/sass_counts.py gemm M=4096 N=4096 K=4096 block_K=64 --arch sm_90a
    python tools/sass_counts.py softmax M=16384 N=8192 --sass softmax.sass --cu softmax.cu
    python tools/sass_counts.py flash_attention batch=8 heads=16 seq_len=2048 dim=128 --json

EXAMPLE is a module name in examples/ (or a path to one); each `key=value` is passed to its
`program(...)` (values read as Python literals, else kept as strings). The CUDA source comes
from `tilecore.compile(..., target="cuda:<arch>").get_kernel_source()`; it is compiled to a
cubin with nvcc (`-Xptxas -v`, whose register/spill report is printed), or taken from the
kernel's own build (`--compiler tilecore`: exactly the cubin the backend runs, NVRTC when it
loads, with the backend's options), and disassembled with
cuobjdump: $CUOBJDUMP, else the one on PATH or beside nvcc, else the triton wheel's.
The last line printed is `SASS <name>: OP=count ...`, the line tools/gpu_check.sh puts in its
summary; `--json` prints the counts as JSON instead.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Counted instruction classes: (label, opcode base, modifier the opcode must carry or None).
# LDGSTS = cp.async, LDSM = ldmatrix, HMMA = mma.sync, HGMMA = wgmma (QGMMA on fp8), LDL/STL =
# local memory (spills or register arrays indexed at run time), the 128-bit global accesses,
# and the slow paths seen before: IEEE division subroutine calls and block barriers. Hopper's asynchronous
# path: UTMALDG / UTMASTG = TMA load / store (cp.async.bulk.tensor), SYNCS = mbarrier
# operations (init, arrive with transaction count, phase-check try-wait), STSM = stmatrix.
# CS2R: mostly register-pair zeroing (`CS2R R, SRZ`: an accumulator clear), else clock reads.
COUNTED = (
    ("LDGSTS", "LDGSTS", None),
    ("LDSM", "LDSM", None),
    ("HMMA", "HMMA", None),
    ("HGMMA", "HGMMA", None),
    ("QGMMA", "QGMMA", None),  # wgmma on fp8
    ("UTMALDG", "UTMALDG", None),
    ("UTMASTG", "UTMASTG", None),
    ("SYNCS", "SYNCS", None),
    ("STSM", "STSM", None),
    ("LDG.E.128", "LDG", "128"),
    ("LDG.E.64", "LDG", "64"),
    ("LDG", "LDG", None),
    ("STG.E.128", "STG", "128"),
    ("STG.E.64", "STG", "64"),
    ("STG", "STG", None),
    ("LDS", "LDS", None),
    ("STS", "STS", None),
    ("LDL", "LDL", None),
    ("STL", "STL", None),
    ("BAR", "BAR", None),
    ("SHFL", "SHFL", None),
    ("CALL", "CALL", None),
    ("CS2R", "CS2R", None),
)

# Where a triton wheel of another environment may be (this project's CPU machine keeps one
# in a side virtualenv only for its cuobjdump).
WHEEL_GLOBS = ("/work/sass-venv/lib/python3*/site-packages/triton/backends/nvidia/bin/cuobjdump",)

_INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")


def count_sass(sass: str) -> dict[str, int]:
    """Instruction counts by the COUNTED classes, read off cuobjdump -sass text."""
    out = {label: 0 for label, _, _ in COUNTED}
    out["INSN"] = 0  # every instruction, for the size of the code
    for m in _INSN.finditer(sass):
        out["INSN"] += 1
        base, *mods = m.group(1).split(".")
        for label, want, mod in COUNTED:
            if base == want and (mod is None or mod in mods):
                out[label] += 1
    return out


def load_example(name: str):
    """The example module `name` (examples/<name>.py) or the file at path `name`."""
    path = Path(name)
    if not path.suffix:
        path = ROOT / "examples" / f"{name}.py"
    if not path.is_file():
        raise SystemExit(f"no example {name!r} (looked for {path})")
    sys.path.insert(0, str(path.parent))
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"sass_counts_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse_params(items: list[str]) -> dict:
    """`key=value` strings as keyword arguments (values as Python literals where they parse)."""
    out = {}
    for it in items:
        key, sep, val = it.partition("=")
        if not sep:
            raise SystemExit(f"expected key=value, got {it!r}")
        try:
            out[key] = ast.literal_eval(val)
        except (ValueError, SyntaxError):
            out[key] = val
    return out


def kernel_source(mod, params: dict, arch: str, pass_configs: dict | None = None):
    """(CUDA source, entry name, Kernel) of the example's program(**params) for cuda:<arch>,
    compiled with `pass_configs` (compile options, e.g. {"tilecore.programmatic_launch": True})."""
    import tilecore

    k = tilecore.compile(mod.program(**params), out_idx=getattr(mod, "OUT_IDX", None),
                         target=f"cuda:{arch}", pass_configs=pass_configs)
    src = k.get_kernel_source()
    m = re.search(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(', src)
    return src, m.group(1) if m else "kernel", k


def find_cuobjdump() -> str:
    """$CUOBJDUMP, cuobjdump on PATH or beside nvcc, else the copy shipped in the triton wheel."""
    from tilecore_cuda import build

    cands = [os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump")]
    nvcc = build.nvcc_path()
    if nvcc:
        cands.append(os.path.join(os.path.dirname(nvcc), "cuobjdump"))
    try:
        import triton

        cands.append(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump"))
    except Exception:  # no triton in this environment: look for a wheel elsewhere
        pass
    for pattern in WHEEL_GLOBS:
        cands += sorted(glob.glob(pattern))
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise SystemExit("cuobjdump not found: set $CUOBJDUMP, or install triton (its wheel ships one)")


def compile_cubin(kernel, src: str, entry: str, arch: str, compiler: str, tmp: str) -> tuple[bytes, str]:
    """(cubin, compiler report): nvcc with -Xptxas -v, or the kernel artifact's own cubin."""
    from tilecore_cuda import build

    if compiler == "tilecore":
        return kernel.artifact.cubin(arch), ""
    nvcc = build.nvcc_path()
    if nvcc is None:
        raise SystemExit("nvcc not found (set CUDA_HOME or put nvcc on PATH)")
    cu, cubin = os.path.join(tmp, f"{entry}.cu"), os.path.join(tmp, f"{entry}.cubin")
    Path(cu).write_text(src)
    cmd = [nvcc, "-cubin", build.gencode(arch), f"-std={build.STD}", "-Xptxas", "-v", "-o", cubin, cu]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"nvcc failed:\n{proc.stderr}{proc.stdout}")
    return Path(cubin).read_bytes(), (proc.stderr + proc.stdout).strip()


def resources(cuobjdump: str, cubin_path: str) -> dict[str, int]:
    """Registers, stack, local and shared bytes per thread/block from `cuobjdump -res-usage`."""
    out = subprocess.run([cuobjdump, "-res-usage", cubin_path], capture_output=True, text=True,
                         check=False).stdout
    res = {}
    for key in ("REG", "STACK", "SHARED", "LOCAL"):
        m = re.search(rf"\b{key}:(\d+)", out)
        if m:
            res[key] = int(m.group(1))
    return res


def analyse(example: str, params: dict, arch: str = "sm_90a", compiler: str = "nvcc",
            sass_path: str | None = None, cu_path: str | None = None,
            pass_configs: dict | None = None) -> dict:
    """Everything this tool reports for one kernel, as a dict."""
    mod = load_example(example)
    src, entry, kernel = kernel_source(mod, params, arch, pass_configs)
    if cu_path:
        Path(cu_path).write_text(src)
    cuobjdump = find_cuobjdump()
    with tempfile.TemporaryDirectory(prefix="sass_counts_") as tmp:
        cubin, report = compile_cubin(kernel, src, entry, arch, compiler, tmp)
        path = os.path.join(tmp, f"{entry}.{compiler}.cubin")
        Path(path).write_bytes(cubin)
        sass = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True, check=True).stdout
        res = resources(cuobjdump, path)
    if sass_path:
        Path(sass_path).write_text(sass)
    return dict(example=Path(example).stem, params=params, arch=arch, compiler=compiler, entry=entry,
                resources=res, ptxas=report, counts=count_sass(sass))


def _short(params: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items())


def bench_plan(path: str | None) -> list[tuple[str, dict]]:
    """The kernels benchmarks/gpu.py chose (its --out JSON at `path`), else its first configs:
    the fp16 4096^3 GEMM, attention causal and not, and the three row kernels."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu

    best = {}
    if path and os.path.isfile(path):
        for r in json.loads(Path(path).read_text()).get("results", []):
            if isinstance(r.get("config"), dict):
                best[r["case"]] = r["config"]
    M, N = gpu.ROWS
    attn = lambda causal: f"flash_attention fp16 b{gpu.ATTN['batch']} h{gpu.ATTN['heads']} " \
        f"s{gpu.ATTN['seq_len']} d{gpu.ATTN['dim']}{' causal' if causal else ''}"  # noqa: E731
    plan = [("gemm", dict(M=4096, N=4096, K=4096, dtype="float16",
                          **best.get("gemm float16 4096^3", gpu.GEMM_CONFIGS[2])))]
    for causal in (False, True):
        plan.append(("flash_attention", dict(gpu.ATTN, is_causal=causal,
                                             **best.get(attn(causal), gpu.FA_CONFIGS[1]))))
    for name in ("softmax", "rmsnorm", "layernorm"):
        plan.append((name, dict(M=M, N=N, **best.get(f"{name} fp16 {M}x{N}", gpu.ROW_CONFIGS[0]))))
    return plan


def summary_line(r: dict) -> str:
    """One line: name, registers/stack, and the instruction counts."""
    res = " ".join(f"{k}={v}" for k, v in r["resources"].items())
    counts = " ".join(f"{k}={v}" for k, v in r["counts"].items())
    return f"SASS {r['example']} {_short(r['params'])} ({r['arch']}, {r['compiler']}): {res}; {counts}"


def main(argv=None) -> int:
    """Parse arguments, analyse, print."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("example", nargs="?", help="examples/ module name or a path")
    ap.add_argument("params", nargs="*", help="key=value arguments of program()")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--compiler", choices=("nvcc", "tilecore"), default="nvcc",
                    help="nvcc -Xptxas -v, or the cubin tilecore's cuda backend builds and runs")
    ap.add_argument("--sass", help="write the disassembly here")
    ap.add_argument("--cu", help="write the CUDA source here")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--pass-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a compile option (repeatable), e.g. tilecore.programmatic_launch=True")
    ap.add_argument("--from-bench", metavar="JSON", help="instead of one example: every kernel "
                    "benchmarks/gpu.py chose (its --out file; its default configs if absent)")
    ap.add_argument("--sass-dir", help="with --from-bench: write each disassembly here")
    ns = ap.parse_args(argv)
    if ns.from_bench is not None:
        failed = 0
        for name, params in bench_plan(ns.from_bench):
            sass = os.path.join(ns.sass_dir, f"{name}-{'causal' if params.get('is_causal') else 'main'}-"
                                f"{ns.compiler}.sass") if ns.sass_dir else None
            try:
                r = analyse(name, params, ns.arch, ns.compiler, sass)
            except BaseException as e:  # one kernel failing must not hide the others' counts
                failed += 1
                print(f"SASS {name} {_short(params)}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            if r["ptxas"]:
                print(r["ptxas"])
            print(summary_line(r), flush=True)
        return 1 if failed else 0
    if ns.example is None:
        ap.error("name an example, or pass --from-bench")
    r = analyse(ns.example, parse_params(ns.params), ns.arch, ns.compiler, ns.sass, ns.cu,
                parse_params(ns.pass_config) or None)
    if ns.json:
        print(json.dumps(r, indent=1))
        return 0
    if r["ptxas"]:
        print(r["ptxas"])
    print(summary_line(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
