"""A sample of conformance-generated programs renders to CUDA that nvcc compiles for sm_80 and
sm_90a (CI, no GPU). Running them against interp is the conformance suite's job on the H200."""

from __future__ import annotations

import pytest
from cuda_test_util import CI_ARCHS, batched_resources, needs_nvcc
from hypothesis import HealthCheck, given, settings
from tilecore_cuda import build
from tilecore_cuda.batch import batch_source

import tilecore

conf = pytest.importorskip("tilecore_conformance", reason="tilecore-conformance is not installed")
from tilecore_conformance.generate import cases  # noqa: E402
from tilecore_conformance.loader import prim_func  # noqa: E402
from tilecore_conformance.regressions import REGRESSIONS  # noqa: E402
from tilecore_conformance.runner import unsupported  # noqa: E402


@needs_nvcc
def test_generated_programs_compile_with_nvcc():
    """12 generated programs, built by one nvcc run (both archs, `tilecore_cuda.batch`); when
    it fails, each program alone, so the error names the program nvcc rejects."""
    sources: list[tuple[str, str, str]] = []

    @settings(max_examples=12, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(cases())
    def lower(case):
        if unsupported(case, "cuda:sm_80"):
            return
        kernel = tilecore.compile(prim_func(case), target="cuda:sm_80")
        sources.append((f"case_{case.key}", kernel.artifact.rendered.entry, kernel.get_kernel_source()))

    lower()
    assert sources
    try:
        build.nvcc_check(batch_source([(e, s) for _, e, s in sources]), CI_ARCHS, name="generated")
    except build.CudaCompileError:
        for name, _, src in sources:
            build.nvcc_check(src, CI_ARCHS, name=name)  # raises for the first program nvcc rejects
        raise


REGRESSION_KERNELS = [(name, arch) for arch in CI_ARCHS for name in sorted(REGRESSIONS)]


def _regression_kernel(i: int) -> tuple[str, str, str]:
    name, arch = REGRESSION_KERNELS[i]
    # the sm_80 lowering built for both archs, as the GPU suite runs it
    kernel = tilecore.compile(prim_func(REGRESSIONS[name]), target="cuda:sm_80")
    return kernel.artifact.rendered.entry, kernel.get_kernel_source(), arch


@needs_nvcc
@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression_programs_compile_with_nvcc(name):
    """The regression programs the GPU suite runs (test_cuda_gpu) compile for CI's archs
    (nvcc builds them in batches shared by the run's workers); the wide-integer reductions
    accumulate in 64 bits (`long long`) as tilecore.semantics says, and a negative bound
    against an unsigned value stays signed."""
    for arch in CI_ARCHS:
        res = batched_resources("regressions", REGRESSION_KERNELS.index((name, arch)),
                                len(REGRESSION_KERNELS), _regression_kernel)
        assert "error" not in res, res.get("error")
    src = tilecore.compile(prim_func(REGRESSIONS[name]), target="cuda:sm_80").get_kernel_source()
    if name.startswith(("negative_bound", "compare_constants")):  # constants stay signed values
        assert "-1u" not in src and "-2u" not in src
        assert "<= -1)" in src or "<= ((long long)(-1)))" in src or "== -1)" in src \
            or "== ((long long)(-1)))" in src
    else:
        assert "long long" in src
