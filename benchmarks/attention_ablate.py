"""Where the attention backward's time goes, measured by ablation on the GPU (timing only: the
ablated kernels compute wrong gradients on purpose and are never checked or used).

    python benchmarks/attention_ablate.py [seq_len] [causal] [tma]

(`tma` = 1: the kernel with dQ added by TMA reduce-add, `dq_tma=True`; the ablations then
take out that reduction instead of the atomics.)

Builds `examples/flash_attention_bwd.program` (the default statement order) and variants of its
source with one part of the loop body taken out, and times each like benchmarks/attention.py
(do_bench median, L2 flushed; the dQ zeroing and the delta preprocess included, as there):

- base: the kernel as it is;
- dq_store: dQ's atomic add replaced by a plain store (the cost of the atomics);
- no_atomic: dQ's product kept, its result dropped (no global write of dQ at all);
- no_dq: no dS store, no dQ product, no atomics (the cost of the whole dQ step: shared-memory
  store, proxy fence, the barrier between the two consumer warpgroups, product and atomics).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import attention_cases as cases  # noqa: E402
import flash_attention_bwd  # noqa: E402
import gpu  # noqa: E402

import tilecore  # noqa: E402

CONFIG = dict(block_M=64, block_N=128, num_stages=2, threads=256)
# the dQ step of flash_attention_bwd.program's loop: dS to shared
# memory, dQ = dS K, the atomic add of dQ (two source lines)
_ATOMIC = re.compile(r"T\.atomic_add\((dQ\[[^\]]*\]), dq(?:, use_tma=dq_tma)?\)", re.S)
_DQ_STEP = ("T.copy(ds_cast, dS_shared)", "T.clear(dq)", "T.gemm(dS_shared, K_shared, dq, transpose_A=True)")


def _variant(name: str):
    """A module object holding `program` built from flash_attention_bwd's source with the
    ablation `name` applied (the unchanged module for "base")."""
    if name == "base":
        return flash_attention_bwd
    src = open(flash_attention_bwd.__file__).read()
    body_start = src.index("T.gemm(p_cast, dO_shared, dv")
    head, tail = src[:body_start], src[body_start:]
    if name == "dq_store":
        tail, n = _ATOMIC.subn(r"T.copy(dq, \1)", tail, count=1)
    elif name == "no_atomic":
        tail, n = _ATOMIC.subn("pass", tail, count=1)
    elif name == "no_dq":
        for stmt in _DQ_STEP:
            tail = tail.replace(stmt, "pass", 1)
        tail, n = _ATOMIC.subn("pass", tail, count=1)
    else:
        raise ValueError(name)
    if not n:
        raise RuntimeError(f"ablation {name}: the atomic add was not found in the source")
    # the tile-program parser reads a kernel's source from its file: the variant needs its own
    path = os.path.join(tempfile.mkdtemp(prefix="ablate_"), f"flash_attention_bwd_{name}.py")
    with open(path, "w") as f:
        f.write(head + tail)
    spec = importlib.util.spec_from_file_location(f"flash_attention_bwd_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None) -> int:
    """Time the base kernel and its ablations at one shape."""
    import torch
    from tilecore_cuda.launch import device_arch

    args = argv if argv is not None else sys.argv[1:]
    s = int(args[0]) if args else 4096
    causal = bool(int(args[1])) if len(args) > 1 else False
    cfg = dict(CONFIG, num_stages=3) if causal else CONFIG
    if len(args) > 2 and int(args[2]):
        cfg = dict(CONFIG, dq_tma=True)  # 2 stages causal too: 3 fit worse beside the staging tile
    arch = device_arch(torch.cuda.current_device())
    d = 128
    b, h = cases.fwd_shape(d, s)
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    base = dict(batch=b, heads=h, seq_len=s, dim=d, is_causal=causal, dtype="bfloat16")
    fwd = cases.build("fwd", dict(base, return_lse=True, **cases.FWD_FOR_LSE), arch, out_idx=[-2, -1])
    o, lse = fwd(q, k, v)
    pre = cases.build("pre", dict(batch=b, heads=h, seq_len=s, dim=d, dtype="bfloat16"), arch)
    delta = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    dq = torch.empty(b, s, h, d, device="cuda", dtype=torch.float32)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    for name in ("base", "dq_store", "no_atomic", "no_dq"):
        mod = _variant(name)
        kern = tilecore.compile(mod.program(**base, **cfg), target=f"cuda:{arch}",
                                pass_configs=cases.PASS_CONFIGS)

        def run(kern=kern):
            dq.zero_()
            pre(o, do, delta)
            kern(q, k, v, do, lse, delta, dq, dk, dv)

        print(f"ablate bwd s{s} causal={causal} {cfg} {name}: {gpu.bench(run):.3f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
