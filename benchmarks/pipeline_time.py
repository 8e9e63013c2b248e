"""CPU seconds of the lowering pipeline alone (describe + every pass, no rendering, no compiler)
for one example kernel: the part of a cold `tilecore.jit` that lowering speed-ups move.

    python benchmarks/pipeline_time.py [--target cuda:sm_90a] [--kernel gemm] [--runs 6]

Prints the first run in the process (imports of the passes included) and the min / median of the
warm runs, in `time.process_time` seconds (less sensitive than wall time to a shared machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))


def _program(kernel: str):
    """The example's program at the size the host benchmarks use."""
    if kernel == "gemm":
        import gemm

        return gemm.program(M=4096, N=4096, K=4096)
    if kernel == "flash_attention":
        import flash_attention

        return flash_attention.program(seq_len=4096, dim=128)
    raise SystemExit(f"unknown kernel {kernel!r}: gemm or flash_attention")


def main() -> None:
    """Time the pipeline of one kernel, cold then warm."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="cuda:sm_90a")
    ap.add_argument("--kernel", default="gemm")
    ap.add_argument("--runs", type=int, default=6)
    args = ap.parse_args()
    from tilecore import compiler, plugins
    from tilecore.options import options_from_pass_configs

    func = _program(args.kernel)
    tgt = plugins.resolve(args.target)
    opts = options_from_pass_configs(None)
    times = []
    for _ in range(args.runs + 1):
        t = time.process_time()
        desc = plugins.describe(tgt, func, opts)
        compiler._stages(func, tgt, opts, desc)
        times.append(time.process_time() - t)
    warm = sorted(times[1:])
    print(f"{args.kernel} on {args.target}: first {times[0]:.3f} s, warm min {warm[0]:.3f} s, "
          f"median {warm[len(warm) // 2]:.3f} s (CPU seconds)")


if __name__ == "__main__":
    main()
