#!/usr/bin/env bash
# Issue 15's host-side figures on a GPU machine, in one go (BENCHMARKS.md, "Host overhead"),
# ordered so the first process to compile on the machine is measured:
#  1. host_overhead.py --first: the 4096^3 GEMM's cold jit in the machine's first compiling
#     process (phases timed, the NVRTC reader thread's report), two compile-cache hits in new
#     processes, then a cold jit in a later process on another empty cache directory; tilecore
#     as the tree is (the lent machine sets PYTHONDONTWRITEBYTECODE=1: compiled from source);
#  2. the same hit with tilecore byte-compiled as `pip install` leaves it (--bytecode-cache);
#  3. the launch tests on the GPU (CUDA-graph capture and replay through cuLaunchKernelEx,
#     per-signature plans). CALL=1 adds the Kernel.__call__ case; AUTOTUNE=1 runs
#     benchmarks/autotune.py twice on one TILECORE_CACHE_DIR (the second must compile nothing).
# Usage: bash benchmarks/host_gpu.sh OUTDIR   (from the repository root). Short forms: FIRST_HITS=0
# SKIP_PYC=1 SKIP_TESTS=1 HOST_NO_PREWARM_TOO=1 (cold processes only, without and with the opt-in
# NVRTC reader thread, TILECORE_CUDA_PREWARM=1).
# COLD_ROUNDS=N first runs benchmarks/host_cold.py (N rounds of four cold configurations: tilecore
# installed or from source, reader thread on or off; then a cold profile); SKIP_FIRST=1 skips 1.
# Without an installed tilecore, the tree goes on PYTHONPATH and its entry points are declared
# by a metadata folder made here (no pip: nothing is built or fetched).
set -u
out=${1:?output directory}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if ! python -c "import sys, importlib.metadata as m; sys.exit(not any(e.name == 'cuda' for e in m.entry_points(group='tilecore.backends')))" 2>/dev/null; then
  shim=$(mktemp -d /tmp/tilecore-eps-XXXX)
  mkmeta() {  # NAME ENTRY_POINTS_TEXT
    mkdir -p "$shim/$1-0.0.dist-info"
    printf 'Metadata-Version: 2.1\nName: %s\nVersion: 0.0\n' "$1" > "$shim/$1-0.0.dist-info/METADATA"
    printf '%b' "$2" > "$shim/$1-0.0.dist-info/entry_points.txt"
  }
  mkmeta tilecore_cuda '[tilecore.backends]\ncuda = tilecore_cuda.plugin\ncuda-lowering = tilecore_cuda.lowering\n'
  mkmeta tilecore_interp '[tilecore.backends]\ninterp = tilecore_interp.plugin\n'
  mkmeta tilecore_conformance '[pytest11]\ntilecore_conformance = tilecore_conformance.plugin\n'
  export PYTHONPATH=$PWD:$PWD/backends/interp:$PWD/backends/cuda:$PWD/conformance:$shim${PYTHONPATH:+:$PYTHONPATH}
fi
{ env | grep -E '^(PYTHONDONTWRITEBYTECODE|PYTHONPYCACHEPREFIX)='
  python -c "import tilecore, sys; print(tilecore.__file__, sys.version.split()[0])"; } > "$out/env.txt" 2>&1
if [ "${DROP_CACHES:-0}" = 1 ]; then  # a machine used before: make the next process "first" again
  sync; if echo 3 2>/dev/null > /proc/sys/vm/drop_caches; then echo "page cache dropped" >> "$out/env.txt"
  else echo "page cache NOT dropped (no permission)" >> "$out/env.txt"; fi
fi
cat /proc/loadavg /proc/uptime >> "$out/env.txt" 2>/dev/null
cache=$(mktemp -d /tmp/tilecore-host-XXXX)
if [ -n "${COLD_ROUNDS:-}" ]; then  # the cold jit alternating installed/source x reader on/off
  t0=$(date +%s)
  timeout ${COLD_TIMEOUT:-60} python benchmarks/host_cold.py --rounds "$COLD_ROUNDS" ${COLD_CONFIGS:+--configs $COLD_CONFIGS} --out "$out/cold.json" \
      > "$out/cold.txt" 2>&1
  echo "host_cold rc=$? $(( $(date +%s) - t0 )) s"
  grep "^|" "$out/cold.txt"
fi
t0=$(date +%s)
[ "${SKIP_FIRST:-0}" = 1 ] || timeout ${FIRST_TIMEOUT:-45} python benchmarks/host_overhead.py --target cuda --cases gemm --first \
    --cache-dir "$cache" --hits ${FIRST_HITS:-2} --out "$out/first.json" > "$out/first.txt" 2>&1
echo "host_overhead --first rc=$? $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
[ "${SKIP_PYC:-0}" = 1 ] || timeout ${PYC_TIMEOUT:-25} python benchmarks/host_overhead.py --target cuda --cases gemm --bytecode-cache \
    --cache-dir "$cache" --hits ${PYC_HITS:-1} --out "$out/pyc.json" > "$out/pyc.txt" 2>&1
echo "host_overhead --bytecode-cache rc=$? $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
[ "${SKIP_TESTS:-0}" = 1 ] || timeout ${TESTS_TIMEOUT:-30} python -m pytest -q -p no:cacheprovider backends/cuda/tests/test_cuda_launch.py \
    -k "${TESTS_K:-graph or plans}" > "$out/launch_tests.txt" 2>&1
echo "launch tests rc=$? $(( $(date +%s) - t0 )) s: $(tail -1 "$out/launch_tests.txt")"
if [ "${CALL:-0}" = 1 ]; then
  timeout 30 python benchmarks/host_overhead.py --target cuda --cases call --out "$out/call.json" > "$out/call.txt" 2>&1
  echo "call rc=$?"
fi
if [ "${AUTOTUNE:-0}" = 1 ]; then
  atc=$(mktemp -d /tmp/tilecore-autotune-XXXX)
  for run in 1 2; do
    t=$(date +%s)
    TILECORE_CACHE_DIR=$atc timeout 70 python benchmarks/autotune.py --target cuda \
        --out "$out/autotune$run.json" > "$out/autotune$run.txt" 2>&1
    echo "autotune run $run rc=$? $(( $(date +%s) - t )) s"; tail -3 "$out/autotune$run.txt"
  done
fi
cat "$out/env.txt"
grep "^|" "$out/first.txt" 2>/dev/null
grep -E "hit, new process|discovery \+ jit|bytecode" "$out/pyc.txt" 2>/dev/null
grep -E "passed|failed|error" "$out/launch_tests.txt" 2>/dev/null | tail -3
python - "$out/first.json" <<'PY' 2>/dev/null
import json, sys
r = json.load(open(sys.argv[1]))
for key in ("gemm_cold", "gemm_cold_later", "gemm_cold_later_prewarm"):
    pw = r.get(key, {}).get("prewarm", {})
    big = [f"{p.rsplit('/', 1)[-1]} {n / 1e6:.1f} MB {t * 1e3:.0f} ms" for p, n, t in pw.get("files", ()) if n > 1e6]
    print(key, "reader:", {k: v for k, v in pw.items() if k != "files"}, big)
PY
