"""Small-M GEMM on `emu:sm_90` (examples/gemm.py `split_k`, `b_eviction`, `small_m_config`): the
split-K blocks' atomic adds into C match NumPy on ragged M, N and K tails (splits that run past
K read TMA's zero fill), the eviction hint rides on B's TMA loads only and changes no value, and
the config chosen by shape is correct on shapes where it picks each variant; the workspace
split-K (no zeroed C: partials in W, a per-tile counter, the last block sums) matches NumPy,
repeats bit for bit and leaves its counters at zero."""

import importlib

import numpy as np
import pytest

import tilecore

gemm = importlib.import_module("gemm")
SMALL = dict(block_M=16, block_N=64, block_K=64, num_stages=3, threads=128)


def _run(M, N, K, cfg, seed=0):
    kernel = tilecore.jit(gemm.program(M=M, N=N, K=K, **cfg), out_idx=gemm.OUT_IDX, target="emu:sm_90a")
    a, b = gemm.make_inputs(np.random.default_rng(seed), M=M, N=N, K=K)
    work = []  # the workspace split-K's W (NaN: the call must write what it reads) and Counts
    if cfg.get("split_k", 1) > 1 and cfg.get("split_reduce") == "workspace":
        (ws, _), (cs, _) = gemm.workspace_shapes(M, N, **cfg)
        work = [np.full(ws, np.nan, np.float32), np.zeros(cs, np.int32)]
    np.testing.assert_allclose(kernel(a, b, *work).astype(np.float32),
                               gemm.reference(a, b).astype(np.float32), **gemm.TOLERANCE)
    return kernel


@pytest.mark.parametrize("M, N, K, kw", [
    (3, 104, 300, dict(split_k=2)),  # ragged M and N (B rows 208 bytes: TMA), a K tail in split 2
    (1, 64, 1000, dict(split_k=3, block_K=128)),  # 8 k tiles in 3 runs of 3: the last reads past K
    (20, 72, 200, dict(split_k=2, b_eviction="evict_first")),  # two row blocks of A
])
def test_split_k_matches_numpy(M, N, K, kw):
    kernel = _run(M, N, K, {**SMALL, **kw})
    ir = kernel.get_ir("final")
    assert "atomic" in ir and "tma_load" in ir
    if kw.get("b_eviction"):  # B's loads carry the hint, A's do not
        assert "tma_load L2::evict_first B_shared" in ir and "tma_load L2::evict_first A_shared" not in ir


@pytest.mark.parametrize("M, N, K", [(3, 200, 512), (1, 64, 4096), (40, 96, 256)])
def test_small_m_config_is_correct(M, N, K):
    cfg = gemm.small_m_config(M, N, K, sms=4)  # few multiprocessors: small shapes take every branch
    assert (cfg["split_k"] > 1) == ((M, N, K) == (1, 64, 4096))
    assert (cfg.get("split_reduce") == "workspace") == (cfg["split_k"] > 1)
    _run(M, N, K, cfg)


@pytest.mark.parametrize("M, N, K, kw", [
    (3, 104, 300, dict(split_k=2)),  # ragged M and N: W is padded to whole tiles
    (1, 64, 1000, dict(split_k=3, block_K=128)),  # the last split reads past K
    (20, 72, 200, dict(split_k=2, b_eviction="evict_first")),  # two row blocks, two counters each
])
def test_workspace_split_k_matches_numpy_and_resets_its_counters(M, N, K, kw):
    cfg = {**SMALL, **kw, "split_reduce": "workspace"}
    kernel = tilecore.jit(gemm.program(M=M, N=N, K=K, **cfg), out_idx=gemm.OUT_IDX, target="emu:sm_90a")
    a, b = gemm.make_inputs(np.random.default_rng(3), M=M, N=N, K=K)
    (ws, _), (cs, _) = gemm.workspace_shapes(M, N, **cfg)
    w, counts = np.full(ws, np.nan, np.float32), np.zeros(cs, np.int32)
    first = kernel(a, b, w, counts)
    np.testing.assert_allclose(first.astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)
    assert (counts == 0).all()
    np.testing.assert_array_equal(kernel(a, b, w, counts), first)
