"""The cpu target side by side with NumPy (OpenBLAS) and torch CPU, in one run.

Run: python benchmarks/cpu.py [--quick]
Goals on the 2-core CI machine: GEMM >= 0.5x OpenBLAS; bandwidth-bound ops >= 0.8x NumPy.
Ratios are speed relative to NumPy (>1: tilecore is faster). torch is optional.
Also prints first-compile time (fresh cache directory), cached-build time (a second build of the
same kernel: the on-disk cache) and per-call overhead on a tiny input.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import elementwise_add  # noqa: E402
import gemm  # noqa: E402
import rmsnorm  # noqa: E402
import softmax  # noqa: E402

import tilecore  # noqa: E402

try:
    import torch
except ImportError:  # torch is optional: `pip install torch` for its column
    torch = None


def best_of(fn, repeat=5) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def np_rmsnorm(x, w, eps=1e-6):
    return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + eps) * w


def cases(quick: bool):
    """(name, kernel factory, inputs maker, numpy fn, torch fn or None)."""
    rng = np.random.default_rng(0)
    n = 4096 if not quick else 1024
    out = []
    for size in ((1024,) if quick else (1024, 2048)):
        a = rng.standard_normal((size, size), dtype=np.float32)
        b = rng.standard_normal((size, size), dtype=np.float32)
        prog = gemm.program(M=size, N=size, K=size, block_M=256, block_N=256, block_K=64, num_stages=1,
                            dtype="float32", accum_dtype="float32")
        out.append((f"gemm fp32 {size}^3", prog, (a, b), lambda a, b: a @ b,
                    (lambda a, b: torch.mm(a, b)) if torch else None))
    x = rng.standard_normal((n, n), dtype=np.float32)
    prog = softmax.program(M=n, N=n, block_M=8, block_N=n, dtype="float32")
    out.append((f"softmax fp32 {n}x{n}", prog, (x,), np_softmax,
                (lambda x: torch.softmax(x, dim=1)) if torch else None))
    w = rng.uniform(0.5, 1.5, n).astype(np.float32)
    prog = rmsnorm.program(M=n, N=n, block_M=8, block_N=n, dtype="float32")
    out.append((f"rmsnorm fp32 {n}x{n}", prog, (x, w), np_rmsnorm,
                (lambda x, w: torch.nn.functional.rms_norm(x, (x.shape[1],), w, 1e-6)) if torch else None))
    m = 1 << (24 if not quick else 20)
    a1 = rng.standard_normal(m, dtype=np.float32)
    b1 = rng.standard_normal(m, dtype=np.float32)
    prog = elementwise_add.program(block=4096)
    out.append((f"add fp32 2^{m.bit_length() - 1}", prog, (a1, b1), np.add,
                (lambda a, b: torch.add(a, b)) if torch else None))
    return out


def measured(fns, repeat=7) -> list[float]:
    """Best time of each function, one library at a time with a pause between: interleaving lets
    one library's spinning thread pool (torch's, OpenBLAS's) steal the cores from the next."""
    best = []
    for f in fns:
        time.sleep(0.3)
        best.append(best_of(f, repeat))
    return best


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; torch "
          f"{torch.__version__ if torch else 'not installed'}")
    print(f"{'case':24s} {'tilecore':>10s} {'numpy':>10s} {'torch':>10s} {'vs numpy':>9s} {'vs torch':>9s}")
    results = {}
    for name, prog, args, np_fn, torch_fn in cases(quick):
        k = tilecore.jit(prog, out_idx=[-1], target="cpu")
        got = k(*args)
        want = np_fn(*args)
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
        fns = [lambda k=k, args=args: k(*args), lambda f=np_fn, args=args: f(*args)]
        if torch_fn is not None:
            targs = [torch.from_numpy(a) for a in args]
            fns.append(lambda f=torch_fn, a=targs: f(*a))
        times = measured(fns)
        t_tc, t_np = times[:2]
        t_th = times[2] if len(times) > 2 else None
        results[name] = (t_tc, t_np, t_th)
        th = f"{t_th * 1e3:8.2f}ms" if t_th else f"{'-':>10s}"
        vth = f"{t_th / t_tc:8.2f}x" if t_th else f"{'-':>9s}"
        print(f"{name:24s} {t_tc * 1e3:8.2f}ms {t_np * 1e3:8.2f}ms {th} {t_np / t_tc:8.2f}x {vth}",
              flush=True)
    compile_times()
    return results


def compile_times():
    """First compile into an empty cache, cached rebuild in a fresh process, per-call overhead."""
    import subprocess

    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TILECORE_CACHE_DIR=d)
        script = (
            "import sys, time; sys.path.insert(0, {!r}); import numpy as np, tilecore, gemm;"
            "import tilecore_cpu.artifact; tilecore.plugins.target_infos();"  # imports and plugin discovery
            "t = time.perf_counter();"
            "k = tilecore.jit(gemm.program(M=256, N=256, K=256, block_M=64, block_N=64, block_K=64,"
            " dtype='float32'), out_idx=[-1], target='cpu');"
            "b = time.perf_counter() - t;"
            "a = np.ones((256, 256), np.float32); k(a, a);"
            "t = time.perf_counter(); [k(a, a) for _ in range(50)];"
            "print(b, (time.perf_counter() - t) / 50)"
        ).format(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
        runs = []
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                 check=True)
            runs.append([float(x) for x in out.stdout.split()])
    print(f"gemm 256^3 (64^3 tiles) tilecore.jit: first compile {runs[0][0]:.2f} s, from the disk cache "
          f"in a new process {runs[1][0]:.2f} s")
    k = tilecore.jit(elementwise_add.program(block=256), out_idx=[-1], target="cpu")
    a = np.ones(256, np.float32)
    k(a, a)
    t = best_of(lambda: [k(a, a) for _ in range(1000)], repeat=3) / 1000
    print(f"cached call overhead (add, 256 elements): {t * 1e6:.1f} us per call")


if __name__ == "__main__":
    main()
