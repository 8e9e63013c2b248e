"""examples/gemm.py `config(M, N, K)`, the GEMM config chosen by shape (BENCHMARKS.md, issue 10):
small M goes to `small_m_config`; larger M to the measured 128x256x64 tile whose sm_90a source
is the full Hopper path: a producer warpgroup issuing TMA loads, m64n256k16 wgmma consumers,
the TMA-store epilogue, and a persistent grid of 132 blocks where the tiles outnumber them."""

from __future__ import annotations

import pytest
from cuda_test_util import example_modules, needs_nvcc
from tilecore_cuda import build

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
    # 512 tiles on 132 blocks: the split of the last wave would save 7.8 of 64 k steps a block,
    # less than the fix-up costs, so 4096^3 stays data-parallel
    assert cfg == g.LARGE_CONFIG and cfg is not g.LARGE_CONFIG  # a copy: callers may edit it
    src = tilecore.compile(g.program(M=4096, N=4096, K=4096, **cfg), out_idx=[-1],
                           target="cuda:sm_90a").get_kernel_source()
    assert "producer warpgroup" in src and "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in src
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier" in src
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in src  # the TMA store
    assert "for (int tile = block_id; tile < 512; tile += 132)" in src and "Flags" not in src


def test_stream_k_is_chosen_where_the_last_wave_costs_more_than_the_fixup():
    g = _gemm()
    assert g.config(8192, 8192, 8192) == dict(g.LARGE_CONFIG, stream_k=True)  # 2048 tiles: 62 saved
    assert g.config(4096, 4096, 14336)["stream_k"]  # 512 tiles, 224 k steps: 27 saved
    assert "stream_k" not in g.config(4224, 4096, 4096)  # 33 x 16 = 528 = 4 x 132 tiles: whole waves
    src = tilecore.compile(g.program(M=8192, N=8192, K=8192, **g.config(8192, 8192, 8192)),
                           target="cuda:sm_90a").get_kernel_source()
    # 15 whole waves (1980 tiles) data-parallel, then the last 68 tiles' 128 k steps in runs of 65-66
    assert "for (int tile = block_id; tile < 1980; tile += 132)" in src
    assert "const int run_first = ((block_id * 65) + min(block_id, 124));" in src
    assert "atomicAdd(&Flags[sk_tile], 1)" in src and "atomicAdd(&Flags[sk_tile], 0)" in src
    fp8 = next(m for m in example_modules() if m.__name__ == "gemm_fp8")
    assert fp8.config(8192, 8192, 8192)["stream_k"] and "stream_k" not in fp8.config(2048, 2048, 2048)


@needs_nvcc
def test_stream_k_kernel_assembles_for_sm_90a():
    """The stream-K 8192^3 kernel through nvcc for sm_90a: the register cap of one block of 384
    threads and no stack (the finishers' counter wait and the partial-tile hand-over fit)."""
    g = _gemm()
    src = tilecore.compile(g.program(M=8192, N=8192, K=8192, dtype="bfloat16", **g.config(8192, 8192, 8192)),
                           target="cuda:sm_90a").get_kernel_source()
    res = build.cubin_resources(build.compile_cuda(src, "sm_90a", compiler="nvcc", use_cache=False))
    assert 0 < res["registers"] <= 168 and res["frame_bytes"] == 0, res


def test_fp8_config_is_the_rasterized_tma_store_wgmma_kernel():
    fp8 = next(m for m in example_modules() if m.__name__ == "gemm_fp8")
    cfg = fp8.config(2048, 2048, 2048)
    assert cfg["panel"] == 8 and cfg["num_stages"] == 3
    src = tilecore.compile(fp8.program(M=2048, N=2048, K=2048, **cfg), out_idx=[-1],
                           target="cuda:sm_90a").get_kernel_source()
    assert "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" in src
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in src  # the TMA store
