"""Interpreter speed: how long the oracle takes on a realistic GEMM and FlashAttention.

Run: python benchmarks/interp.py   (targets on the 2-core CI machine: GEMM <= 1 s, attention <= 3 s)
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import flash_attention  # noqa: E402
import gemm  # noqa: E402

import tilecore  # noqa: E402


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    rng = np.random.default_rng(0)
    sizes = dict(M=1024, N=1024, K=1024)
    t0 = time.perf_counter()
    func = gemm.program(**sizes, block_M=128, block_N=128, block_K=32)
    k = tilecore.jit(func, out_idx=[-1], target="interp")
    compile_s = time.perf_counter() - t0
    a, b = gemm.make_inputs(rng, **sizes)
    t_gemm = best_of(lambda: k(a, b))
    print(f"interp gemm 1024^3 fp16 (128x128x32 tiles): {t_gemm:.3f} s  (compile {compile_s * 1e3:.1f} ms)")

    fa = dict(batch=1, heads=8, seq_len=1024, dim=64, is_causal=False)
    k2 = tilecore.jit(flash_attention.program(**fa), out_idx=[-1], target="interp")
    q, kk, v = flash_attention.make_inputs(rng, **fa)
    t_fa = best_of(lambda: k2(q, kk, v))
    print(f"interp flash_attention b1 h8 s1024 d64: {t_fa:.3f} s")
    fa["is_causal"] = True
    k3 = tilecore.jit(flash_attention.program(**fa), out_idx=[-1], target="interp")
    t_fac = best_of(lambda: k3(q, kk, v))
    print(f"interp flash_attention causal b1 h8 s1024 d64: {t_fac:.3f} s")
    return t_gemm, t_fa


if __name__ == "__main__":
    main()
