"""Warpgroup turns (option `tilecore.warpgroup_turns`, tilecore.lower.wg_turns): the consumer
warpgroups of FlashAttention's warp-specialized forward take turns issuing their gemms
(FlashAttention-3's scheduler barrier). On emu:sm_90a the forward with turns matches float64
(the overlapped loop's three peeled branches, the plain causal loop, three warpgroups), the
turns sit around each iteration's issued run, and a mismatch of passes and waits (what hangs
a GPU) is reported."""

import dataclasses
import importlib

import numpy as np
import pytest

import tilecore
from tilecore.emulator.machine import EmuArtifact
from tilecore.errors import TileRuntimeError
from tilecore.ir.stmt import SeqStmt
from tilecore.ir.thread import AsyncCommit, AsyncFence, WarpgroupTurn
from tilecore.ir.visit import rewrite, walk

pytest.importorskip("tilecore_cuda")
fa = importlib.import_module("flash_attention")
EMU = "emu:sm_90a"
TURNS = {"tilecore.warpgroup_turns": True}


def _kernel(sizes, tiles, pass_configs=TURNS):
    return tilecore.jit(fa.program(**sizes, **tiles), out_idx=[-1], target=EMU, pass_configs=pass_configs)


def _check(kernel, sizes, seed=3):
    shapes = {x: y for x, y in sizes.items() if x != "is_causal"}
    q, k, v = fa.make_inputs(np.random.default_rng(seed), **shapes)
    want = fa.attention64(q, k, v, sizes.get("is_causal", False))[0]
    np.testing.assert_allclose(kernel(q, k, v).astype(np.float32), want.astype(np.float32), **fa.TOLERANCE)
    return q, k, v


def _turns(kernel):
    return [n for n in walk(kernel.stages[-1][1].func.body) if isinstance(n, WarpgroupTurn)]


OVERLAP = (dict(batch=1, heads=1, seq_len=130, dim=128, dtype="bfloat16"),
           dict(block_M=128, block_N=128, num_stages=2, threads=256, overlap=True))


def test_overlapped_forward_takes_turns_and_matches():
    """Three peeled branches (k = 0, inner, last), one turn each, plus the first pass and
    the closing wait; ragged length (the last key tile masked)."""
    kernel = _kernel(*OVERLAP)
    turns = _turns(kernel)
    assert sorted((t.kind, t.only) for t in turns) == [("pass", -1)] * 3 + [("pass", 1)] + \
        [("wait", -1)] * 3 + [("wait", 0)]
    assert all(t.groups == 2 for t in turns)
    _check(kernel, OVERLAP[0])


def test_turn_wraps_the_issued_run():
    """In the plain loop the wait comes right before S's wgmma fence, the pass right after its
    commit (the softmax is outside the turn)."""
    sizes = dict(batch=1, heads=2, kv_heads=1, seq_len=150, dim=128, dtype="bfloat16", is_causal=True)
    kernel = _kernel(sizes, dict(block_M=128, block_N=128, num_stages=2, threads=256))
    seqs = [n for n in walk(kernel.stages[-1][1].func.body) if isinstance(n, SeqStmt)
            and any(isinstance(s, WarpgroupTurn) and s.only < 0 for s in n.stmts)]
    assert len(seqs) == 1
    stmts = list(seqs[0].stmts)
    i = next(n for n, s in enumerate(stmts) if isinstance(s, WarpgroupTurn) and s.kind == "wait")
    j = next(n for n, s in enumerate(stmts) if isinstance(s, WarpgroupTurn) and s.kind == "pass")
    assert isinstance(stmts[i + 1], AsyncFence) and stmts[i + 1].kind == "wgmma"
    assert isinstance(stmts[j - 1], AsyncCommit) and stmts[j - 1].queue == "wgmma"
    _check(kernel, sizes)


def test_three_consumer_warpgroups_rotate():
    sizes = dict(batch=1, heads=1, seq_len=250, dim=64, dtype="bfloat16")
    kernel = _kernel(sizes, dict(block_M=192, block_N=128, num_stages=4, threads=384))
    assert {t.groups for t in _turns(kernel)} == {3}
    assert [t.only for t in _turns(kernel) if t.only >= 0] == [2, 0]  # the last hands 0 the first turn
    _check(kernel, sizes)


def test_off_by_default_and_without_warp_specialization():
    assert not _turns(_kernel(*OVERLAP, pass_configs={}))
    sizes, tiles = OVERLAP  # one stage: under half the shared memory, no producer warpgroup
    assert not _turns(_kernel(sizes, dict(tiles, num_stages=1, overlap=False)))


def test_a_missing_first_turn_is_reported():
    """Without the last warpgroup's first pass, warpgroup 0's barrier gets one pass fewer
    than its waits: a GPU hangs there, the emulator says so."""
    final = _kernel(*OVERLAP).stages[-1][1]

    def fn(n):
        if isinstance(n, SeqStmt) and any(isinstance(s, WarpgroupTurn) and s.only == 1 for s in n.stmts):
            return dataclasses.replace(n, stmts=tuple(s for s in n.stmts
                                                      if not (isinstance(s, WarpgroupTurn) and s.only == 1)))
        return None

    mutated = final.with_func(final.func.with_body(rewrite(final.func.body, fn)))
    q, k, v = fa.make_inputs(np.random.default_rng(1), **{x: y for x, y in OVERLAP[0].items()})
    with pytest.raises(TileRuntimeError, match="waits but .* passes"):
        EmuArtifact(mutated).run([q, k, v, np.zeros_like(q)], {})
