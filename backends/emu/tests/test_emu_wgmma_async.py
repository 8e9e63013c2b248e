"""Asynchronous gemms (`T.gemm(wg_wait=-1)`, tilecore.lower.wgmma_async) on emu:sm_90.

FlashAttention's overlapped loop (examples/flash_attention.py, overlap=True) issues S(k) and
P(k-1) V(k-1) back to back; the pass places `wait_group 1` before the softmax of S(k) and an
ordering fence + `wait_group 0` before the rescale of O. The result matches float64; weakening
either wait is a register race the emulator reports; the same program is exact on interp.
"""

import dataclasses
import importlib

import numpy as np
import pytest

import tilecore
from tilecore.emulator.machine import EmuArtifact
from tilecore.errors import TileRuntimeError
from tilecore.ir.stmt import SeqStmt
from tilecore.ir.thread import AsyncFence, AsyncWait
from tilecore.ir.visit import rewrite, walk

pytest.importorskip("tilecore_cuda")
fa = importlib.import_module("flash_attention")
EMU = "emu:sm_90"
SIZES = dict(batch=1, heads=2, kv_heads=1, seq_len=130, dim=64, is_causal=True)
TILES = dict(block_M=64, block_N=64, num_stages=2, threads=128)


def _kernel():
    return tilecore.jit(fa.program(**SIZES, **TILES, overlap=True), out_idx=[-1], target=EMU)


def _inputs():
    return fa.make_inputs(np.random.default_rng(5), **SIZES)


def test_overlapped_forward_places_partial_waits_and_matches():
    kernel = _kernel()
    final = kernel.stages[-1][1]
    waits = [n for n in walk(final.func.body) if isinstance(n, AsyncWait) and n.queue == "wgmma"]
    assert any(w.pending == 1 and w.deferred for w in waits)  # the softmax waits for S only
    assert any(isinstance(n, AsyncFence) and n.kind == "order" for n in walk(final.func.body))
    q, k, v = _inputs()
    want = fa.attention64(q, k, v, True)[0]
    np.testing.assert_allclose(kernel(q, k, v).astype(np.float32), want.astype(np.float32), **fa.TOLERANCE)


def _mutated(match, replace):
    final = _kernel().stages[-1][1]
    count = [0]

    def fn(n):
        if isinstance(n, SeqStmt) and any(match(s) for s in n.stmts):
            out = []
            for s in n.stmts:
                if match(s):
                    count[0] += 1
                    s = replace(s)
                if s is not None:
                    out.append(s)
            return SeqStmt(tuple(out), n.loc)
        return None

    return final.with_func(final.func.with_body(rewrite(final.func.body, fn))), count[0]


@pytest.mark.parametrize("pending, replace", [
    (1, lambda s: dataclasses.replace(s, pending=2)),  # the softmax reads S still in flight
    (0, lambda s: None),  # no wait before the rescale: O is read while P V runs
])
def test_weakened_partial_waits_are_register_races(pending, replace):
    mutated, n = _mutated(lambda s: isinstance(s, AsyncWait) and s.queue == "wgmma" and s.deferred
                          and s.pending == pending, replace)
    assert n >= 1
    q, k, v = _inputs()
    with pytest.raises(TileRuntimeError, match="register race"):
        EmuArtifact(mutated).run([q, k, v, np.zeros_like(q)], {})


def test_overlap_is_the_same_function_on_interp():
    q, k, v = _inputs()
    plain = tilecore.jit(fa.program(**SIZES, **TILES), out_idx=[-1], target="interp")(q, k, v)
    over = tilecore.jit(fa.program(**SIZES, **TILES, overlap=True), out_idx=[-1], target="interp")(q, k, v)
    want = fa.attention64(q, k, v, True)[0]
    for got in (plain, over):
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **fa.TOLERANCE)
