"""Stream-K for the persistent warp-specialized GEMM (`T.stream_k`, tilecore.lower.stream_k) on
emu:sm_90a with a machine of a few multiprocessors, so small ragged GEMMs leave a partial last
wave: the last wave's k steps are split over every block, partial tiles handed over through the
workspace and per-tile counters, checked against NumPy; full waves leave the workspace alone."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore import plugins
from tilecore.emulator.machine import EmuArtifact
from tilecore.errors import TileShapeError, TileTypeError
from tilecore.hookspec import hookimpl
from tilecore.ir.stmt import For, SeqStmt
from tilecore.ir.visit import rewrite

pytest.importorskip("tilecore_cuda")
from tilecore_cuda.lowering import tile_target_facts as cuda_facts  # noqa: E402

gemm = importlib.import_module("gemm")  # examples/ (conftest.py puts it on the path)
gemm_fp8 = importlib.import_module("gemm_fp8")

KW = dict(block_M=128, block_N=64, block_K=32, num_stages=3, threads=256)


class Machine:
    """The CUDA facts with a producer warpgroup always and `sms` multiprocessors."""

    def __init__(self, sms: int):
        self.sms = sms

    @hookimpl(tryfirst=True)
    def tile_target_facts(self, target):
        facts = cuda_facts(target=target)
        if facts is None:
            return None
        extra = tuple((k, "always" if k == "warp_specialize" and v else v) for k, v in facts.extra)
        return dataclasses.replace(facts, extra=extra + (("multiprocessors", self.sms),))


@pytest.fixture
def machine():
    names = []

    def use(sms: int):
        name = f"stream-k-{sms}-{len(names)}"
        plugins.register(Machine(sms), name=name)
        names.append(name)

    yield use
    for name in names:
        plugins.unregister(name)


def _run(M, N, K, seed=0, module=None):
    kernel = tilecore.compile(gemm.program(M=M, N=N, K=K, stream_k=True, **KW), target="emu:sm_90a")
    (ws, _), (fs, _) = gemm.stream_k_shapes(M, N, KW["block_M"], KW["block_N"])
    a, b = gemm.make_inputs(np.random.default_rng(seed), M=M, N=N, K=K)
    w = np.full(ws, np.nan, np.float32)  # nothing may read a partial no block wrote
    flags = np.zeros(fs, np.int32)
    c = np.full((M, N), np.nan, np.float16)
    if module is None:
        kernel(a, b, w, flags, c)
    else:
        EmuArtifact(module(kernel.stages[-1][1])).run([a, b, w, flags, c], {})
    return kernel, a, b, w, flags, c


@pytest.mark.parametrize("sms, M, N, K", [
    (4, 200, 136, 136),  # 6 tiles: 4 whole, 2 x 5 k steps over 4 blocks (runs of 3, 3, 2, 2)
    (5, 200, 136, 136),  # one tile cut five ways: four contributors, one finisher
    (5, 300, 200, 456),  # 12 tiles, K tail (456 = 14 x 32 + 8): 2 x 15 k steps over 5 blocks
])
def test_stream_k_splits_the_last_wave(machine, sms, M, N, K):
    machine(sms)
    kernel, a, b, w, flags, c = _run(M, N, K)
    ir = kernel.get_ir("final")
    assert "for unit in serial(" in ir and "for unit_produce in serial(" in ir
    ref = gemm.reference(a, b).astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, **gemm.TOLERANCE)
    assert not flags.any()  # the finishers reset the counters for the next call
    again = np.full_like(c, np.nan)
    kernel(a, b, w, flags, again)
    assert np.array_equal(again, c)  # deterministic: the partials are added in block order


def test_full_waves_do_not_touch_the_workspace(machine):
    machine(3)  # 6 tiles on 3 blocks: two whole waves
    kernel, a, b, w, flags, c = _run(200, 136, 136)
    assert "for unit in" not in kernel.get_ir("final")
    ref = gemm.reference(a, b).astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, **gemm.TOLERANCE)
    assert np.isnan(w).all() and not flags.any()


def _without_partials(module):
    """The finishers' additions of the contributors' partials dropped."""
    def adds(s) -> bool:
        return isinstance(s, For) and s.var.name == "contributor"

    def fn(n):
        if isinstance(n, SeqStmt) and any(adds(s) for s in n.stmts):
            return SeqStmt(tuple(s for s in n.stmts if not adds(s)), n.loc)
        return None
    return module.with_func(module.func.with_body(rewrite(module.func.body, fn)))


def test_dropping_the_fixup_is_wrong(machine):
    machine(4)
    _, a, b, _, _, c = _run(200, 136, 136, module=_without_partials)
    ref = gemm.reference(a, b).astype(np.float32)
    assert not np.allclose(c.astype(np.float32), ref, **gemm.TOLERANCE)


def test_stream_k_arguments_are_checked(machine):
    machine(4)

    with pytest.raises(TileTypeError, match="workspace must be a float32 tensor parameter; W is float16"):
        @T.prim_func
        def bad(A: T.Tensor((128, 64), "float16"), W: T.Tensor((16,), "float16"),
                F: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=128):
                T.stream_k(W, F)
                A[0, 0] = 0

    with pytest.raises(TileShapeError, match="T.stream_k workspace W has 1 elements") as err:
        tilecore.compile(_tiny_workspace(200, 136, 136), target="emu:sm_90a")
    assert "test_emu_stream_k.py:" in str(err.value)  # the T.stream_k line


def _tiny_workspace(M, N, K):
    bm, bn, bk = KW["block_M"], KW["block_N"], KW["block_K"]

    @T.prim_func
    def g(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), W: T.Tensor((1,), "float32"),
          F: T.Tensor((6,), "int32"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            T.stream_k(W, F)
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return g


def test_fp8_stream_k_scales_the_summed_tile(machine):
    """examples/gemm_fp8.py: the epilogue's scale multiplies the finished tile once (a
    contributor hands over its unscaled accumulator)."""
    machine(4)
    M, N, K = 200, 136, 320
    kw = dict(block_M=128, block_N=64, block_K=64, num_stages=3, threads=256)
    kernel = tilecore.compile(gemm_fp8.program(M=M, N=N, K=K, stream_k=True, **kw), target="emu:sm_90a")
    assert "for unit in serial(" in kernel.get_ir("final")
    (ws, _), (fs, _) = gemm_fp8.stream_k_shapes(M, N, 128, 64)
    a, b = gemm_fp8.make_inputs(np.random.default_rng(3), M=M, N=N, K=K)
    flags = np.zeros(fs, np.int32)
    ref = gemm_fp8.reference(a, b)
    y = np.zeros((M, N), ref.dtype)
    kernel(a, b, np.full(ws, np.nan, np.float32), flags, y)
    np.testing.assert_allclose(y.astype(np.float32), ref.astype(np.float32), **gemm_fp8.TOLERANCE)
    assert not flags.any()
