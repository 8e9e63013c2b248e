"""TileLang's register hints (tilecore/language/hints.py) on tilecore's own warp specialization:
`T.annotate_producer_reg_dealloc(n)` / `T.annotate_consumer_reg_alloc(n)` are the setmaxnreg
counts of the warp-specialized sm_90a GEMM (cuda source, emu:sm_90a run against NumPy),
`T.no_set_max_nreg()` / `T.disable_warp_group_reg_alloc()` leave setmaxnreg out; where nothing
applies them (no setmaxnreg on the target, no warp specialization) each warns once at its line."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileConfigWarning, TileShapeError

pytest.importorskip("tilecore_cuda")
from test_emu_tma import PersistentOnTwo  # noqa: E402

from tilecore import plugins  # noqa: E402

M, N, K = 64, 64, 448


def gemm(hints=(), stages=7, bm=64, bn=64, threads=128, M=M, N=N):
    """A pipelined GEMM whose 7 stages of 16 KB need one block per multiprocessor, so sm_90a
    warp-specializes it (tilecore.lower.warp_specialize); `hints`: (kind, count) pairs."""
    def hint(kind, n):
        if kind == "producer":
            T.annotate_producer_reg_dealloc(n)
        elif kind == "consumer":
            T.annotate_consumer_reg_alloc(n)
        elif kind == "disable":
            T.disable_warp_group_reg_alloc()
        else:
            T.no_set_max_nreg()

    @T.prim_func
    def g(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            for kind, n in hints:
                hint(kind, n)
            A_s = T.alloc_shared((bm, 64), "float16")
            B_s = T.alloc_shared((64, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=stages):
                T.copy(A[by * bm, k * 64], A_s)
                T.copy(B[k * 64, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return g


def _setmaxnreg(src: str) -> list[str]:
    return [line.strip() for line in src.splitlines() if "setmaxnreg" in line]


def _quiet_compile(prog, target, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", TileConfigWarning)  # honoured: nothing to warn about
        return tilecore.compile(prog, out_idx=[-1], target=target, **kw)


def _inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((M, K)).astype(np.float16), rng.standard_normal((K, N)).astype(np.float16)


def _check(kernel):
    a, b = _inputs()
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), a.astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("hints, want", [
    ((), (40, 240)),  # tilecore's own split
    ((("producer", 24), ("consumer", 232)), (24, 232)),
    ((("consumer", 200),), (40, 200)),
    ((("producer", 56),), (56, 240)),
])
def test_annotated_counts_are_the_warp_specialized_kernels_setmaxnreg(hints, want):
    src = _quiet_compile(gemm(hints), "cuda:sm_90a").get_kernel_source()
    assert "producer warpgroup" in src
    assert _setmaxnreg(src) == [f'asm volatile("setmaxnreg.dec.sync.aligned.u32 {want[0]};");',
                                f'asm volatile("setmaxnreg.inc.sync.aligned.u32 {want[1]};");']


@pytest.mark.parametrize("off", ["no_set_max_nreg", "disable"])
def test_no_set_max_nreg_leaves_setmaxnreg_out(off):
    src = _quiet_compile(gemm(((off, 0),)), "cuda:sm_90a").get_kernel_source()
    assert "producer warpgroup" in src and _setmaxnreg(src) == []


def test_emu_sm90a_runs_the_annotated_and_the_unset_kernels():
    k = _quiet_compile(gemm((("producer", 24), ("consumer", 232))), "emu:sm_90a")
    assert "producer (threads >= 128, setmaxnreg 24):" in k.get_ir("final")
    assert "consumer (threads < 128, setmaxnreg 232):" in k.get_ir("final")
    _check(k)
    off = _quiet_compile(gemm((("no_set_max_nreg", 0),)), "emu:sm_90a")
    assert "producer (threads >= 128):" in off.get_ir("final")
    _check(off)


def test_ping_pong_consumers_keep_the_annotated_counts():
    plugins.register(PersistentOnTwo(), name="two-sms-hints")
    try:
        # 2 x 2 tiles on the 2 blocks of PersistentOnTwo: persistent, so ping-pong applies
        k = tilecore.compile(gemm((("producer", 24), ("consumer", 216)), stages=3, bm=128, M=256, N=128),
                             out_idx=[-1], target="emu:sm_90a", pass_configs={"tilecore.ws_pingpong": True})
    finally:
        plugins.unregister("two-sms-hints")
    ir = k.get_ir("final")
    assert "producer (threads >= 256, setmaxnreg 24):" in ir
    assert "consumer (threads < 256, setmaxnreg 216, 2 independent groups):" in ir


def test_counts_the_register_file_cannot_hold_are_a_located_error():
    # 256 consumer threads x 240 + 128 producer threads x 40 = 66560 > 65536 registers
    prog = gemm((("producer", 40), ("consumer", 240)), stages=4, bm=128, bn=128, threads=256)
    with pytest.raises(TileShapeError, match="66560 registers") as e:
        tilecore.compile(prog, out_idx=[-1], target="cuda:sm_90a")
    assert "test_register_hints.py" in str(e.value) and "annotate_consumer_reg_alloc(232)" in str(e.value)


@pytest.mark.parametrize("count", [20, 100, 264])
def test_a_count_outside_setmaxnregs_range_is_a_located_error(count):
    with pytest.raises(TileShapeError, match="multiple of 8 in 24..256") as e:
        gemm((("consumer", count),))
    assert "test_register_hints.py" in str(e.value)


def test_two_different_counts_of_one_kind_are_a_located_error():
    with pytest.raises(TileShapeError, match="contradicts T.annotate_producer_reg_dealloc"):
        tilecore.compile(gemm((("producer", 24), ("producer", 32))), out_idx=[-1], target="cuda:sm_90a")


def _warned(prog, target) -> list[str]:
    with pytest.warns(TileConfigWarning) as rec:
        tilecore.compile(prog, out_idx=[-1], target=target)
    assert all(r.filename.endswith("test_register_hints.py") for r in rec)
    return [str(r.message) for r in rec]


@pytest.mark.parametrize("target", ["interp", "emu:sm_90", "cuda:sm_80"])
def test_targets_without_setmaxnreg_warn_once_per_hint(target):
    text = _warned(gemm((("producer", 24), ("consumer", 232), ("disable", 0)), stages=2), target)
    for what in ("T.annotate_producer_reg_dealloc(24) is accepted but not applied on",
                 "T.annotate_consumer_reg_alloc(232) is accepted but not applied on",
                 "T.disable_warp_group_reg_alloc() has nothing to turn off on"):
        hits = [t for t in text if what in t]
        assert len(hits) == 1 and f" {target}: setmaxnreg" in hits[0], text


def test_sm90a_warns_where_it_does_not_warp_specialize_or_setmaxnreg_is_off():
    small = _warned(gemm((("consumer", 232),), stages=2), "cuda:sm_90a")  # 2 x 16 KB: no producer
    assert len(small) == 1 and "did not warp-specialize this kernel for cuda:sm_90a" in small[0]
    off = _warned(gemm((("no_set_max_nreg", 0), ("producer", 24))), "cuda:sm_90a")
    assert len(off) == 1 and "T.no_set_max_nreg() (line" in off[0] and "turns setmaxnreg off" in off[0]
