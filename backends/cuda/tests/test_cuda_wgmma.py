"""Hopper wgmma in CUDA: the sm_90a GEMM source has `wgmma.mma_async` with descriptors and the
fence / commit / wait of the asynchronous model; nvcc compiles it to `HGMMA` (fp8: `QGMMA`)
with no local-memory spills; `cuda:sm_90` kernels that use wgmma build as sm_90a; the
descriptor encoding (bits of PTX's matrix-descriptor format) from a MatrixDesc."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest
from cuda_test_util import EXAMPLES, needs_nvcc
from tilecore_cuda.build import nvcc_path
from tilecore_cuda.render_wgmma import desc_high_bits

import tilecore
from tilecore.ir.intrinsic import MatrixDesc

CUOBJDUMP = os.environ.get("CUOBJDUMP") or \
    "/work/sass-venv/lib/python3.11/site-packages/triton/backends/nvidia/bin/cuobjdump"
needs_cuobjdump = pytest.mark.skipif(not os.path.isfile(CUOBJDUMP), reason="cuobjdump is not installed")
if EXAMPLES not in sys.path:  # the kernels are the example scripts (no test order dependency)
    sys.path.insert(0, EXAMPLES)


def _gemm_source(target="cuda:sm_90a", pass_configs=None, **kw) -> str:
    gemm = importlib.import_module("gemm")
    return tilecore.compile(gemm.program(**kw), out_idx=[-1], target=target,
                            pass_configs=pass_configs).get_kernel_source()


def _compile(src: str, tmp_path) -> tuple[str, str]:
    """(ptxas -v log, SASS) of `src` built by nvcc for sm_90a."""
    cu, cubin = tmp_path / "k.cu", tmp_path / "k.cubin"
    cu.write_text(src)
    res = subprocess.run([nvcc_path(), "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17",
                          "-Xptxas", "-v", "-o", str(cubin), str(cu)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    sass = ""
    if os.path.isfile(CUOBJDUMP):
        sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
    return res.stderr + res.stdout, sass


def test_sm_90a_gemm_source_has_wgmma_and_its_fences():
    # the cp.async pipeline (TMA stages: test_cuda_tma.py)
    src = _gemm_source(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=64, num_stages=3,
                       pass_configs={"tl.disable_tma_lower": True})
    loop = src[src.index("for (int k"):]
    order = ["cp.async.wait_group", "__syncthreads()", "fence.proxy.async.shared::cta",
             "wgmma.fence.sync.aligned", "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
             "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned 0"]
    pos = [loop.index(w) for w in order]
    assert pos == sorted(pos), order
    assert loop.count("wgmma.mma_async") == 8  # 4 k steps x 2 m tiles of 64 rows
    assert "__align__(1024)" in src  # 128B-swizzled operands: base on the 1024-byte pattern
    assert "ldmatrix" not in src


def test_cuda_sm_90_kernels_with_wgmma_build_for_sm_90a(monkeypatch):
    import tilecore_cuda.artifact as artifact

    seen = {}

    class Spy(artifact.CudaArtifact):
        def __init__(self, rendered, arch, eager, **kw):
            seen["arch"] = arch
            super().__init__(rendered, arch, eager=False, **kw)

    monkeypatch.setattr(artifact, "CudaArtifact", Spy)
    src = _gemm_source("cuda:sm_90", M=256, N=256, K=256, block_M=128, block_N=128, block_K=64)
    assert "wgmma.mma_async" in src and seen["arch"] == "sm_90a"


@needs_nvcc
@needs_cuobjdump
@pytest.mark.parametrize("block_N, block_K, threads", [(128, 64, 128), (256, 64, 256)])
def test_sm_90a_gemm_sass_has_hgmma_and_no_spills(block_N, block_K, threads, tmp_path):
    src = _gemm_source(M=4096, N=4096, K=4096, block_M=128, block_N=block_N, block_K=block_K,
                       num_stages=3, threads=threads)
    log, sass = _compile(src, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in log and "0 bytes stack frame" in log
    # the operands arrive by TMA on sm_90a (tilecore.lower.tma_pipeline), not cp.async
    assert "HGMMA.64x" in sass and "UTMALDG" in sass and "LDGSTS" not in sass
    assert "HMMA" not in sass.replace("HGMMA", "")


@needs_nvcc
@needs_cuobjdump
def test_stream_k_gemm_keeps_one_wgmma_group_in_flight(tmp_path):
    """The stream-K 8192^3 kernel (tilecore.lower.stream_k): both copies of the main loop (the
    data-parallel tiles and the stream-K units) wait with one group in flight, and nothing
    else waits for the tensor cores (a vector access of the accumulator registers in the
    partial-tile hand-over once made ptxas wait after every HGMMA: 15-22% slower on the H200)."""
    gemm = importlib.import_module("gemm")
    cfg = gemm.config(8192, 8192, 8192)
    assert cfg["stream_k"]
    src = tilecore.compile(gemm.program(M=8192, N=8192, K=8192, dtype="bfloat16", **cfg),
                           target="cuda:sm_90a").get_kernel_source()
    log, sass = _compile(src, tmp_path)
    assert "0 bytes spill stores" in log
    assert sass.count("HGMMA.64x256x16") == 8  # 4 k16 steps a 64-deep k tile, two loops
    assert sass.count("WARPGROUP.DEPBAR.LE gsb0, 0x1") == 2  # in each loop
    assert sass.count("WARPGROUP.DEPBAR.LE gsb0, 0x0") == 2  # after each loop


@needs_nvcc
@needs_cuobjdump
def test_fp8_gemm_sass_has_qgmma(tmp_path):
    fp8 = importlib.import_module("gemm_fp8")
    src = tilecore.compile(fp8.program(M=1024, N=1024, K=1024), out_idx=fp8.OUT_IDX,
                           target="cuda:sm_90a").get_kernel_source()
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in src
    log, sass = _compile(src, tmp_path)
    assert "QGMMA" in sass and "0 bytes spill stores" in log


def test_descriptor_encoding():
    d = MatrixDesc("K", 128, 16, 1024, 2)
    bits = desc_high_bits(d)
    assert (bits >> 16) & 0x3FFF == 1 and (bits >> 32) & 0x3FFF == 64 and bits >> 62 == 1
    assert (bits >> 49) & 7 == 0  # base offset 0: buffers aligned to the pattern
    assert desc_high_bits(MatrixDesc("MN", 64, 4096, 512, 2)) >> 62 == 2
    assert desc_high_bits(MatrixDesc("MN", 32, 2048, 256, 2)) >> 62 == 3
