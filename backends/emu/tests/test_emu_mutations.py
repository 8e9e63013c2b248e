"""Mutation tests: the emulator catches a wrong lane-map table and a missing barrier.

1. One entry of the mma lane-map table is corrupted (as a typo in the table would): the emu
   result no longer matches the oracle, and the generated code changes with it, because the
   code generator and the emulator read the same table.
2. One barrier is removed from a lowered GEMM: the emulator reports a data race naming the
   shared buffer and the user's line.
"""

import dataclasses
import importlib

import numpy as np
import pytest

import tilecore
from tilecore import plugins
from tilecore.errors import TileRuntimeError
from tilecore.hookspec import hookimpl
from tilecore.ir.stmt import SeqStmt
from tilecore.ir.thread import Barrier, find_kernel
from tilecore.ir.visit import rewrite

tilecore_cuda = pytest.importorskip("tilecore_cuda")
from tilecore_cuda import intrinsics as cuda_intrinsics  # noqa: E402
from tilecore_cuda.lowering import tile_gemm_tensorize as cuda_tensorize  # noqa: E402

from tilecore.emulator.machine import EmuArtifact  # noqa: E402

gemm = importlib.import_module("gemm")


class CorruptTable:
    """A plugin answering gemm tensorization like the CUDA backend, with one table entry wrong."""

    def __init__(self, operand: str):
        self.operand = operand

    @hookimpl(tryfirst=True)
    def tile_gemm_tensorize(self, target, query):
        plan = cuda_tensorize(target=target, query=query)
        if plan is None:
            return None
        maps = {"C": cuda_intrinsics.MMA_C, "A": cuda_intrinsics.MMA_A}
        good = maps[self.operand]
        # lane 5, element 1 now claims the cell of lane 5, element 0: one cell twice, one never
        bad = good.with_entry(5, 1, good.at(5, 0))
        kwargs = {"c_map": bad} if self.operand == "C" else {"a_map": bad}
        return dataclasses.replace(plan, mma=cuda_intrinsics.mma_m16n8k16(query.a_dtype, **kwargs))


def _run(target):
    func = gemm.program(M=64, N=64, K=32, block_M=64, block_N=64, block_K=32)
    rng = np.random.default_rng(0)
    a, b = gemm.make_inputs(rng, M=64, N=64, K=32)
    kernel = tilecore.jit(func, out_idx=[-1], target=target)
    return kernel, kernel(a, b), gemm.reference(a, b)


@pytest.mark.parametrize("operand", ["C", "A"])
def test_corrupt_lane_map_breaks_emu_and_codegen(operand):
    good_kernel, good_out, ref = _run("emu:sm_80")
    np.testing.assert_allclose(good_out.astype(np.float32), ref.astype(np.float32), **gemm.TOLERANCE)
    plugin = CorruptTable(operand)
    plugins.register(plugin, name="corrupt-table")
    try:
        bad_kernel, bad_out, _ = _run("emu:sm_80")
        bad_ir = bad_kernel.get_ir("final")
    finally:
        plugins.unregister("corrupt-table")
    # the emulator's result breaks ...
    bad = bad_out.astype(np.float32)
    assert np.isnan(bad).any() or not np.allclose(bad, ref.astype(np.float32), **gemm.TOLERANCE)
    # ... and so does the code generated from the same table
    good_ir = good_kernel.get_ir("final")
    assert bad_ir != good_ir
    if operand == "C":
        assert "table[" in bad_ir and "table[" not in good_ir  # no formula fits a broken map
    else:
        assert "ldmatrix" in good_ir.split("mma.sync")[0]
        assert "ldmatrix.sync.aligned.m8n8.x4.shared" not in bad_ir  # no loader reproduces A any more


def _without_barrier(module, index):
    """The module with its index-th Barrier statement removed."""
    count = [0]

    def fn(n):
        if isinstance(n, SeqStmt) and any(isinstance(s, Barrier) for s in n.stmts):
            keep = []
            for s in n.stmts:
                if isinstance(s, Barrier):
                    count[0] += 1
                    if count[0] - 1 == index:
                        continue
                keep.append(s)
            return SeqStmt(tuple(keep), n.loc)
        return None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn))), count[0]


@pytest.mark.parametrize("num_stages, expected", [(1, 6), (3, 6)])
def test_removing_any_barrier_from_a_gemm_is_a_race(num_stages, expected):
    func = gemm.program(M=64, N=64, K=64, block_M=64, block_N=64, block_K=32, num_stages=num_stages)
    a, b = gemm.make_inputs(np.random.default_rng(0), M=64, N=64, K=64)
    kernel = tilecore.jit(func, out_idx=[-1], target="emu:sm_80")
    final = kernel.stages[-1][1]
    n_barriers = sum(1 for line in kernel.get_ir("final").splitlines() if "barrier()" in line)
    # synchronous copies: before the mma reads, and before the next iteration overwrites; a
    # cp.async pipeline: one, after the wait (landed tile visible, refilled stage no longer read),
    # twice in the code since fragment-pipeline moves the loop head (wait, barrier, issue) in
    # front of the loop for tile 0 and to the end of the body for tile k + 1; plus the
    # epilogue's, which stages the accumulator in two rounds of 32 rows: before each round is
    # read back and before the second round overwrites the first; and the shared-memory plan's,
    # before the epilogue's staging buffer reuses the operand tiles' bytes (lower/smem_plan.py)
    assert n_barriers == expected
    for i in range(n_barriers):
        mutated, _ = _without_barrier(final, i)
        art = EmuArtifact(mutated)
        c = np.zeros((64, 64), dtype=np.float16)
        with pytest.raises(TileRuntimeError) as err:
            art.run([a, b, c], {})
        msg = str(err.value)
        assert "data race on shared buffer" in msg
        assert any(b in msg for b in ("A_shared", "B_shared", "C_stage"))
        assert "gemm.py:" in msg  # the user's line
    # and the unmodified program runs clean
    EmuArtifact(final).run([a, b, np.zeros((64, 64), dtype=np.float16)], {})


def test_find_kernel_on_lowered_module():
    kernel = tilecore.jit(gemm.program(M=64, N=64, K=32, block_M=64, block_N=64), out_idx=[-1],
                          target="emu:sm_80")
    k = find_kernel(kernel.stages[-1][1].func.body)
    assert k is not None and k.num_threads == 128 and k.warp_size == 32
