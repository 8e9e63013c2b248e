"""The TMA GEMM asks the descriptor cache for its tensor maps at the kernel's start
(`prefetch.tensormap`, tilecore_cuda/render_async.py), so the first bulk copy of a short
small-M GEMM does not fetch its descriptor on the critical path; nvcc turns it into
`UTMACCTL.PF`, one per map. Kernels without TMA (sm_80) do not get it."""

from __future__ import annotations

import os
import subprocess

import pytest
from cuda_test_util import example_modules, needs_nvcc
from tilecore_cuda.build import nvcc_path

import tilecore

CUOBJDUMP = os.environ.get("CUOBJDUMP") or \
    "/work/sass-venv/lib/python3.11/site-packages/triton/backends/nvidia/bin/cuobjdump"


def _source(arch: str, **kw) -> str:
    gemm = next(m for m in example_modules() if m.__name__ == "gemm")
    return tilecore.compile(gemm.program(**kw), out_idx=[-1], target=f"cuda:{arch}").get_kernel_source()


SMALL_M = dict(M=1, N=1024, K=1024, block_M=16, block_N=32, block_K=256, num_stages=4, threads=128,
               b_eviction="evict_first")


def test_every_tensor_map_is_prefetched_once_by_one_thread():
    src = _source("sm_90a", **SMALL_M)
    maps = sorted({w for w in src.replace("(", " ").replace(")", " ").replace("&", " ").split()
                   if w.startswith("tilecore_tmap") and w[len("tilecore_tmap"):].isdigit()})
    assert maps  # the small-M GEMM is a TMA pipeline
    for name in maps:
        stmt = ('asm volatile("prefetch.tensormap [%0];" :: '
                f'"l"(reinterpret_cast<unsigned long long>(&{name})) : "memory");')
        assert src.count(stmt) == 1
    head = src.index("if (threadIdx.x == 0) {\n    asm volatile(\"prefetch.tensormap")
    assert head < src.index("cp.async.bulk.tensor")  # before the first copy can be issued
    assert "prefetch.tensormap" not in _source("sm_80", **SMALL_M)


@needs_nvcc
@pytest.mark.skipif(not os.path.isfile(CUOBJDUMP), reason="cuobjdump is not installed")
def test_prefetch_is_a_descriptor_cache_op_in_sass(tmp_path):
    src = _source("sm_90a", **SMALL_M)
    cu, cubin = tmp_path / "k.cu", tmp_path / "k.cubin"
    cu.write_text(src)
    subprocess.run([nvcc_path(), "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-o", str(cubin),
                    str(cu)], capture_output=True, text=True, check=True)
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    assert sass.count("UTMACCTL.PF") == src.count("prefetch.tensormap") >= 2
