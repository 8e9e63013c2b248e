"""Interleaved A/B timing of attention configs on the GPU (one process):
python benchmarks/attention_ab.py '<JSON list of steps>'

Steps:
- ["fwd", [dim, seq, causal], [cfg_A, cfg_B, ...]]: each config built, checked against SDPA
  (output poisoned first), then every config after the first timed alternately with A
  (gpu_paired.bench_pair: the median of the per-pair ratios t_X / t_A; > 1: A is faster) and
  every config alternately with SDPA (t_SDPA / t_X; > 1: ours is faster).
- ["bwd", [seq, causal], [cfg, ...]]: d=128 backward (dQ zeroing + delta preprocess + the
  main kernel, as benchmarks/attention_cases.case_bwd) checked against cuDNN's gradients, each
  config timed alternately with every SDPA backend that runs it (cuDNN, flash, efficient:
  t_SDPA / t_X, > 1: ours is faster) and with the first config.
- ["decode", [kv_len, ...], [cfg, ...]]: GQA 32/8 d128 b32 decoding at each cache length, each
  config and cuDNN timed alternately (t_cuDNN / t_X), every config after the first also
  alternately with the first (t_X / t_A), and each by do_bench; with the launch floor
  (do_bench of a 1-element torch add) first, so a straight line through time against bytes
  splits each config's time into a fixed part and a streaming rate. A config with
  `"kv_layout": "hnd"` reads the [b, kv_heads, s, d] tensors cuDNN is given, the others the
  [b, s, kv_heads, d] ones (same values). A `"fuse_combine": true` config is one launch with
  its workspaces (flash_decoding.workspace_shapes; the counters checked back at zero).
- ["decode_read", [kv_len, ...], [cfg, ...]]: the same with L2 left clean before every timed
  run (256 MB read, `gpu_paired.bench_pair(read_flush=True)`, `gpu.bench_read_flushed`)
  instead of do_bench's zeroing flush, which leaves it full of dirty lines.
Prints one line per measurement; the configs use the keys of benchmarks/attention_cases.py."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attention_cases as cases  # noqa: E402
import gpu  # noqa: E402
import gpu_paired  # noqa: E402


def _bind(kern, *args):
    """kern(*args) as a function of nothing."""
    return lambda: kern(*args)


def _pair(torch, a, b, ms, read_flush=False):
    return gpu_paired.bench_pair(torch, a, b, reps=60 if ms < 1.0 else 24, read_flush=read_flush)


def step_fwd(torch, arch, args, cfgs):
    """Check then A/B-time forward configs at (dim, seq, causal)."""
    d, s, causal = args
    b, h = cases.fwd_shape(d, s)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    sdpa = cases.sdpa_call(lambda: torch.nn.functional.scaled_dot_product_attention(
        qt, kt, vt, is_causal=causal), "cudnn_attention")
    ref = sdpa().transpose(1, 2).float()
    base = dict(batch=b, heads=h, seq_len=s, dim=d, is_causal=causal, dtype="bfloat16")
    gflop = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0) / 1e9
    runs = []
    for cfg in cfgs:
        kern = cases.build("fwd", dict(base, **cfg), arch)
        o = torch.empty_like(q)
        o.fill_(float("nan"))
        run = _bind(kern, q, k, v, o)
        run()
        err = gpu.rel_err(o, ref)
        assert err < 2e-2, f"{cfg}: relative error {err:.3e}"
        runs.append(run)
    tag = f"fwd d{d} s{s}{' causal' if causal else ''}"
    ms0 = gpu.bench(runs[0])
    for i, (cfg, run) in enumerate(zip(cfgs, runs)):
        ms = gpu.bench(run)
        vs = _pair(torch, run, sdpa, ms)
        line = (f"{tag} cfg{i} {json.dumps(cfg)}: {ms:.3f} ms ({gflop / ms:.0f} TFLOP/s) | paired vs cuDNN "
                f"{vs['a_ms']:.3f} / {vs['b_ms']:.3f} ms ratio {vs['ratio']:.3f} "
                f"({vs['mhz']} MHz {vs['watts']} W)")
        if i:
            ab = _pair(torch, runs[0], run, ms0)
            line += f" | vs cfg0 {ab['a_ms']:.3f} / {ab['b_ms']:.3f} ms t_X/t_A {ab['ratio']:.3f}"
        print(line, flush=True)


def step_bwd(torch, arch, args, cfgs):
    """Check then time backward configs at (seq, causal), d=128, against each SDPA backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    s, causal = args
    d = 128
    b, h = cases.fwd_shape(d, s)
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    qt, kt, vt = (x.transpose(1, 2).contiguous().requires_grad_() for x in (q, k, v))
    dot = do.transpose(1, 2).contiguous()
    base = dict(batch=b, heads=h, seq_len=s, dim=d, is_causal=causal, dtype="bfloat16")
    fwd = cases.build("fwd", dict(base, return_lse=True, **cases.FWD_FOR_LSE), arch, out_idx=[-2, -1])
    o, lse = fwd(q, k, v)
    pre = cases.build("pre", dict(batch=b, heads=h, seq_len=s, dim=d, dtype="bfloat16"), arch)
    peers, ref = {}, None
    for name in ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION"):
        with sdpa_kernel(getattr(SDPBackend, name)):
            try:
                out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            except Exception as e:  # not available for these inputs
                print(f"SDPA {name} unavailable: {type(e).__name__}: {str(e)[:120]}", flush=True)
                continue

        def peer(out=out):
            return torch.autograd.grad(out, (qt, kt, vt), dot, retain_graph=True)

        grads = peer()
        if ref is None:
            ref = torch.cat([g.transpose(1, 2).float().flatten() for g in grads])
        peers[name.lower()] = peer
    gflop = 10.0 * b * h * s * s * d * (0.5 if causal else 1.0) / 1e9
    tag = f"bwd d{d} s{s}{' causal' if causal else ''}"
    for name, peer in peers.items():
        ms = gpu.bench(peer)
        print(f"{tag} SDPA {name}: {ms:.3f} ms ({gflop / ms:.0f} TFLOP/s)", flush=True)
    runs = []
    for i, cfg in enumerate(cfgs):
        kern = cases.build("bwd", dict(base, **cfg), arch)
        delta = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
        dq = torch.empty(b, s, h, d, device="cuda", dtype=torch.float32)
        dk, dv = torch.empty_like(k), torch.empty_like(v)

        def run(kern=kern, delta=delta, dq=dq, dk=dk, dv=dv):
            dq.zero_()
            pre(o, do, delta)
            kern(q, k, v, do, lse, delta, dq, dk, dv)

        dk.fill_(float("nan"))
        dv.fill_(float("nan"))
        run()
        err = gpu.rel_err(torch.cat([x.float().flatten() for x in (dq, dk, dv)]), ref)
        assert err < 3e-2, f"{cfg}: relative error {err:.3e}"
        ms = gpu.bench(run)
        line = f"{tag} cfg{i} {json.dumps(cfg)}: {ms:.3f} ms ({gflop / ms:.0f} TFLOP/s, err {err:.1e})"
        for name, peer in peers.items():
            vs = _pair(torch, run, peer, ms)
            line += f" | vs {name} {vs['a_ms']:.3f} / {vs['b_ms']:.3f} ms ratio {vs['ratio']:.3f}"
        if runs:
            ab = _pair(torch, runs[0], run, ms)
            line += f" | vs cfg0 t_X/t_A {ab['ratio']:.3f}"
        runs.append(run)
        print(line, flush=True)


