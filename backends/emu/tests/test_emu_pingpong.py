"""Ping-pong consumers (tilecore/lower/pingpong.py, option `tilecore.ws_pingpong`) on
emu:sm_90a, where each consumer warpgroup runs as its own task: persistent ragged GEMMs
correct (odd tile counts per block included), the order mbarriers needed (dropping their waits
is caught), and the sm_90a build of the 4096^3 config within its registers."""

import importlib
import subprocess

import numpy as np
import pytest

import tilecore
from tilecore import plugins
from tilecore.emulator.machine import EmuArtifact
from tilecore.errors import TileRuntimeError
from tilecore.ir.stmt import IfThenElse, SeqStmt
from tilecore.ir.thread import MbarrierWait
from tilecore.ir.visit import rewrite

pytest.importorskip("tilecore_cuda")
from test_emu_tma import PersistentOnTwo  # noqa: E402
from tilecore_cuda.build import nvcc_path  # noqa: E402

gemm = importlib.import_module("gemm")
PINGPONG = {"tilecore.ws_pingpong": True}
CFG = dict(block_M=128, block_N=64, block_K=32, num_stages=3, threads=128)


@pytest.fixture
def two_sms():
    plugins.register(PersistentOnTwo(), name="two-sms-pingpong")
    yield
    plugins.unregister("two-sms-pingpong")


def _kernel(M, N, K, configs=PINGPONG):
    return tilecore.jit(gemm.program(M=M, N=N, K=K, **CFG), out_idx=gemm.OUT_IDX, target="emu:sm_90a",
                        pass_configs=configs)


@pytest.mark.parametrize("M, N, K", [
    (300, 136, 72),  # 3 x 3 tiles on 2 blocks: 5 and 4, warpgroup 0 of block 0 runs 3
    (130, 72, 104),  # one tile per warpgroup, ragged M, N and K
])
def test_two_consumer_warpgroups_on_alternate_tiles(M, N, K, two_sms):
    kernel = _kernel(M, N, K)
    ir = kernel.get_ir("final")
    assert "consumer (threads < 256, setmaxnreg 232, 2 independent groups)" in ir
    assert "for tile_wg1 in serial(block_id + 2, " in ir and "barrier(id=2, threads=128)" in ir
    assert "C_tma_stage_wg1[" in ir and "mbarrier_wait(pingpong_order[1]" in ir
    a, b = gemm.make_inputs(np.random.default_rng(M), M=M, N=N, K=K)
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)
    assert "independent groups" not in _kernel(M, N, K, None).get_ir("final")  # opt-in


def _no_order(n):
    """Drop the waits on the order mbarriers (bare, or under warpgroup 0's `if`)."""
    def order_wait(s):
        if isinstance(s, IfThenElse) and s.else_body is None:
            s = s.then_body
        return isinstance(s, MbarrierWait) and s.bar.name == "pingpong_order"

    if isinstance(n, SeqStmt):
        keep = tuple(s for s in n.stmts if not order_wait(s))
        return SeqStmt(keep, n.loc) if len(keep) != len(n.stmts) else None
    return None


def test_without_the_order_waits_the_emulator_reports_it(two_sms):
    M, N, K = 300, 136, 72
    final = _kernel(M, N, K).stages[-1][1]
    a, b = gemm.make_inputs(np.random.default_rng(1), M=M, N=N, K=K)
    c = np.zeros((M, N), dtype=np.float16)
    try:  # the groups run out of tile order: a deadlock on the ring (or a wrong-phase read)
        mutated = final.with_func(final.func.with_body(rewrite(final.func.body, _no_order)))
        EmuArtifact(mutated).run([a, b, c], {})
    except TileRuntimeError:
        return
    assert not np.allclose(c.astype(np.float32), gemm.reference(a, b).astype(np.float32), **gemm.TOLERANCE)


@pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not installed")
def test_sm90a_build_keeps_its_registers(tmp_path):
    prog = gemm.program(M=4096, N=4096, K=4096, block_M=128, block_N=128, block_K=64, num_stages=4,
                        threads=128, panel=16, dtype="bfloat16")
    src = tilecore.compile(prog, target="cuda:sm_90a", pass_configs=PINGPONG).get_kernel_source()
    assert "__launch_bounds__(384, 1)" in src and "setmaxnreg.inc.sync.aligned.u32 232;" in src
    assert "bar.sync 2, 128;" in src and src.count("cp.async.bulk.tensor.2d.global.shared::cta") == 4
    cu = tmp_path / "k.cu"
    cu.write_text(src)
    cmd = [nvcc_path(), "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v",
           "-o", str(tmp_path / "k.cubin"), str(cu)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert "0 bytes spill stores, 0 bytes spill loads" in res.stderr + res.stdout
