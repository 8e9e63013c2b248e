"""examples/gemm.py `config(M, N, K)`, the GEMM config chosen by shape (BENCHMARKS.md, issue 10):
small M goes to `small_m_config`; larger M to the measured 128x256x64 tile whose sm_90a source
is the full Hopper path: a producer warpgroup issuing TMA loads, m64n256k16 wgmma consumers,
the TMA-store epilogue, and a persistent grid of 132 blocks where the tiles outnumber them."""

from __future__ import annotations

import pytest
from cuda_test_util import example_modules

import tilecore


def _gemm():
    return next(m for m in example_modules() if m.__name__ == "gemm")


@pytest.mark.parametrize("M", [1, 16, 64])
def test_small_m_goes_to_small_m_config(M):
    g = _gemm()
    assert g.config(M, 4096, 4096) == g.small_m_config(M, 4096, 4096)


def test_large_config_is_the_persistent_tma_store_wgmma_kernel():
    g = _gemm()
    cfg = g.config(4096, 4096, 4096)
    assert cfg == g.LARGE_CONFIG and cfg is not g.LARGE_CONFIG  # a copy: callers may edit it
    src = tilecore.compile(g.program(M=4096, N=4096, K=4096, **cfg), out_idx=[-1],
                           target="cuda:sm_90a").get_kernel_source()
    assert "producer warpgroup" in src and "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in src
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier" in src
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in src  # the TMA store
    # 32 x 16 = 512 tiles on 132 persistent blocks
    assert "for (int tile = block_id; tile < 512; tile += 132)" in src


def test_fp8_config_is_the_rasterized_tma_store_wgmma_kernel():
    fp8 = next(m for m in example_modules() if m.__name__ == "gemm_fp8")
    cfg = fp8.config(2048, 2048, 2048)
    assert cfg["panel"] == 8 and cfg["num_stages"] == 3
    src = tilecore.compile(fp8.program(M=2048, N=2048, K=2048, **cfg), out_idx=[-1],
                           target="cuda:sm_90a").get_kernel_source()
    assert "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" in src
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in src  # the TMA store
