"""tvm:llvm side by side with the numba `cpu` backend (and NumPy) on GEMM and softmax, in one run.

Run: python benchmarks/tvm_llvm.py [--quick]  (not `tvm.py`: that name would shadow the tvm package)
Ratios are speed relative to the cpu backend (>1: tvm:llvm is faster). Also prints each
target's first-build time. Kernels are the examples' (benchmarks/cpu.py's configurations).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gemm  # noqa: E402
import softmax  # noqa: E402
from cpu import best_of, np_softmax  # noqa: E402  (benchmarks/cpu.py: one timer for both)

import tilecore  # noqa: E402


def cases(quick: bool):
    """(name, program, inputs, NumPy function)."""
    rng = np.random.default_rng(0)
    size = 512 if quick else 1024
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    g = gemm.program(M=size, N=size, K=size, block_M=128, block_N=128, block_K=32,
                     dtype="float32", accum_dtype="float32")
    n = 1024 if quick else 4096
    x = rng.standard_normal((n, n), dtype=np.float32)
    s = softmax.program(M=n, N=n, block_M=8, block_N=n, dtype="float32")
    return [(f"gemm fp32 {size}^3", g, (a, b), lambda a, b: a @ b),
            (f"softmax fp32 {n}x{n}", s, (x,), np_softmax)]


def main(quick: bool) -> None:
    print(f"{'kernel':<22} {'numpy ms':>9} {'cpu ms':>8} {'tvm ms':>8} {'tvm/cpu':>8} "
          f"{'cpu build s':>11} {'tvm build s':>11}")
    for name, prog, args, ref in cases(quick):
        t_np = best_of(lambda ref=ref, args=args: ref(*args))
        row, builds = {}, {}
        for target in ("cpu", "tvm:llvm"):
            t = time.perf_counter()
            k = tilecore.compile(prog, out_idx=[-1], target=target)
            out = k(*args)
            builds[target] = time.perf_counter() - t
            np.testing.assert_allclose(out, ref(*args), rtol=1e-3, atol=1e-3)
            row[target] = best_of(lambda k=k, args=args: k(*args))
        print(f"{name:<22} {t_np * 1e3:>9.2f} {row['cpu'] * 1e3:>8.2f} {row['tvm:llvm'] * 1e3:>8.2f} "
              f"{row['cpu'] / row['tvm:llvm']:>8.2f} {builds['cpu']:>11.2f} {builds['tvm:llvm']:>11.2f}")


if __name__ == "__main__":
    main("--quick" in sys.argv)
