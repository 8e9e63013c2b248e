#!/usr/bin/env bash
# Stream-K on the H200 (issue 10 item 4): the shipped configs (examples/gemm.py `config`: stream-K
# where 128x256 tiles leave a partial wave; gemm_fp8 with stream_k) against the same tiles
# without stream-K, each beside cuBLAS / _scaled_mm in one process (benchmarks/hopper_gemm.py:
# do_bench medians, interleaved A/B, clocks), the LLM shapes, small M, and the ragged checks
# (stream-K against the plain kernel on the same inputs, repeat calls bit-identical).
# usage (on the lent GPU, from the repository root): bash benchmarks/stream_k_gpu.sh
set -uo pipefail
B='{"block_M":128,"block_N":256,"block_K":64,"num_stages":3,"threads":256,"panel":16}'
F='{"block_M":128,"block_N":256,"block_K":128,"num_stages":3,"threads":256,"panel":8,"stream_k":true}'
export HOPPER_CONFIGS="[[\"auto\",$B],[\"auto\",$F]]" HOPPER_LLM_CONFIGS="[\"auto\",$B]"
export HOPPER_SMALL_CONFIGS='["auto"]' HOPPER_SMALL_EXTRA_CONFIGS='["auto"]' HOPPER_TOP_K=2
export HOPPER_SECTIONS=${HOPPER_SECTIONS:-sweep,large,fp8,ragged,llm,small}
export HOPPER_BUDGET_S=${HOPPER_BUDGET_S:-200} HOPPER_TIMEOUT=${HOPPER_TIMEOUT:-250}
bash tools/gpu_check.sh hopper
cat "${OUT:-/tmp/tilecore_gpu_check}/summary.md"
grep -E "stream-K check|ragged|FAILED|device copy|B.sum" "${OUT:-/tmp/tilecore_gpu_check}/hopper.log"
sed -n '/^| case/,$p' "${OUT:-/tmp/tilecore_gpu_check}/hopper.log"
