"""TMA GEMMs on the GPU: correctness against torch on ragged shapes, then do_bench medians of the
cp.async path (cuda:sm_80 code), the TMA path (cuda:sm_90a) and torch.matmul at n^3.

usage: python tools/tma_gpu.py [n ...]   (default 4096); prints one line per case.
"""

from __future__ import annotations

import sys
import time
import traceback

import torch  # noqa: F401  (before cuda-bindings, see tilecore_cuda.build.cuda_bindings)

sys.path.insert(0, "examples")
sys.path.insert(0, "benchmarks")
import gemm  # noqa: E402
from gpu import bench  # noqa: E402

import tilecore  # noqa: E402

NO_WS = {"tl.disable_warp_specialized": True}


def check(M, N, K, arch, **kw) -> str:
    """Max relative error of one GEMM against torch (fp32 reference)."""
    k = tilecore.compile(gemm.program(M=M, N=N, K=K, **kw), target=f"cuda:{arch}")
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    k(a, b, c)
    ref = a.float() @ b.float()
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    src = k.get_kernel_source()
    return f"{err:.1e} tma={'cp.async.bulk.tensor' in src} ws={'producer warpgroup' in src}"


def main(argv) -> int:
    sizes = [int(x) for x in argv] or [4096]
    cases = [(200, 136, 104, dict(block_N=64)), (1000, 520, 304, {}), (64, 64, 32, dict(block_N=64)),
             (257, 129, 72, dict(block_K=64, threads=256)), (513, 1000, 1000, dict(block_N=64))]
    for M, N, K, kw in cases:
        try:
            print(f"check {M}x{N}x{K} {kw}: sm_90a {check(M, N, K, 'sm_90a', **kw)}", flush=True)
        except Exception:
            traceback.print_exc()
    configs = [dict(), dict(block_N=64), dict(block_N=64, block_K=64), dict(block_N=64, num_stages=4),
               dict(block_N=64, block_K=64, threads=256), dict(block_M=256 // 2, block_N=64, block_K=64,
                                                               num_stages=4)]
    for n in sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        c = torch.empty(n, n, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float()
        t_torch = bench(lambda a=a, b=b: torch.matmul(a, b))
        flops = 2.0 * n ** 3
        print(f"torch.matmul {n}^3: {t_torch:.3f} ms {flops / t_torch / 1e9:.0f} TFLOP/s", flush=True)
        for cfg in configs:
            for arch, pc in (("sm_80", None), ("sm_90a", None), ("sm_90a", NO_WS)):
                try:
                    t0 = time.perf_counter()
                    prog = gemm.program(M=n, N=n, K=n, **cfg)
                    k = tilecore.compile(prog, target=f"cuda:{arch}", pass_configs=pc)
                    ws = "producer warpgroup" in k.get_kernel_source()
                    k(a, b, c)
                    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
                    ms = bench(lambda k=k, a=a, b=b, c=c: k(a, b, c))
                    print(f"{arch} ws={ws} {cfg}: {ms:.3f} ms {flops / ms / 1e9:.0f} TFLOP/s "
                          f"({t_torch / ms:.2f}x torch) err {err:.1e} build {time.perf_counter() - t0:.1f}s",
                          flush=True)
                except Exception as e:
                    print(f"{arch} {cfg}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
