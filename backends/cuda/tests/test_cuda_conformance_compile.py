"""A sample of conformance-generated programs renders to CUDA that nvcc compiles for sm_80 and
sm_90a (CI, no GPU). Running them against interp is the conformance suite's job on the H200."""

from __future__ import annotations

import pytest
from cuda_test_util import CI_ARCHS, needs_nvcc
from hypothesis import HealthCheck, given, settings
from tilecore_cuda import build

import tilecore

conf = pytest.importorskip("tilecore_conformance", reason="tilecore-conformance is not installed")
from tilecore_conformance.generate import cases  # noqa: E402
from tilecore_conformance.loader import prim_func  # noqa: E402
from tilecore_conformance.regressions import REGRESSIONS  # noqa: E402
from tilecore_conformance.runner import unsupported  # noqa: E402


@needs_nvcc
@settings(max_examples=12, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(cases())
def test_generated_programs_compile_with_nvcc(case):
    if unsupported(case, "cuda:sm_80"):
        return
    kernel = tilecore.compile(prim_func(case), target="cuda:sm_80")
    build.nvcc_check(kernel.get_kernel_source(), CI_ARCHS, name=f"case_{case.key}")


@needs_nvcc
@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression_programs_compile_with_nvcc(name):
    """The wide-integer reductions the GPU suite runs (test_cuda_gpu) compile for CI's archs,
    and accumulate in 64 bits (`long long`) as tilecore.semantics says."""
    case = REGRESSIONS[name]
    src = tilecore.compile(prim_func(case), target="cuda:sm_80").get_kernel_source()
    build.nvcc_check(src, CI_ARCHS, name=f"regression_{name}")
    assert "long long" in src
