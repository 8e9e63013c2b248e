#!/usr/bin/env bash
# One device call for programmatic dependent launch (issue 10, helper gemm, session 10):
# install the tree, the launch tests on the GPU, then the interleaved A/B timing
# (benchmarks/pdl_ab.py). Run from the tree's root:  bash benchmarks/pdl_gpu.sh
# ($OUT, if set, receives ab.log). The tree is copied to a folder not named `gemm` first
# (small_m_verify.sh: pytest's rootdir import would make `import gemm` the checkout).
rm -rf /tmp/tc && mkdir -p /tmp/tc && cp -r . /tmp/tc/tree && cd /tmp/tc/tree || exit 1
python3 -m pip install -q --no-build-isolation --no-deps -e . -e backends/interp -e backends/cuda \
  -e backends/emu -e conformance >/tmp/tc/pip.log 2>&1 || { tail -20 /tmp/tc/pip.log; exit 1; }
export PYTHONUNBUFFERED=1 TILECORE_CACHE_DIR=/tmp/tc/cache
OUT=${OUT:-/tmp/tc}
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 60 python3 -m pytest -q -x -p no:cacheprovider backends/cuda/tests/test_cuda_launch.py 2>&1 | tail -3
timeout "${AB_TIMEOUT:-300}" python3 benchmarks/pdl_ab.py --rounds "${ROUNDS:-3}" ${AB_ARGS:-} 2>&1 | tee "$OUT/ab.log"
