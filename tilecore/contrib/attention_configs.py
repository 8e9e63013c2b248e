"""The attention kernels' tile parameters per target: the measured-best tiles on Hopper
(`cuda` on sm_90 / sm_90a, BENCHMARKS.md "GPU: attention"), the programs' own defaults
elsewhere. One source of truth for `tilecore.contrib.attention`, the examples' `main` and the
benchmarks.

    from tilecore.contrib.attention_configs import tuned_config
    cfg = tuned_config("fwd", "cuda", dim=128, is_causal=True, dtype="bfloat16")
    kernel = program(..., **cfg)

An empty dict means "the program's defaults" (interp, cpu, emu, metal, hip, cuda sm_80: those
tiles are small enough for every backend and keep the emulator fast).
"""

from __future__ import annotations

# Hopper (TMA + wgmma + a producer warpgroup): two consumer warpgroups of 64 query rows each.
# fwd: 128x128 for d=128, 128x64 for d=64 (the faster of the two in each case's sweep).
# bwd (d=128, the measured width): 128 keys per block (two warpgroups of 64), 64 queries per
# step, dQ reduced by TMA.
# decode: one split per (sequence, KV head) over 64-key tiles, the output written directly
# (`direct=True`: callers skip the combine); mla: 64 heads per block, split 2.
_HOPPER = {
    ("fwd", 128): dict(block_M=128, block_N=128, num_stages=2, threads=256),
    # FlashAttention-3's intra-warpgroup overlap (wgmma_async): at d=128 without a mask 0.983 ->
    # 0.951 ms (s=4096) and 3.819 -> 3.662 ms (s=16384); causal slower (0.555 -> 0.583 ms,
    # 1.932 -> 2.008 ms: the loop's extra iteration, and ptxas spills the masked body), d=64
    # slower everywhere (BENCHMARKS.md, "attention: FA3 overlap")
    ("fwd", 128, "overlap"): dict(block_M=128, block_N=128, num_stages=2, threads=256, overlap=True),
    # causal: the overlapped loop walking key tiles last to first (`diag_first`: the one masked
    # tile is the peeled first iteration's, the overlapped body has no mask and no spill);
    # interleaved against the plain causal loop 0.949x the time at s=4096, 0.929x at s=16384
    # (BENCHMARKS.md, "attention: diag_first", session 9)
    ("fwd", 128, "causal"): dict(block_M=128, block_N=128, num_stages=2, threads=256, overlap=True,
                                 diag_first=True),
    # d=64: three consumer warpgroups (192 rows, 384 threads + the producer: 3 or more stages
    # put the kernel over half the shared memory, so it is warp-specialized; 4 ran 1% ahead of
    # 3); 128x64 s2 (no producer) stays ahead only causal at s <= 4096 (BENCHMARKS.md,
    # "attention: d64 on three warpgroups")
    ("fwd", 64): dict(block_M=192, block_N=128, num_stages=4, threads=384),
    ("fwd", 64, "short causal"): dict(block_M=128, block_N=64, num_stages=2, threads=256),
    # dq_tma: each dQ tile added by TMA reduce-add from a shared staging tile (tilecore.lower.
    # tma_reduce), not by per-thread atomics: 3.509 -> 2.889 ms at s=4096, causal (then 3 stages)
    # 2.021 -> 1.554 ms with 2 stages, the staging tile's 32 KB beside them (BENCHMARKS.md,
    # "attention: dQ by TMA reduce-add"). stagger: each key tile starts its walk over the query
    # tiles at its own one, so blocks running together add into different dQ tiles (3.544 ->
    # 3.449 ms with atomics; 11.08 -> 10.97 ms at s=16384 with TMA)
    ("bwd", False): dict(block_M=64, block_N=128, num_stages=2, threads=256, stagger=True, dq_tma=True,
                         dq_early=True),
    ("bwd", True): dict(block_M=64, block_N=128, num_stages=2, threads=256, dq_tma=True),
    # one launch, no combine: batch x KV heads blocks (256 at 32 x 8) fill the GPU; short caches:
    # the query heads padded to one wgmma tile (block_H=64), K/V by TMA read evict_first
    ("decode",): dict(num_split=1, direct=True, block_N=64, num_stages=2, threads=128),
    ("decode", "short"): dict(num_split=1, direct=True, block_N=64, block_H=64, num_stages=2, threads=128,
                              kv_eviction="evict_first"),
    ("mla",): dict(num_split=2, block_H=64, block_N=32, num_stages=2, threads=256),
}
KINDS = ("fwd", "bwd", "decode", "mla")


def is_hopper(target) -> bool:
    """Whether `target` (a name or Target) is real CUDA hardware with TMA (sm_90 / sm_90a): the
    tiles below were measured there. Emulators and other GPUs keep the programs' defaults."""
    from .. import plugins

    t = plugins.resolve(target)
    return t.kind == "cuda" and bool(plugins.facts(t).get("tma"))


# the longest sequence (forward) / KV cache (decode) the "short" tiles are for: d=64 causal
# 128x64 was ahead at 4096 and behind at 16384; block_H=64 decoding ahead at 1024 (0.041 against
# 0.045 ms), behind at 4096 (0.140 against 0.134 ms): 2048 splits the unmeasured range
SHORT_SEQ = 4096
SHORT_KV = 2048


def tuned_config(kind: str, target, dim: int = 128, is_causal: bool = False,
                 dtype: str = "float16", seq_len: int | None = None) -> dict:
    """Tile parameters for `kind` ("fwd", "bwd", "decode", "mla") on `target`: the measured-best
    Hopper tiles for 16-bit dtypes (forward: head dim 64 or 128, the overlapped loop for d=128,
    walking key tiles last to first when causal; backward: 128), else {} (the program's
    defaults). `seq_len` (optional: the sequence length, for decode the KV cache length) picks
    the tiles measured best for short ones (d=64 causal forward, decode). A decode config has
    `direct=True`: the split kernel writes the output, no combine kernel follows."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {', '.join(KINDS)}")
    if dtype not in ("float16", "bfloat16") or not is_hopper(target):
        return {}
    if kind == "fwd":
        if dim == 128:
            return dict(_HOPPER[("fwd", 128, "causal" if is_causal else "overlap")])
        if dim == 64 and is_causal and seq_len is not None and seq_len <= SHORT_SEQ:
            return dict(_HOPPER[("fwd", 64, "short causal")])
        return dict(_HOPPER.get(("fwd", dim), {}))
    if kind == "bwd":
        return dict(_HOPPER[("bwd", bool(is_causal))]) if dim == 128 else {}
    if kind == "decode" and seq_len is not None and seq_len <= SHORT_KV:
        return dict(_HOPPER[("decode", "short")])
    return dict(_HOPPER[(kind,)])
