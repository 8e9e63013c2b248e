"""Every example renders to CUDA that nvcc compiles for sm_80 and sm_90a (CI, no GPU needed),
and fp16/bf16 gemm uses the tensor cores through mma.sync."""

from __future__ import annotations

import pytest
from cuda_test_util import CI_ARCHS, example_cases, example_modules, example_resources, needs_nvcc, split

import tilecore


def cuda_source(mod, sizes: dict, arch: str = "sm_80") -> tuple[str, str]:
    """(entry name, CUDA source) of example `mod` at `sizes`, lowered for cuda:`arch`."""
    func = mod.program(**split(mod.program, sizes))
    kernel = tilecore.compile(func, out_idx=mod.OUT_IDX, target=f"cuda:{arch}")
    return kernel.artifact.rendered.entry, kernel.get_kernel_source()


@needs_nvcc
@pytest.mark.parametrize("arch", CI_ARCHS)
@pytest.mark.parametrize("mod, sizes", example_cases())
def test_example_compiles_with_nvcc(mod, sizes, arch):
    # its entry in the cubin of one batched nvcc run (a kernel that fails there is compiled
    # alone, and only its test fails, with nvcc's log)
    assert example_resources(mod, sizes, arch)["registers"] > 0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemm_uses_mma_sync(dtype):
    gemm = next(m for m in example_modules() if m.__name__ == "gemm")
    _, src = cuda_source(gemm, dict(M=128, N=128, K=64, dtype=dtype))
    ptx = "bf16" if dtype == "bfloat16" else "f16"
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{ptx}.{ptx}.f32" in src
    assert "ldmatrix.sync.aligned" in src


def test_kernel_source_is_cuda():
    mod = next(m for m in example_modules() if m.__name__ == "elementwise_add")
    _, src = cuda_source(mod, mod.TEST_SIZES[0])
    assert 'extern "C" __global__' in src
