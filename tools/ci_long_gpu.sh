#!/usr/bin/env bash
# The --tile-long profile on a many-core machine (the lent GPU host: 16 cores), from a copied tree:
#   OUT=/tmp/out bash tools/ci_long_gpu.sh
# runs 10,000 generated programs per target of $TARGETS (default emu:sm_90) over $WORKERS (16)
# pytest-xdist workers for at most $EMU_TIMEOUT seconds; logs and the failing cases under $OUT.
#
# Nothing is installed: the backends' and the conformance plugin's entry points are declared by
# a dist-info folder made here (importlib.metadata finds it on PYTHONPATH), and the tree is
# byte-compiled once up front, so the workers neither run pip nor compile tilecore from source.
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-/tmp/tilecore_long}
mkdir -p "$OUT"
DIST=$ROOT/build/long-dist/tilecore_long_profile-0.dist-info
mkdir -p "$DIST"
printf 'Metadata-Version: 2.1\nName: tilecore-long-profile\nVersion: 0\n' >"$DIST/METADATA"
cat >"$DIST/entry_points.txt" <<'EOF'
[tilecore.backends]
interp = tilecore_interp.plugin
emu = tilecore_emu.plugin
cuda = tilecore_cuda.plugin
cuda-lowering = tilecore_cuda.lowering
hip = tilecore_hip.plugin
hip-lowering = tilecore_hip.lowering

[pytest11]
tilecore_conformance = tilecore_conformance.plugin
EOF
PP=$ROOT
for b in interp emu cuda hip; do PP=$PP:$ROOT/backends/$b; done
export PYTHONPATH=$PP:$ROOT/conformance:$ROOT/build/long-dist
export TILECORE_CONFORMANCE_DIR=/tmp/tcf TILECORE_CACHE_DIR=/tmp/tcc PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m compileall -q -j 0 tilecore backends/interp backends/emu backends/cuda backends/hip conformance \
  >"$OUT/compileall.log" 2>&1
{ nproc; lscpu | grep -E "Model name"; echo "compileall: $(( $(date +%s) - t0 )) s"; } >"$OUT/machine.txt"
targets=()
for t in ${TARGETS:-emu:sm_90}; do targets+=("--tile-target=$t"); done
t0=$(date +%s)
timeout "${EMU_TIMEOUT:-140}" python3 -m pytest -p no:cacheprovider -p no:warnings -v -rfE \
  -n "${WORKERS:-16}" --tile-failures-dir "$OUT/fail" conformance/tilecore_conformance/test_suite.py \
  -k generated --tile-long --tile-shards "${SHARDS:-400}" --tile-seed "${SEED:-1000}" "${targets[@]}" \
  >"$OUT/emu.log" 2>&1
echo "rc=$? wall=$(( $(date +%s) - t0 ))" >>"$OUT/emu.log"
for t in ${TARGETS:-emu:sm_90}; do
  echo "$t: $(grep -c "PASSED.*\[$t-" "$OUT/emu.log") shards passed, $(grep -c "FAILED.*\[$t-" "$OUT/emu.log") failed"
done
tail -3 "$OUT/emu.log"
[ -d "$OUT/fail" ] && tar -C "$OUT" -czf "$OUT/fail.tgz" fail && rm -rf "$OUT/fail"
true
