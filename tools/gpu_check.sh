#!/usr/bin/env bash
# The one script for the lent GPU machine: install tilecore offline, then run the CUDA backend's
# tests, every example, the conformance suite on `cuda` against interp, and the benchmarks.
# Writes logs and a pass/fail table (summary.md) under $OUT; prints the table last.
#
# usage: bash tools/gpu_check.sh [STAGE ...]     stages: tests examples conformance bench sass sanitize
#        bench80 hopper (default: the first five). `hopper`: benchmarks/hopper_gemm.py (see its stage). `bench80`: benchmarks/gpu.py lowered for sm_80 (the
#        mma.sync + cp.async path on this GPU) with every GEMM config also run with the
#        fragment-pipeline pass off unless GPU_FRAGMENT_AB=0 (GPU_GEMM_CONFIGS / GPU_FA_CONFIGS /
#        GPU_ROW_CONFIGS may give the configs as JSON; GPU_CASES, GPU_GEMM_CASES, GPU_TOP_K narrow it). CONFORMANCE_EXAMPLES (default 600) sets the number of programs.
#        `sass` (after `bench`, which it reads for the chosen configs) disassembles the best GEMM,
#        both attention kernels and the row kernels as tilecore builds them (NVRTC) and puts the
#        instruction counts (LDGSTS, LDSM, HMMA, HGMMA, STG.E.128, LDL/STL, ...) in the summary;
#        the nvcc -Xptxas -v register/spill report of the same kernels goes to sass.log.
#        EXAMPLE_JOBS=N runs N examples at once; SKIP_INSTALL=1 skips the offline install (for
#        several invocations running concurrently after one that installed).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tilecore_gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TILECORE_CACHE_DIR=${TILECORE_CACHE_DIR:-/tmp/tilecore_cache}
PY=${PYTHON:-python3}
STAGES=${*:-tests examples conformance bench sass}
SUMMARY="$OUT/summary.md"
echo "| stage | result | detail | seconds |" >"$SUMMARY"
echo "|---|---|---|---|" >>"$SUMMARY"

row() { echo "| $1 | $2 | $3 | $4 |" >>"$SUMMARY"; }

# pytest's closing line ("3 passed, 1 failed in 2.1s") from a log, for the table.
pytest_line() { grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$1" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//'; }

{
  echo "## machine"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
  $PY -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, torch.version.cuda)'
  $PY -c 'import cuda.bindings as c; print("cuda-bindings", c.__version__)'
  nvcc --version | tail -1
} >"$OUT/env.log" 2>&1

# Offline install: setuptools is on the machine, nothing is fetched.
pkgs=(-e . -e backends/interp -e backends/cuda)
[ -f conformance/pyproject.toml ] && pkgs+=(-e conformance)
# SKIP_INSTALL=1: an earlier invocation on this machine installed the tree (lets several stages
# run as concurrent invocations without racing pip over one site-packages).
if [ "${SKIP_INSTALL:-0}" != 1 ] && ! $PY -m pip install -q --no-build-isolation --no-deps "${pkgs[@]}" >>"$OUT/env.log" 2>&1; then
  row install FAIL "pip install -e (see env.log)" 0; cat "$SUMMARY"; exit 1
fi
$PY -c 'import tilecore.plugins as p; print("targets:", p.targets(runnable_only=True))' >>"$OUT/env.log" 2>&1
row install ok "$(tail -1 "$OUT/env.log")" 0