def step_decode(torch, arch, kvs, cfgs, read_flush=False):
    """Decoding configs against cuDNN at each KV length (with the launch floor first)."""
    tiny = torch.ones(1, device="cuda")
    print(f"launch floor (do_bench of a 1-element add): {gpu.bench(lambda: tiny.add_(1)) * 1e3:.2f} us",
          flush=True)
    for kv in kvs:
        _decode_at(torch, arch, kv, cfgs, read_flush)


def step_decode_read(torch, arch, kvs, cfgs):
    """step_decode with L2 clean before each timed run (read flush)."""
    step_decode(torch, arch, kvs, cfgs, read_flush=True)


def _decode_at(torch, arch, kv, cfgs, read_flush=False):
    """One cache length of step_decode."""
    b, h, hk, d = 32, 32, 8, 128
    q = torch.randn(b, h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, kv, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    qt, kt, vt = q.unsqueeze(2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
    sdpa = cases.sdpa_call(lambda: torch.nn.functional.scaled_dot_product_attention(
        qt, kt, vt, enable_gqa=True), "cudnn_attention")
    ref = torch.nn.functional.scaled_dot_product_attention(
        qt.float(), kt.float(), vt.float(), enable_gqa=True)[:, :, 0]
    mb = 2.0 * b * kv * hk * d * 2 / 1e6
    bench = (lambda fn: gpu.bench_read_flushed(torch, fn)) if read_flush else gpu.bench
    peer = bench(sdpa)
    print(f"decode{' (L2 clean: read flush)' if read_flush else ''} kv{kv}: {mb:.1f} MB; cuDNN "
          f"{'read-flushed' if read_flush else 'do_bench'} {peer * 1e3:.1f} us ({mb / peer:.0f} GB/s)",
          flush=True)
    base = dict(batch=b, heads=h, kv_heads=hk, seq_kv=kv, dim=d, dtype="bfloat16")
    runs: list = []
    for i, cfg in enumerate(cfgs):
        try:
            line = _decode_one(torch, arch, base, cfg, (q, k, v, kt, vt), ref, sdpa, mb, runs, i, bench,
                               read_flush)
        except Exception as e:  # report it and time the next config
            line = f"  cfg{i} {json.dumps(cfg)}: FAILED {type(e).__name__}: {str(e)[:300]}"
        print(line, flush=True)


def _decode_one(torch, arch, base, cfg, tensors, ref, sdpa, mb, runs, i, bench, read_flush) -> str:
    """Build, check and time config `i` (appending its run to `runs`, whose first entry is the
    A of the A/B); the line to print."""
    q, k, v, kt, vt = tensors
    b, h, d = base["batch"], base["heads"], base["dim"]
    kern = cases.build("decode", dict(base, **cfg), arch)
    out = torch.empty(b, h, d, device="cuda", dtype=torch.bfloat16)
    kk, vv = (kt, vt) if cfg.get("kv_layout") == "hnd" else (k, v)
    counts = None
    if cfg.get("direct"):
        run = _bind(kern, q, kk, vv, out)
    elif cfg.get("fuse_combine"):  # one launch: the workspaces (counters zero) then the output
        work = [torch.zeros(shape, device="cuda", dtype=getattr(torch, dt)) for shape, dt in
                cases.flash_decoding.workspace_shapes(batch=b, heads=h, kv_heads=base["kv_heads"],
                                                      num_split=cfg["num_split"], dim=d)]
        counts = work[-1]
        run = _bind(kern, q, kk, vv, *work, out)
    else:
        merge = cases.build("combine", dict(batch=b, heads=h, num_split=cfg["num_split"], dim=d,
                                            dtype="bfloat16"), arch)
        op = torch.empty(b, h, cfg["num_split"], d, device="cuda", dtype=torch.float32)
        lp = torch.empty(b, h, cfg["num_split"], device="cuda", dtype=torch.float32)
        split, combine = _bind(kern, q, kk, vv, op, lp), _bind(merge, op, lp, out)

        def run(split=split, combine=combine):
            split()
            combine()
    out.fill_(float("nan"))
    run()
    err = gpu.rel_err(out, ref)
    assert err < 2e-2, f"{cfg}: relative error {err:.3e}"
    assert counts is None or int(counts.abs().sum()) == 0, f"{cfg}: counters not reset"
    ms = bench(run)
    vs = _pair(torch, run, sdpa, ms, read_flush)
    line = (f"  cfg{i} {json.dumps(cfg)}: do_bench {ms * 1e3:.1f} us ({mb / ms:.0f} GB/s) | "
            f"paired {vs['a_ms'] * 1e3:.1f} / cuDNN {vs['b_ms'] * 1e3:.1f} us ratio {vs['ratio']:.3f}")
    if runs:
        ab = _pair(torch, runs[0], run, ms, read_flush)
        line += f" | vs cfg0 {ab['a_ms'] * 1e3:.1f} / {ab['b_ms'] * 1e3:.1f} us t_X/t_A {ab['ratio']:.3f}"
    runs.append(run)
    return line


def build_jobs(plan) -> list:
    """Every kernel of `plan` as (kind, params) to compile: forward configs once, decoding
    configs per cache length (their combine kernel too)."""
    jobs, seen = [], set()
    for kind, args, cfgs in plan:
        for cfg in cfgs:
            if kind == "bwd":
                s, causal = args
                b, h = cases.fwd_shape(128, s)
                base = dict(batch=b, heads=h, seq_len=s, dim=128, is_causal=causal, dtype="bfloat16")
                todo = [("bwd", dict(base, **cfg)), ("fwd", dict(base, return_lse=True, **cases.FWD_FOR_LSE)),
                        ("pre", dict(batch=b, heads=h, seq_len=s, dim=128, dtype="bfloat16"))]
            elif kind == "fwd":
                d, s, causal = args
                b, h = cases.fwd_shape(d, s)
                todo = [("fwd", dict(batch=b, heads=h, seq_len=s, dim=d, is_causal=causal, dtype="bfloat16",
                                     **cfg))]
            else:
                todo = [("decode", dict(batch=32, heads=32, kv_heads=8, seq_kv=kv, dim=128, dtype="bfloat16",
                                        **cfg)) for kv in args]
                if not cfg.get("direct") and not cfg.get("fuse_combine"):
                    todo.append(("combine", dict(batch=32, heads=32, num_split=cfg["num_split"], dim=128,
                                                 dtype="bfloat16")))
            for job in todo:
                key = json.dumps(job, sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    jobs.append(job)
    return jobs


def build_all(plan, arch, only=None) -> int:
    """Compile the kernels of `plan` for `arch`, cubin included (NVRTC, or nvcc with
    TILECORE_CUDA_COMPILER=nvcc), into the compile cache (TILECORE_CACHE_DIR); `only`: the
    indices of `build_jobs(plan)` to build. On the device, several `--build ... --job i`
    processes at once fill the cache the timed run then hits (a cache built on another machine
    does not: the key holds paths, file times and the toolchain)."""
    jobs = build_jobs(plan)
    n = 0
    for i, (kind, params) in enumerate(jobs):
        if only is not None and i not in only:
            continue
        cases.build(kind, params, arch).artifact.cubin(arch)  # the cache entry gains the cubin
        n += 1
    return n


def main(argv=None) -> int:
    """Run the steps of the JSON plan in argv[0] (`--build ARCH PLAN [--job I]`: only compile
    them, or the I-th of `--jobs PLAN`)."""
    argv = argv or sys.argv[1:]
    if argv[0] == "--jobs":  # how many `--build ARCH PLAN --job i` there are
        print(len(build_jobs(json.loads(argv[1]))))
        return 0
    if argv[0] == "--build":
        only = {int(argv[4])} if len(argv) > 4 and argv[3] == "--job" else None
        print(build_all(json.loads(argv[2]), argv[1], only), "kernels built")
        return 0
    import torch
    from tilecore_cuda.launch import device_arch

    arch = device_arch(torch.cuda.current_device())
    for kind, args, cfgs in json.loads(argv[0]):
        try:
            steps = dict(fwd=step_fwd, bwd=step_bwd, decode=step_decode, decode_read=step_decode_read)
            steps[kind](torch, arch, args, cfgs)
        except Exception as e:  # keep going
            print(f"{kind} {args}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
