#!/usr/bin/env bash
# The --tile-long profile on a many-core machine (the lent GPU host: 16 cores), from a copied tree:
#   OUT=/tmp/out bash tools/ci_long_gpu.sh
# runs 10,000 generated programs on $TARGET (default emu:sm_90) over 16 pytest-xdist workers, then
# $CPU_PROGRAMS (default 1600) on cpu in the time left of $BUDGET seconds; logs under $OUT.
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tilecore_long}
mkdir -p "$OUT"
[ -n "${SKIP_INSTALL:-}" ] || python -m pip install -q --no-deps --no-build-isolation -e . -e backends/interp -e backends/emu \
  -e backends/cuda -e backends/cpu -e conformance >"$OUT/install.log" 2>&1
export TILECORE_CONFORMANCE_DIR=/tmp/tcf TILECORE_CACHE_DIR=/tmp/tcc PYTHONUNBUFFERED=1
{ nproc; lscpu | grep -E "Model name"; } >"$OUT/machine.txt"
start=$(date +%s)
long() {  # long LOG TIMEOUT PYTEST-ARGS...
  local log=$1 t0; t0=$(date +%s); shift
  timeout "$1" python -m pytest -p no:cacheprovider -p no:warnings -v -rfE -n "${WORKERS:-16}" \
    --tile-failures-dir "$OUT/fail" conformance/tilecore_conformance/test_suite.py -k generated \
    "${@:2}" >"$OUT/$log" 2>&1
  echo "rc=$? wall=$(( $(date +%s) - t0 ))" >>"$OUT/$log"
  echo "$log: $(grep -c PASSED "$OUT/$log") shards passed, $(grep -c FAILED "$OUT/$log") failed"
  grep -E "^TOTAL|^profile|^rc=|passed|failed" "$OUT/$log" | tail -6
}
long emu.log "${EMU_TIMEOUT:-140}" --tile-long --tile-shards 400 --tile-seed 1000 \
  --tile-target="${TARGET:-emu:sm_90}"
left=$(( ${BUDGET:-200} - ($(date +%s) - start) ))
[ "$left" -gt 20 ] && long cpu.log "$left" --tile-long --tile-examples "${CPU_PROGRAMS:-1600}" \
  --tile-shards 64 --tile-seed 1000 --tile-target=cpu
