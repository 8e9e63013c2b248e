"""TMA-store epilogues (tilecore/lower/tma_store.py) on emu:sm_90a and in the sm_90a source:
ragged and persistent GEMMs correct, the wait / fence / barrier order around the stores, and the
cases that keep the per-thread staged epilogue."""

import importlib

import numpy as np
import pytest

import tilecore
from tilecore import plugins

pytest.importorskip("tilecore_cuda")
from test_emu_tma import PersistentOnTwo  # noqa: E402  (producer always, 2 multiprocessors)

gemm = importlib.import_module("gemm")
STORE = "tma_store C["


@pytest.fixture
def two_sms():
    plugins.register(PersistentOnTwo(), name="two-sms-store")
    yield
    plugins.unregister("two-sms-store")


def _run(M, N, K, target="emu:sm_90a", configs=None, **kw):
    kernel = tilecore.jit(gemm.program(M=M, N=N, K=K, **kw), out_idx=gemm.OUT_IDX, target=target,
                          pass_configs=configs)
    a, b = gemm.make_inputs(np.random.default_rng(M + N + K), M=M, N=N, K=K)
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)
    return kernel.get_ir("final")


def _order(ir: str, *marks: str) -> list:
    """Positions of each mark's first occurrence after the previous one's (-1: missing)."""
    out, at = [], 0
    for m in marks:
        at = ir.find(m, at)
        out.append(at)
    return out


def test_ragged_tiles_are_clipped_by_the_store_and_ordered():
    ir = _run(130, 72, 104, block_N=64)  # both tile rows ragged (130 = 128 + 2, 72 = 64 + 8)
    pos = _order(ir, "async_wait(bulk, pending=0)", "C_tma_stage[", "async_fence(proxy_async)",
                 "barrier()", STORE, "async_commit(bulk)", "async_wait(bulk, pending=0)")
    assert -1 not in pos and pos == sorted(pos), pos
    assert ir.rstrip().endswith("async_wait(bulk, pending=0)")  # no block exits mid-store
    assert "C[by * 128" not in ir.replace(STORE, "")  # no per-thread global stores of C left


def test_persistent_blocks_reuse_the_staging_tile(two_sms):
    # 2 x 2 tiles on 2 blocks: each block's second store reuses the tile its first is reading
    ir = _run(200, 72, 136, block_M=128, block_N=64, block_K=32, num_stages=3, threads=256)
    assert "for tile in serial(block_id," in ir and STORE in ir
    loop = ir[ir.index("for tile in serial(block_id,"):]
    pos = _order(loop, "async_wait(bulk, pending=0)", "barrier(id=1, threads=256)", "C_tma_stage[", STORE)
    assert -1 not in pos, pos


@pytest.mark.parametrize("M, N, K, kw, configs", [
    (64, 100, 64, dict(block_M=64, block_N=64), None),  # 200-byte rows: no tensor map for C
    (128, 128, 64, dict(block_M=64, block_N=64), {"tilecore.disable_tma_store": True}),
    (128, 128, 64, dict(block_M=64, block_N=64), {"tl.disable_tma_lower": True}),
])
def test_cases_that_keep_the_per_thread_epilogue(M, N, K, kw, configs):
    assert STORE not in _run(M, N, K, configs=configs, **kw)


def test_sm90a_source_and_the_shared_memory_limit():
    def src(stages):
        prog = gemm.program(M=4096, N=4096, K=4096, block_M=128, block_N=256, block_K=64,
                            num_stages=stages, threads=256, panel=16, dtype="bfloat16")
        return tilecore.compile(prog, target="cuda:sm_90a").get_kernel_source()

    s3 = src(3)  # 3 x 48 KB of stages + the 64 KB tile fit in 227 KB
    assert s3.count("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") == 4  # one per panel
    assert "cp.async.bulk.wait_group.read 0;" in s3 and "fence.proxy.async.shared::cta;" in s3
    assert "bulk_group" not in src(4)  # 4 x 48 KB + 64 KB do not: the staged copy in halves
    sm80 = tilecore.compile(gemm.program(M=256, N=256, K=256), target="cuda:sm_80").get_kernel_source()
    assert "bulk_group" not in sm80
