"""fragment-pipeline on the emulator: mma.sync gemms in cp.async pipelines, with the next k tile's
first operand fragments loaded before this tile's last mmas, give bit-identical results to the
as-written order (each accumulator still sums its k steps in order), on ragged shapes too; the
loops it declines (an odd number of k steps) are left as written."""

from __future__ import annotations

import numpy as np
import pytest

import tilecore
from tilecore.emulator.machine import EmuArtifact
from tilecore.errors import TileRuntimeError
from tilecore.ir.stmt import For, IfThenElse, SeqStmt
from tilecore.ir.thread import AsyncWait
from tilecore.ir.visit import rewrite, walk

OFF = {"tilecore.disable_fragment_pipeline": True}
INTERLEAVE = {"tilecore.enable_copy_interleave": True}
SPREAD = {"tilecore.copy_spread": True}


def _gemm(pass_configs=None, **kw):
    import gemm

    return tilecore.compile(gemm.program(**kw), out_idx=[-1], target="emu:sm_80", pass_configs=pass_configs)


def _pipelined_loops(kernel) -> list:
    final = dict(kernel.stages)["wide-offsets"]
    return [n for n in walk(final.func.body) if isinstance(n, For) and n.annotation("fragment_pipeline")]


@pytest.mark.parametrize("shape, block_K, stages", [
    ((64, 64, 32), 32, 2),      # one k tile: the prologue and the guarded tail alone
    ((100, 72, 100), 32, 3),    # ragged M, N and a K tail
    ((64, 64, 192), 64, 2),     # 4 k steps per tile, 3 tiles
    ((64, 64, 64), 32, 4),      # more stages than tiles
])
def test_same_bits_as_written_order(shape, block_K, stages):
    import gemm

    M, N, K = shape
    kw = dict(M=M, N=N, K=K, block_M=64, block_N=64, block_K=block_K, num_stages=stages, threads=128)
    on, off, mixed = _gemm(**kw), _gemm(OFF, **kw), _gemm(INTERLEAVE, **kw)
    loops = _pipelined_loops(on)
    assert [lp.annotation("fragment_pipeline") for lp in loops] == [block_K // 16]
    assert not _pipelined_loops(off)
    a, b = gemm.make_inputs(np.random.default_rng(1), M=M, N=N, K=K)
    c_on, c_off = on(a, b), off(a, b)
    np.testing.assert_array_equal(c_on, c_off)
    np.testing.assert_array_equal(mixed(a, b), c_off)  # the interleaved copies: same bits, no race
    if stages >= 3:  # the copies spread over the steps (fewer stages keep the burst): likewise
        np.testing.assert_array_equal(_gemm(SPREAD, **kw)(a, b), c_off)
    np.testing.assert_allclose(c_on.astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               rtol=1e-2, atol=1e-2)


def test_odd_step_count_is_left_alone():
    # block_K = 48: three 16-deep steps; the last step's registers would collide with the next
    # tile's first loads, so the loop keeps its written order
    kernel = _gemm(M=64, N=64, K=96, block_M=64, block_N=64, block_K=48, num_stages=2, threads=128)
    assert not _pipelined_loops(kernel)


def test_the_moved_loads_read_the_next_stage():
    # the loop body ends with the guarded head of iteration k + 1 (wait, barrier, first loads)
    # before the last step's mmas, and that step's mmas are interleaved with the guarded copies
    # of a later tile (dealt out in COPY_GROUPS pieces, the commit in the last); printed IR shows
    # the odd-step register twins
    from tilecore.lower.fragment_pipeline import COPY_GROUPS

    kernel = _gemm(INTERLEAVE, M=64, N=64, K=256, block_M=64, block_N=64, block_K=64, num_stages=3,
                   threads=128)
    ir = kernel.get_ir("final")
    assert "A_frag_odd" in ir and "B_frag_odd" in ir
    body = ir[ir.index("for k in"):body_end(ir)]
    pieces = body.split("if k + 1 < ")[1:]
    assert len(pieces) == 1 + COPY_GROUPS
    moved = pieces[0]
    assert "async_wait" in moved and "barrier()" in moved and "ldmatrix" in moved
    assert "# cp.async" not in moved and "async_commit" not in moved
    for i, piece in enumerate(pieces[1:]):
        assert "# cp.async" in piece
        assert ("async_commit" in piece) == (i == COPY_GROUPS - 1)
    # the last step's mmas (reading the odd twins: 4 steps, step 3 is odd) sit between the pieces
    assert all("A=A_frag_odd" in p.split("async_commit")[-1] for p in pieces[:-1])


def body_end(ir: str) -> int:
    """Where the pipelined loop's body ends in printed IR (the wait after the loop)."""
    return ir.index("async_wait(cp.async, pending=0)")


def test_by_default_the_head_stays_whole():
    # without tilecore.enable_copy_interleave the copies stay in the moved head, in one burst
    kernel = _gemm(M=64, N=64, K=256, block_M=64, block_N=64, block_K=64, num_stages=3, threads=128)
    ir = kernel.get_ir("final")
    body = ir[ir.index("for k in"):body_end(ir)]
    moved = body[body.rindex("if k + 1 < "):]
    assert "async_wait" in moved and "barrier()" in moved and "ldmatrix" in moved and "# cp.async" in moved
    assert "A=A_frag_odd" in moved.split("async_commit")[-1]


def test_deleting_the_moved_wait_is_reported():
    """The head moved into the guarded block still guards the next tile: without its wait the
    next tile's first fragment loads read a stage whose copies have not landed."""
    import gemm

    kernel = _gemm(M=64, N=64, K=128, block_M=64, block_N=64, block_K=32, num_stages=3, threads=128)
    final = dict(kernel.stages)["wide-offsets"]

    mutated = _without_guarded_waits(final)
    a, b = gemm.make_inputs(np.random.default_rng(2), M=64, N=64, K=128)
    with pytest.raises(TileRuntimeError, match="has landed"):
        EmuArtifact(mutated).run([a, b, np.zeros((64, 64), dtype=np.float16)], {})


def _guarded_head(ir: str) -> str:
    """The printed guarded head of the next iteration at the end of the pipelined loop."""
    body = ir[ir.index("for k in"):body_end(ir)]
    return body[body.rindex("if k + 1 < "):]


def test_spread_keeps_the_burst_with_two_stages():
    # with 2 stages a spread copy would have a single k step to land before the wait
    # (SPREAD_MIN_STAGES): the head keeps its copies, the program is the one without the option
    kw = dict(M=64, N=64, K=256, block_M=64, block_N=64, block_K=64, num_stages=2, threads=128)
    assert _gemm(SPREAD, **kw).get_ir("final") == _gemm(**kw).get_ir("final")


def test_spread_copies_sit_between_the_steps():
    # tilecore.copy_spread: the copies (and the commit) are dealt out over steps 0..n-2 of the
    # iteration, each piece after the next step's loads and before this step's mmas; the guarded
    # head of iteration k + 1 keeps only the wait, the barrier and the first loads
    kernel = _gemm(SPREAD, M=64, N=64, K=256, block_M=64, block_N=64, block_K=64, num_stages=3,
                   threads=128)
    ir = kernel.get_ir("final")
    body = ir[ir.index("for k in"):body_end(ir)]
    guarded = body[body.rindex("if k + 1 < "):]
    assert "async_wait" in guarded and "barrier()" in guarded and "ldmatrix" in guarded
    assert "# cp.async" not in guarded and "async_commit" not in guarded
    before = body[:body.rindex("if k + 1 < ")]
    assert before.count("async_commit") == 1
    # 4 steps: the copies lie in the 3 gaps, so mmas of step 0 follow some copies and precede others
    first_copy, last_copy = before.index("# cp.async"), before.rindex("# cp.async")
    assert "mma" in before[first_copy:last_copy]


def test_deleting_a_spread_copy_wait_is_reported():
    """With the copies spread over the steps, the wait dropped from the moved head lets the next
    tile's first loads read a stage before its copies land: emu reports it."""
    import gemm

    kernel = _gemm(SPREAD, M=64, N=64, K=256, block_M=64, block_N=64, block_K=64, num_stages=3,
                   threads=128)
    assert "async_commit" not in _guarded_head(kernel.get_ir("final"))
    final = dict(kernel.stages)["wide-offsets"]

    mutated = _without_guarded_waits(final)
    a, b = gemm.make_inputs(np.random.default_rng(3), M=64, N=64, K=256)
    with pytest.raises(TileRuntimeError, match="has landed"):
        EmuArtifact(mutated).run([a, b, np.zeros((64, 64), dtype=np.float16)], {})


def _without_guarded_waits(final):
    """`final` with the cp.async waits inside guarded blocks deleted (the mutation a race check
    must catch)."""
    def drop_wait(n):
        if isinstance(n, IfThenElse) and isinstance(n.then_body, SeqStmt) \
                and any(isinstance(s, AsyncWait) for s in n.then_body.stmts):
            kept = tuple(s for s in n.then_body.stmts if not isinstance(s, AsyncWait))
            return IfThenElse(n.cond, SeqStmt(kept, n.then_body.loc), n.else_body, n.loc)
        return None

    return final.with_func(final.func.with_body(rewrite(final.func.body, drop_wait)))
