"""A short GPU probe of chosen attention cases and configs (one process, compiles ahead in a
pool): python benchmarks/attention_probe.py '<JSON list of [kind, args, [configs]]>'
kind is fwd / bwd / decode (args as in benchmarks/attention.py's PRIORITY); prints one line per
case and every config's time (the sweep notes)."""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attention as driver  # noqa: E402
import attention_cases as cases  # noqa: E402
import gpu  # noqa: E402


def main(argv=None) -> int:
    """Run the cases of the JSON plan in argv[0]."""
    import torch

    plan = json.loads((argv or sys.argv[1:])[0])
    from tilecore_cuda.launch import device_arch

    arch = device_arch(torch.cuda.current_device())
    jobs = []
    for kind, a, cfgs in plan:
        if kind in ("fwd", "bwd"):
            d, sl, c = a[:3]
            b, h = a[3:5] if len(a) > 3 else cases.fwd_shape(d, sl)
            dtype = a[5] if len(a) > 5 else "bfloat16"
            base = dict(batch=b, heads=h, seq_len=sl, dim=d, is_causal=c, dtype=dtype)
            if kind == "bwd":
                jobs.append(("fwd", dict(base, return_lse=True, **cases.FWD_FOR_LSE)))
        else:
            base = dict(batch=32, heads=32, kv_heads=8, seq_kv=a[0], dim=128, dtype="bfloat16", paged=a[1],
                        page_size=cases.PAGE)
        jobs += [(kind, dict(base, **cfg)) for cfg in cfgs]
    pool, _ = driver.precompile(jobs, arch)
    cases.COPY_GBS.append(gpu.copy_bandwidth(torch))
    t0 = time.perf_counter()
    for kind, a, cfgs in plan:
        fn = dict(fwd=cases.case_fwd, bwd=cases.case_bwd, decode=cases.case_decode)[kind]
        try:
            r = fn(torch, arch, cfgs, *a)
        except Exception as e:  # keep going
            print(f"{kind} {a}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        print(f"== {r['case']}: {r.get('ms')} ms ({r.get('rate')}) peer {r.get('peer')} {r.get('peer_ms')} "
              f"ratio {r.get('ratio')} paired {r.get('paired')} cfg {r.get('config')} "
              f"({time.perf_counter() - t0:.0f}s)", flush=True)
        for n in r["notes"]:
            print("   ", n, flush=True)
    pool.shutdown(wait=False, cancel_futures=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
