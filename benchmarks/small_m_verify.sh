#!/usr/bin/env bash
# Small-M call 3 (issue 10, helper gemm, session 8): the GPU tests of test_cuda_small_m.py (the
# workspace split-K on ragged shapes, twice per workspace) and the shipped choice ("auto" =
# small_m_config, split shapes through the workspace) at 1x1024x16384 and 1x4096x4096.
# The tree is copied to a folder not named `gemm` first: the repository root has an
# __init__.py, so from a checkout folder named gemm, pytest's rootdir import makes `import gemm`
# the checkout itself instead of examples/gemm.py (why every test of that file failed in call 2).
rm -rf /tmp/tc && mkdir -p /tmp/tc && cp -r . /tmp/tc/tree && cd /tmp/tc/tree || exit 1
python3 -m pip install -q --no-build-isolation --no-deps -e . -e backends/interp -e backends/cuda -e conformance >/dev/null 2>&1
timeout 90 python3 -m pytest -q -p no:cacheprovider -rfE backends/cuda/tests/test_cuda_small_m.py 2>&1 | tail -8
export HOPPER_SMALL_CONFIGS='["auto"]' HOPPER_SMALL_EXTRA_CONFIGS='["auto"]' HOPPER_PAIRED=1
timeout 60 python3 benchmarks/hopper_gemm.py --sections small 2>&1 | grep -E "^\| gemm|FAILED|err" | tail -8
