#!/usr/bin/env bash
# Issue 15's host-side figures on a GPU machine, in one go (BENCHMARKS.md, "Host overhead"):
# host_overhead.py's cuda cases with the breakdowns as the tree is (the lent machine sets PYTHONDONTWRITEBYTECODE=1, so
# every process compiles tilecore's source), then the gemm case again with tilecore
# byte-compiled as `pip install` leaves it (--bytecode-cache), then the launch tests on the GPU
# (prepared launches, CUDA-graph capture). AUTOTUNE=1 also runs
# benchmarks/autotune.py twice on one TILECORE_CACHE_DIR (the second run must compile nothing).
# Usage: bash benchmarks/host_gpu.sh OUTDIR   (from the repository root, tilecore installed)
set -u
out=${1:?output directory}
mkdir -p "$out"
env | grep -E '^(PYTHONDONTWRITEBYTECODE|PYTHONPYCACHEPREFIX)=' > "$out/env.txt"
python -c "import tilecore, sys; print(tilecore.__file__, sys.version)" >> "$out/env.txt" 2>&1
t0=$(date +%s)
timeout ${HOST_TIMEOUT:-60} python benchmarks/host_overhead.py --target cuda --cases gemm,call --parts \
    --out "$out/host.json" > "$out/host.txt" 2>&1; echo "host_overhead rc=$? $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
timeout ${PYC_TIMEOUT:-40} python benchmarks/host_overhead.py --target cuda --cases gemm --bytecode-cache \
    --out "$out/host_pyc.json" > "$out/host_pyc.txt" 2>&1; echo "host_overhead --bytecode-cache rc=$? $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
timeout ${TESTS_TIMEOUT:-45} python -m pytest -q -p no:cacheprovider backends/cuda/tests/test_cuda_launch.py \
    > "$out/launch_tests.txt" 2>&1; echo "launch tests rc=$? $(( $(date +%s) - t0 )) s: $(tail -1 "$out/launch_tests.txt")"
if [ "${AUTOTUNE:-0}" = 1 ]; then
  cache=$(mktemp -d /tmp/tilecore-autotune-XXXX)
  for run in 1 2; do
    t=$(date +%s)
    TILECORE_CACHE_DIR=$cache timeout 70 python benchmarks/autotune.py --target cuda \
        --out "$out/autotune$run.json" > "$out/autotune$run.txt" 2>&1
    echo "autotune run $run rc=$? $(( $(date +%s) - t )) s"; tail -3 "$out/autotune$run.txt"
  done
fi
grep -v "^ " "$out/host.txt" | head -30
tail -12 "$out/host_pyc.txt"
