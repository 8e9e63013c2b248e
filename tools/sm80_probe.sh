#!/usr/bin/env bash
# One device call for benchmarks/sm80_probe.py: offline install, the ablation timings and the
# mma.sync peak, then Nsight Compute's stall/pipe/bank-conflict sections of the base kernel.
# Usage (on the GPU machine, from the repository root): bash tools/sm80_probe.sh [bm bn bk st th]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/sm80_probe}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TILECORE_CACHE_DIR=${TILECORE_CACHE_DIR:-/tmp/tilecore_cache}
python3 -m pip install -q --no-build-isolation --no-deps -e . -e backends/interp -e backends/cuda >"$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >>"$OUT/env.log" 2>&1
timeout "${PROBE_TIMEOUT:-120}" python3 benchmarks/sm80_probe.py "$@" 2>&1 | tee "$OUT/probe.log"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv
PROBE_NCU_ONLY=1 timeout "${NCU_TIMEOUT:-90}" ncu --clock-control none --section SpeedOfLight \
  --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis_Tables --section SourceCounters -k gemm -c 1 python3 benchmarks/sm80_probe.py "$@" >"$OUT/ncu.txt" 2>&1
echo "ncu rc $?"
grep -E "Duration|SM Frequency|Tensor|Issue Slots|Stall|stall|Bank|Eligible|Active Warps|Compute \(SM\)|Memory Throughput|No Eligible|Warp Cycles" "$OUT/ncu.txt" | head -60
