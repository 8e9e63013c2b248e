#!/usr/bin/env bash
# Small-M call 3 (issue 10, helper gemm, session 8): the shipped choice ("auto" = small_m_config,
# split shapes through the workspace) on the five small-M shapes, then the GPU tests.
export HOPPER_SMALL_CONFIGS='["auto"]' HOPPER_SMALL_EXTRA_CONFIGS='["auto"]' HOPPER_SECTIONS=small
bash tools/gpu_check.sh hopper
timeout 60 python3 -m pytest -x -q -p no:cacheprovider backends/cuda/tests/test_cuda_small_m.py 2>&1 | tail -25
