"""`T.atomic_add(..., use_tma=True)` (tilecore.lower.tma_reduce) on `emu:sm_90`: a float32
accumulator tile added with TMA reduce-add through a shared staging tile, by several blocks
into the same region and several times per block (the staging tile reused: the bulk reads must
finish first), clipped at a ragged edge; the per-element fallback with a warning where TMA is
missing; and the FlashAttention backward with its dQ reduced that way."""

import warnings

import flash_attention
import flash_attention_bwd
import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileConfigWarning


def _program(rows, passes, blocks):
    """Out[r, h, :] += passes * blocks * (A @ B)[r, :] for each of the two h slices."""

    @T.prim_func
    def reduce_kernel(A: T.Tensor((rows, 32), "float16"), B: T.Tensor((32, 64), "float16"),
                      Out: T.Tensor((rows, 2, 64), "float32")):
        with T.Kernel(T.ceildiv(rows, 64), 2, blocks, threads=128) as (bx, by, bz):
            a = T.alloc_shared((64, 32), "float16")
            b = T.alloc_shared((32, 64), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            T.copy(A[bx * 64:(bx + 1) * 64, :], a)
            T.copy(B[:, :], b)
            for _ in T.serial(passes):
                T.clear(c)
                T.gemm(a, b, c)
                T.atomic_add(Out[bx * 64:(bx + 1) * 64, by, :], c, use_tma=True)

    return reduce_kernel


def _inputs(rows):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((rows, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    return a, b, (a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("target,bulk", [("emu:sm_90", True), ("emu:sm_80", False)])
def test_tile_reduce_add_adds_every_pass_of_every_block(target, bulk):
    rows, passes, blocks = 100, 2, 2  # ragged: the second row tile has 36 rows
    a, b, want = _inputs(rows)
    func = _program(rows, passes, blocks)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kern = tilecore.compile(func, target=target)
    src = kern.get_kernel_source()
    assert ("tma_reduce_add" in src) == bulk
    told = [w for w in caught if issubclass(w.category, TileConfigWarning) and "use_tma" in str(w.message)]
    assert bool(told) != bulk  # the fallback says so, naming the line
    out = np.zeros((rows, 2, 64), np.float32)
    kern(a, b, out)
    np.testing.assert_allclose(out, np.repeat((passes * blocks * want)[:, None, :], 2, axis=1),
                               rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("causal,early", [(False, False), (True, True)], ids=["plain", "causal-dq-early"])
def test_backward_with_bulk_dq(causal, early):
    """The sm_90 tiles (128 keys x 64 queries, two consumer warpgroups), GQA, ragged length;
    dQ added by TMA reduce-add. The emulator reads a bulk store's box at its issue, so the
    staging tile's reuse is checked in the lowered code: a barrier follows thread 0's wait for
    the previous reduction before anybody writes the tile (the dS barrier earlier in the loop
    does not order it)."""
    sizes = dict(batch=1, heads=2, kv_heads=1, seq_len=150, dim=64)
    tiles = dict(block_M=64, block_N=128, num_stages=2, threads=256, dq_tma=True, dq_early=early,
                 stagger=True)
    src = tilecore.compile(flash_attention_bwd.program(**sizes, is_causal=causal, **tiles),
                           target="emu:sm_90").get_kernel_source().splitlines()
    wait = next(i for i, x in enumerate(src) if "async_wait(bulk, pending=0)" in x)
    write = next(i for i, x in enumerate(src) if i > wait and "dQ_tma_stage[" in x)
    assert any("barrier()" in x for x in src[wait:write])
    q, k, v = flash_attention.make_inputs(np.random.default_rng(5), **sizes)
    do = np.random.default_rng(6).standard_normal(q.shape).astype(q.dtype)
    o, lse = tilecore.jit(flash_attention.program(**sizes, is_causal=causal, return_lse=True),
                          out_idx=[-2, -1], target="interp")(q, k, v)
    got = flash_attention_bwd.backward(q, k, v, o, do, lse, causal, "emu:sm_90", **tiles)
    for g, w in zip(got, flash_attention_bwd.gradients64(q, k, v, do, causal)):
        np.testing.assert_allclose(np.asarray(g, np.float32), w, **flash_attention_bwd.TOLERANCE)


@pytest.mark.parametrize("disabled", [False, True])
def test_staging_stores_exchange_registers_to_be_conflict_free(disabled):
    """A float32 accumulator stores 8 bytes per lane (four 32-byte rows per phase), and in the
    staging tile's 128-byte swizzle panels rows r and r ^ 1 share banks (2-way). `store_swap`
    has half the lanes store a partner register run in place of each run, so every phase fills
    the line: the lowered stores, tabulated on their own (tilecore.lower.banks), are
    conflict-free, with the same panels and boxes, and the sums are unchanged.
    `tilecore.disable_staged_swizzle` keeps the plain order."""
    from tilecore.ir.thread import find_kernel
    from tilecore.lower.banks import shared_accesses
    from tilecore.lower.smem import BankModel

    rows, passes, blocks = 100, 2, 2
    a, b, want = _inputs(rows)
    configs = {"tilecore.disable_staged_swizzle": True} if disabled else None
    kern = tilecore.compile(_program(rows, passes, blocks), target="emu:sm_90", pass_configs=configs)
    k = find_kernel(kern.stages[-1][1].func.body)
    stage = next(x for x in k.shared if x.name.endswith("_tma_stage"))
    degrees = {x.degree for x in shared_accesses(k, BankModel(4, 32, 16))
               if x.buffer == stage.name and x.kind == "vector store"}
    assert stage.layout.panel * 4 == 128
    assert degrees == ({2} if disabled else {1})
    src = kern.get_kernel_source()
    assert src.count("tma_reduce_add") == 2  # one per panel either way
    assert ("T.if_then_else(tx" in src) != disabled  # the exchanged registers
    out = np.zeros((rows, 2, 64), np.float32)
    kern(a, b, out)
    np.testing.assert_allclose(out, np.repeat((passes * blocks * want)[:, None, :], 2, axis=1),
                               rtol=1e-4, atol=1e-3)
