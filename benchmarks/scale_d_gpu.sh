#!/usr/bin/env bash
# One device call for the wgmma scale-d change (issue 10, helper gemm, session 10):
# install the tree, GPU correctness of the kernels it changes (the examples whose wgmma
# accumulators lost their clears: GEMM, fp8 GEMM, FlashAttention forward and backward), then
# the interleaved A/B timing (benchmarks/scale_d_ab.py). Run from the tree's root:
#   bash benchmarks/scale_d_gpu.sh        ($OUT, if set, receives ab.log)
# The tree is copied to a folder not named `gemm` first (see small_m_verify.sh: pytest's rootdir
# import would make `import gemm` the checkout).
rm -rf /tmp/tc && mkdir -p /tmp/tc && cp -r . /tmp/tc/tree && cd /tmp/tc/tree || exit 1
python3 -m pip install -q --no-build-isolation --no-deps -e . -e backends/interp -e backends/cuda \
  -e backends/emu -e conformance >/tmp/tc/pip.log 2>&1 || { tail -20 /tmp/tc/pip.log; exit 1; }
export PYTHONUNBUFFERED=1 TILECORE_CACHE_DIR=/tmp/tc/cache
OUT=${OUT:-/tmp/tc}
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
# SKIP_EXAMPLES=1 leaves the examples out; AB_ARGS adds scale_d_ab.py arguments (--only, --fa)
if [ "${SKIP_EXAMPLES:-0}" != 1 ]; then
  for ex in gemm gemm_fp8 flash_attention flash_attention_bwd; do
    timeout 90 python3 examples/$ex.py cuda 2>&1 | tail -2 &
  done
  wait
fi
timeout 220 python3 benchmarks/scale_d_ab.py --rounds "${ROUNDS:-3}" ${AB_ARGS:-} 2>&1 | tee "$OUT/ab.log"
