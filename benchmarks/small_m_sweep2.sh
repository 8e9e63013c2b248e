#!/usr/bin/env bash
# Small-M call 2 (issue 10, helper gemm, session 8): split-K without a zeroed C
# (examples/gemm.py split_reduce="workspace") against the shipped small-M configs, interleaved
# against torch.matmul (benchmarks/hopper_gemm.py), then the GPU tests of test_cuda_small_m.py.
e='"b_eviction":"evict_first","threads":128,"split_reduce":"workspace"'
c() { echo "{\"block_M\":16,\"block_N\":$1,\"block_K\":$2,\"num_stages\":4,\"split_k\":$3,$e}"; }
export HOPPER_SMALL_CONFIGS="[\"auto\",$(c 64 256 2),$(c 32 256 2),$(c 64 128 2),$(c 32 256 4)]"
export HOPPER_SMALL_EXTRA_CONFIGS="[\"auto\",$(c 32 256 4)]" HOPPER_SECTIONS=small
bash tools/gpu_check.sh hopper
timeout 60 python3 -m pytest -q -p no:cacheprovider backends/cuda/tests/test_cuda_small_m.py 2>&1 | tail -4
