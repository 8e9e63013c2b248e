#!/usr/bin/env bash
# decoding/forward A/B on the H200 (branch attn, session 10): install, compile the plan's
# kernels in parallel into the cache, then the interleaved timing in one process
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 TILECORE_CACHE_DIR=/tmp/tccache
PLAN=${PLAN:-benchmarks/attention_plan_dec2.json}
python3 -m pip install -q --no-build-isolation --no-deps -e . -e backends/interp -e backends/cuda > $OUT/pip.log 2>&1 || { tail -5 $OUT/pip.log; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
n=$(python3 benchmarks/attention_ab.py --jobs "$(cat $PLAN)")
seq 0 $((n - 1)) | xargs -P 14 -I{} sh -c "python3 benchmarks/attention_ab.py --build sm_90a \"\$(cat $PLAN)\" --job {} >> $OUT/build.log 2>&1"
echo "built $n in $(( $(date +%s) - t0 )) s: $(grep -c 'kernels built' $OUT/build.log) ok"
t1=$(date +%s)
timeout 420 python3 benchmarks/attention_ab.py "$(cat $PLAN)" 2>&1 | tee $OUT/ab.log | grep -v Warning
echo "timed in $(( $(date +%s) - t1 )) s"