for stage in $STAGES; do
  t0=$(date +%s)
  case $stage in
  tests)
    timeout "${TESTS_TIMEOUT:-150}" $PY -m pytest -q -rfE -p no:cacheprovider -n 8 backends/cuda/tests \
      >"$OUT/cuda_tests.log" 2>&1
    rc=$?
    row "cuda tests" "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$(pytest_line "$OUT/cuda_tests.log")" $(($(date +%s) - t0))
    # the conformance suite's fixed programs (regressions: wide-integer reductions, ...) and the
    # example corpus, on the GPU against interp
    t1=$(date +%s)
    timeout "${TESTS_TIMEOUT:-150}" $PY -m pytest -q -rfE -p no:cacheprovider -n 8 --tile-target=cuda \
      conformance/tilecore_conformance/test_suite.py -k "regression or corpus" >"$OUT/cuda_fixed.log" 2>&1
    rc=$?
    row "conformance fixed programs + corpus (cuda)" "$([ $rc = 0 ] && echo PASS || echo FAIL)" \
      "$(pytest_line "$OUT/cuda_fixed.log")" $(($(date +%s) - t1))
    ;;
  examples)
    : >"$OUT/examples.log"
    # EXAMPLE_JOBS=N runs N examples at a time (correctness only: their own timings then overlap);
    # each writes its own log, appended in order afterwards.
    mkdir -p "$OUT/example_logs"
    run_example() {  # FILE -> "rc seconds" in example_logs/NAME.rc
      local f=$1 n t1; n=$(basename "$f" .py); t1=$(date +%s)
      timeout "${EXAMPLE_TIMEOUT:-30}" $PY "$f" cuda >"$OUT/example_logs/$n.log" 2>&1
      echo "$? $(($(date +%s) - t1))" >"$OUT/example_logs/$n.rc"
    }
    jobs_max=${EXAMPLE_JOBS:-1}
    for f in examples/*.py; do
      run_example "$f" &
      while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
    done
    wait
    for f in examples/*.py; do
      n=$(basename "$f" .py); read -r rc secs <"$OUT/example_logs/$n.rc"
      cat "$OUT/example_logs/$n.log" >>"$OUT/examples.log"
      row "example $n" "$([ "$rc" = 0 ] && echo PASS || echo "FAIL (rc $rc)")" "python $f cuda" "$secs"
    done
    rm -rf "$OUT/example_logs"
    ;;
  conformance)
    if ! $PY -c 'import tilecore_conformance.suite' 2>/dev/null; then
      row conformance SKIP "tilecore-conformance not installed" 0; continue
    fi
    # Shards over every visible GPU, WORKERS_PER_GPU workers each; workers draw different
    # programs (derandomize off), so N programs in all run in parallel (tilecore_conformance.shard).
    CONFORMANCE_EXAMPLES=${CONFORMANCE_EXAMPLES:-600}
    timeout "${CONFORMANCE_TIMEOUT:-240}" $PY -m tilecore_conformance.shard \
      --target "${CONFORMANCE_TARGET:-cuda}" --programs "$CONFORMANCE_EXAMPLES" \
      --workers-per-device "${WORKERS_PER_GPU:-8}" >/tmp/conformance_full.log 2>&1
    rc=$?
    # Keep what comes back small: the head (first failures) and the tail (the totals).
    { head -c 2000000 /tmp/conformance_full.log; echo "[...]"; tail -c 2000000 /tmp/conformance_full.log; } \
      >"$OUT/conformance.log"
    row "conformance (${CONFORMANCE_TARGET:-cuda} vs interp, sharded over GPUs)" "$([ $rc = 0 ] && echo PASS || echo "FAIL (rc $rc)")" \
      "$(grep '^CONFORMANCE' "$OUT/conformance.log" | tail -1)" $(($(date +%s) - t0))
    ;;
  bench)
    timeout "${BENCH_TIMEOUT:-240}" $PY benchmarks/gpu.py --out "$OUT/bench.json" >"$OUT/bench.log" 2>&1
    rc=$?
    row benchmarks "$([ $rc = 0 ] && echo done || echo "FAIL (rc $rc)")" "bench.log, bench.json" $(($(date +%s) - t0))
    # attention (forward, backward, decoding, MLA): cases stop starting after ATTN_BENCH_BUDGET_S
    t0=$(date +%s)
    ATTN_BENCH_BUDGET_S=${ATTN_BENCH_BUDGET_S:-170} timeout "${ATTN_BENCH_TIMEOUT:-240}" $PY benchmarks/attention.py \
      --out "$OUT/attention.json" >"$OUT/attention.log" 2>&1
    rc=$?
    row "attention benchmarks" "$([ $rc = 0 ] && echo done || echo "FAIL (rc $rc)")" "attention.log, attention.json" \
      $(($(date +%s) - t0))
    # host-side costs: compile-cache hit in a new process, cold compile, Kernel.__call__, targets()
    t1=$(date +%s)
    timeout "${HOST_BENCH_TIMEOUT:-120}" $PY benchmarks/host_overhead.py --target cuda --cases gemm,call \
      --out "$OUT/host_overhead.json" >"$OUT/host_overhead.log" 2>&1
    rc=$?
    row "host overhead" "$([ $rc = 0 ] && echo done || echo "FAIL (rc $rc)")" "host_overhead.log, host_overhead.json" \
      $(($(date +%s) - t1))
    ;;
  hopper)
    # the Hopper GEMM benchmark (TMA + wgmma, small M, fp8; benchmarks/hopper_gemm.py): its
    # sections from HOPPER_SECTIONS, configs from HOPPER_CONFIGS / HOPPER_LLM_CONFIGS /
    # HOPPER_SMALL_CONFIGS (JSON) when set; no new case starts after HOPPER_BUDGET_S
    timeout "${HOPPER_TIMEOUT:-230}" $PY benchmarks/hopper_gemm.py --out "$OUT/hopper.json" \
      --sections "${HOPPER_SECTIONS:-sweep,large,llm,small,fp8,ragged}" --budget "${HOPPER_BUDGET_S:-200}" \
      >"$OUT/hopper.log" 2>&1
    rc=$?
    row "hopper GEMM benchmark" "$([ $rc = 0 ] && echo done || echo "FAIL (rc $rc)")" "hopper.log, hopper.json" \
      $(($(date +%s) - t0))
    ;;
  bench80)
    # GPU_CASES / GPU_GEMM_CASES / GPU_TOP_K narrow the run (benchmarks/gpu.py --cases, ...);
    # GPU_FRAGMENT_AB=0 drops the fragment-pipeline-off twin of every GEMM config
    b80=(--arch sm_80 --out "$OUT/bench80.json" --cases "${GPU_CASES:-gemm,attention,softmax,rmsnorm,layernorm}"
         --top-k "${GPU_TOP_K:-3}")
    [ "${GPU_FRAGMENT_AB:-1}" = 1 ] && b80+=(--fragment-ab)
    [ -n "${GPU_GEMM_CASES:-}" ] && b80+=(--gemm-cases "$GPU_GEMM_CASES")
    timeout "${BENCH_TIMEOUT:-240}" $PY benchmarks/gpu.py "${b80[@]}" >"$OUT/bench80.log" 2>&1
    rc=$?
    row "benchmarks, mma.sync path (lowered for sm_80)" "$([ $rc = 0 ] && echo done || echo "FAIL (rc $rc)")" \
      "bench80.log, bench80.json" $(($(date +%s) - t0))
    ;;
  sass)
    # The SASS of what the benchmark chose (bench.json), or of its default configs without it.
    mkdir -p "$OUT/sass"
    timeout "${SASS_TIMEOUT:-180}" $PY tools/sass_counts.py --from-bench "$OUT/bench.json" --compiler tilecore \
      --sass-dir "$OUT/sass" >"$OUT/sass_tilecore.log" 2>&1
    rc=$?
    grep -a '^SASS' "$OUT/sass_tilecore.log" | while IFS= read -r line; do
      row "sass" "$([[ $line == *FAILED* ]] && echo FAIL || echo ok)" "${line#SASS }" 0
    done
    [ $rc = 0 ] || row "sass (tilecore build)" "FAIL (rc $rc)" "see sass_tilecore.log" $(($(date +%s) - t0))
    timeout "${SASS_TIMEOUT:-180}" $PY tools/sass_counts.py --from-bench "$OUT/bench.json" --compiler nvcc \
      >"$OUT/sass.log" 2>&1
    rc=$?
    row "sass (nvcc -Xptxas -v)" "$([ $rc = 0 ] && echo done || echo "FAIL (rc $rc)")" \
      "registers/spills per kernel in sass.log" $(($(date +%s) - t0))
    ;;
  sanitize)
    # Shared-memory hazards on real hardware (the barriers lowering inserted), on one GEMM.
    if ! command -v compute-sanitizer >/dev/null; then row sanitize SKIP "no compute-sanitizer" 0; continue; fi
    timeout "${SANITIZE_TIMEOUT:-120}" compute-sanitizer --tool racecheck --error-exitcode 3 \
      $PY examples/gemm.py "${SANITIZE_TARGET:-cuda}" >/tmp/sanitize_full.log 2>&1
    rc=$?
    { head -c 1000000 /tmp/sanitize_full.log; echo "[...]"; tail -c 1000000 /tmp/sanitize_full.log; } \
      >"$OUT/sanitize.log"
    row "racecheck examples/gemm.py ${SANITIZE_TARGET:-cuda}" "$([ $rc = 0 ] && echo PASS || echo "FAIL (rc $rc)")" \
      "$(grep -a 'RACECHECK SUMMARY\|ERROR SUMMARY' "$OUT/sanitize.log" | tail -1)" $(($(date +%s) - t0))
    ;;
  *) row "$stage" SKIP "unknown stage" 0 ;;
  esac
done

echo
[ -f "$OUT/bench.log" ] && sed -n '/^| case/,$p' "$OUT/bench.log"
[ -f "$OUT/attention.log" ] && sed -n '/^| case/,$p' "$OUT/attention.log"
[ -f "$OUT/bench80.log" ] && sed -n '/^| case/,$p' "$OUT/bench80.log"
[ -f "$OUT/hopper.log" ] && sed -n '/^device copy\|^[0-9]*x[0-9]*x[0-9]*: B.sum\|ragged\|FAILED\|L2 flushed by a read/p; /^| case/,$p' "$OUT/hopper.log"
echo
cat "$SUMMARY"
