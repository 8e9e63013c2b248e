"""T.floordiv / T.floormod and the bit operations render to CUDA that nvcc compiles (CI, no GPU)."""

import sys
from pathlib import Path

from cuda_test_util import CI_ARCHS, needs_nvcc
from tilecore_cuda import build

import tilecore

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
from test_int_ops import _bits_kernel  # noqa: E402 - the kernel the core tests check on interp


@needs_nvcc
def test_int_ops_compile_with_nvcc():
    for dtype in ("int32", "int8", "uint32", "int64"):
        src = tilecore.compile(_bits_kernel(dtype), out_idx=[-1], target="cuda:sm_80").get_kernel_source()
        assert "<<" in src and ">>" in src and "%" in src
        build.nvcc_check(src, CI_ARCHS, name=f"intops_{dtype}")


@needs_nvcc
def test_scalar_parameters_compile_with_nvcc():
    from test_scalar_params import _masked_scale

    src = tilecore.compile(_masked_scale(), out_idx=[-1], target="cuda:sm_80").get_kernel_source()
    assert "limit" in src and "shift" in src
    build.nvcc_check(src, CI_ARCHS, name="scalar_params")
