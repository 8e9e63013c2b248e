#!/usr/bin/env bash
# Issue 15's host-side figures on a GPU machine, in one go (BENCHMARKS.md, "Host overhead"):
# host_overhead.py's cuda cases with the breakdowns, then benchmarks/autotune.py twice on one
# cache directory (the second run must read the search and compile nothing).
# Usage: bash benchmarks/host_gpu.sh OUTDIR   (from the repository root; PYTHONPATH as needed)
set -u
out=${1:?output directory}
mkdir -p "$out"
cache=$(mktemp -d /tmp/tilecore-autotune-XXXX)
env | grep -E '^(PYTHONDONTWRITEBYTECODE|PYTHONPYCACHEPREFIX)=' > "$out/env.txt"
python -c "import tilecore, sys; print(tilecore.__file__, sys.version)" >> "$out/env.txt" 2>&1
t0=$(date +%s)
timeout 60 python benchmarks/host_overhead.py --target cuda --cases gemm,call --parts \
    --out "$out/host.json" > "$out/host.txt" 2>&1; echo "host_overhead rc=$? $(( $(date +%s) - t0 )) s"
for run in 1 2; do
  t=$(date +%s)
  TILECORE_CACHE_DIR=$cache timeout 70 python benchmarks/autotune.py --target cuda \
      --out "$out/autotune$run.json" > "$out/autotune$run.txt" 2>&1
  echo "autotune run $run rc=$? $(( $(date +%s) - t )) s"; tail -3 "$out/autotune$run.txt"
done
tail -40 "$out/host.txt"
