#!/usr/bin/env bash
# Stream-K on the H200 (issue 10 item 4): the same 128x256x64 tiles with and without stream-K
# (and the fp8 example's with and without), each beside cuBLAS / _scaled_mm in one process
# (benchmarks/hopper_gemm.py: do_bench medians, interleaved A/B, clocks) at 4096^3, 8192^3 and
# the LLM shapes, small M (the shipped choice), and the ragged checks (stream-K against the
# plain kernel on the same inputs, repeat calls bit-identical, counters left zero).
# usage (on the lent GPU, from the repository root): bash benchmarks/stream_k_gpu.sh
# BENCHMARKS.md "stream-K": call 1 ran commit b9c6f08's version of this file (configs ["auto", B]
# with auto = stream-K wherever the wave was partial, and the small section), call 2 this one.
set -uo pipefail
B='{"block_M":128,"block_N":256,"block_K":64,"num_stages":3,"threads":256,"panel":16}'
S='{"block_M":128,"block_N":256,"block_K":64,"num_stages":3,"threads":256,"panel":16,"stream_k":true}'
F='{"block_M":128,"block_N":256,"block_K":128,"num_stages":3,"threads":256,"panel":8}'
export HOPPER_CONFIGS=${HOPPER_CONFIGS:-"[[$B,$S],[\"auto\",$F]]"} HOPPER_LLM_CONFIGS=${HOPPER_LLM_CONFIGS:-"[$S,$B]"}
export HOPPER_SMALL_CONFIGS='["auto"]' HOPPER_SMALL_EXTRA_CONFIGS='["auto"]' HOPPER_TOP_K=2
export HOPPER_SECTIONS=${HOPPER_SECTIONS:-sweep,large,fp8,ragged,llm}
export HOPPER_BUDGET_S=${HOPPER_BUDGET_S:-200} HOPPER_TIMEOUT=${HOPPER_TIMEOUT:-250}
bash tools/gpu_check.sh hopper
cat "${OUT:-/tmp/tilecore_gpu_check}/summary.md"
grep -E "stream-K check|ragged|FAILED|device copy|B.sum" "${OUT:-/tmp/tilecore_gpu_check}/hopper.log"
sed -n '/^| case/,$p' "${OUT:-/tmp/tilecore_gpu_check}/hopper.log"
