"""Small-M GEMM on sm_90a (examples/gemm.py `split_k`, `b_eviction`, `small_m_config`): the
eviction hint reaches the TMA copies as `.L2::cache_hint` with a `createpolicy` operand, split-K
adds half-precision pairs with native `atomicAdd(__half2*)` (not a compare-and-swap loop),
nvcc compiles both without spills, and (on a GPU) the configs match NumPy on ragged shapes."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from cuda_test_util import example_modules, needs_gpu, needs_nvcc
from tilecore_cuda.build import nvcc_path

import tilecore

CUOBJDUMP = os.environ.get("CUOBJDUMP") or \
    "/work/sass-venv/lib/python3.11/site-packages/triton/backends/nvidia/bin/cuobjdump"
SMALL = dict(block_M=16, block_N=64, block_K=128, num_stages=4, threads=128)


def _gemm():
    return next(m for m in example_modules() if m.__name__ == "gemm")


def _source(**kw) -> str:
    return tilecore.compile(_gemm().program(**kw), out_idx=[-1], target="cuda:sm_90a").get_kernel_source()


def test_eviction_hint_reaches_the_tma_copies_of_b_only():
    src = _source(M=1, N=4096, K=4096, b_eviction="evict_first", **SMALL)
    hinted = [ln for ln in src.splitlines() if "cp.async.bulk.tensor" in ln and ".L2::cache_hint" in ln]
    assert hinted and "createpolicy.fractional.L2::evict_first.b64" in src
    plain = _source(M=1, N=4096, K=4096, **SMALL)
    assert ".L2::cache_hint" not in plain and "createpolicy" not in plain
    # evict_last spells its own policy; A (no hint) keeps the plain form beside it
    last = _source(M=64, N=256, K=512, b_eviction="evict_last", **{**SMALL, "block_M": 64})
    assert "L2::evict_last" in last


def test_split_k_adds_half_pairs_natively():
    src = _source(M=3, N=128, K=300, split_k=2, **SMALL)  # ragged N: per-element guards, scalar adds
    assert "atomicAdd(reinterpret_cast<__half2*>" in src and "__halves2half2" in src
    bf = _source(M=3, N=128, K=300, split_k=2, dtype="bfloat16", **SMALL)
    assert "atomicAdd(reinterpret_cast<__nv_bfloat162*>" in bf


@needs_nvcc
@pytest.mark.skipif(not os.path.isfile(CUOBJDUMP), reason="cuobjdump is not installed")
def test_split_k_sass_has_vector_half_atomics_and_hinted_tma(tmp_path):
    src = _source(M=1, N=4096, K=4096, split_k=2, b_eviction="evict_first", **SMALL)
    sass = _spill_free_sass(tmp_path, src)
    assert "ATOM.E.ADD.F16x2" in sass and "ATOM.E.CAS" not in sass
    assert any("UTMALDG.2D" in ln and "desc[" in ln for ln in sass.splitlines())  # the cache policy


@pytest.mark.parametrize("shape, want", [
    ((1, 4096, 4096), dict(block_N=32, split_k=1)), ((1, 14336, 4096), dict(block_N=64, split_k=1)),
    ((1, 1024, 16384), dict(block_N=32, split_k=4, split_reduce="workspace")),
    ((64, 4096, 4096), dict(block_M=64, split_k=1))])
def test_small_m_config_by_shape(shape, want):
    cfg = _gemm().small_m_config(*shape, sms=132)
    assert {k: cfg[k] for k in want} == want


@needs_gpu
@pytest.mark.parametrize("M, N, K, kw", [
    (3, 1000, 1000, dict(split_k=3, b_eviction="evict_first")), (1, 520, 2000, dict(split_k=4)),
    (5, 72, 200, dict(b_eviction="evict_first"))])
def test_small_m_on_gpu(M, N, K, kw):
    gemm = _gemm()
    kernel = tilecore.jit(gemm.program(M=M, N=N, K=K, **{**SMALL, **kw}), out_idx=[-1], target="cuda:sm_90a")
    a, b = gemm.make_inputs(np.random.default_rng(0), M=M, N=N, K=K)
    c = np.asarray(kernel(a, b)).astype(np.float64)  # the call's output starts at zero
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3
    # each split's partial is rounded to fp16 before its atomic add: an element near zero may
    # carry the rounding of partials of |30|-|60| (fp16 ulp 0.03), so atol is 2 such ulps
    np.testing.assert_allclose(c, ref, rtol=1e-2, atol=0.07 if kw.get("split_k", 1) > 1 else 0.01)


WS = dict(SMALL, split_reduce="workspace", b_eviction="evict_first")


def test_workspace_split_k_publishes_partials_through_an_acq_rel_counter():
    """The counter's atomic sits between two device-scope fences (the hand-off of the float32
    partials between blocks); the partials and C are plain stores, with no atomics on C."""
    src = _source(M=3, N=128, K=300, split_k=2, **WS)
    lines = [ln.strip() for ln in src.splitlines()]
    at = next(i for i, ln in enumerate(lines) if "atomicAdd(&Counts[" in ln)
    assert lines[at - 1] == lines[at + 1] == "__threadfence();"
    assert src.count("atomicAdd") == 1 and "__half2*" not in src


@needs_nvcc
@pytest.mark.skipif(not os.path.isfile(CUOBJDUMP), reason="cuobjdump is not installed")
def test_workspace_split_k_sass_fences_the_counter(tmp_path):
    src = _source(M=1, N=4096, K=4096, split_k=2, **{**WS, "block_K": 256})
    sass = _spill_free_sass(tmp_path, src)
    assert sass.count("MEMBAR.SC.GPU") == 2 and "ATOMG.E.ADD" in sass and "UTMALDG.2D" in sass


@needs_gpu
@pytest.mark.parametrize("M, N, K, kw", [(3, 1000, 1000, dict(split_k=3)), (1, 520, 2000, dict(split_k=4)),
                                         (17, 72, 200, dict(split_k=2))])
def test_workspace_split_k_on_gpu(M, N, K, kw):
    """Two calls with the same workspace (NaN partials to start: each call writes what it
    reads) give the same C, and leave the counters at zero."""
    gemm = _gemm()
    cfg = {**WS, **kw}
    kernel = tilecore.jit(gemm.program(M=M, N=N, K=K, **cfg), out_idx=[-1], target="cuda:sm_90a")
    a, b = gemm.make_inputs(np.random.default_rng(1), M=M, N=N, K=K)
    (ws, _), (cs, _) = gemm.workspace_shapes(M, N, **cfg)
    w, counts = np.full(ws, np.nan, np.float32), np.zeros(cs, np.int32)
    first = np.asarray(kernel(a, b, w, counts)).astype(np.float64)
    again = np.asarray(kernel(a, b, w, counts)).astype(np.float64)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(first - ref) / np.linalg.norm(ref) < 1e-3
    np.testing.assert_array_equal(first, again)  # the sum runs in split order: deterministic


def _spill_free_sass(tmp_path, src: str) -> str:
    """The sm_90a SASS of `src` built by nvcc, after asserting ptxas reports no stack or spills."""
    cu, cubin = tmp_path / "k.cu", tmp_path / "k.cubin"
    cu.write_text(src)
    res = subprocess.run([nvcc_path(), "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v",
                          "-o", str(cubin), str(cu)], capture_output=True, text=True, check=True)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in res.stderr + res.stdout
    return subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
