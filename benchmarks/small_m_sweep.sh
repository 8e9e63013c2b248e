#!/usr/bin/env bash
# Small-M sweep (issue 10, helper gemm, session 8): stage depth / tile width / wgmma 64-row tiles
# at the three issue shapes, each timed interleaved against torch.matmul (benchmarks/hopper_gemm.py).
e='"b_eviction":"evict_first","threads":128'
c() { echo "{\"block_M\":$1,\"block_N\":$2,\"block_K\":$3,\"num_stages\":$4,$e}"; }
export HOPPER_SMALL_CONFIGS="[\"auto\",$(c 16 32 256 3),$(c 16 32 256 5),$(c 16 32 128 6),$(c 16 64 256 3),$(c 16 64 128 6),$(c 64 128 128 4),$(c 64 128 64 6),$(c 64 64 256 3),$(c 16 16 256 4)]"
export HOPPER_SMALL_EXTRA_CONFIGS='["auto"]' HOPPER_SECTIONS=small HOPPER_TIMEOUT=${HOPPER_TIMEOUT:-200}
bash tools/gpu_check.sh hopper
