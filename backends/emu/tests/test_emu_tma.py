"""TMA and mbarriers in the emulator and the `async-pipeline` pass (docs/architecture.md,
"Hopper: TMA, mbarrier, warp specialization").

Hand-built programs check the semantics: a TMA box lands (zero-filled outside the tensor, in
the shared layout) at the wait that observes its phase; a read before that wait is a race; a
phase that can never complete (wrong byte count, missing expect-tx or arrive, wrong parity)
is reported as a deadlock, not an endless loop. Then the lowering: examples/gemm.py on
`emu:sm_90` uses TMA stages, matches NumPy on ragged shapes, and deleting its mbarrier wait,
its refill barrier or changing its byte count is reported with the user's line.
"""

import dataclasses
import importlib

import numpy as np
import pytest

import tilecore
from tilecore import dtypes as dt
from tilecore import plugins
from tilecore.emulator.machine import Block, EmuArtifact
from tilecore.errors import TileRuntimeError
from tilecore.hookspec import hookimpl
from tilecore.ir.buffer import Buffer
from tilecore.ir.expr import Var, binop, const
from tilecore.ir.smem_layout import RowMajor, Swizzled
from tilecore.ir.stmt import For, IfThenElse, SeqStmt
from tilecore.ir.thread import (
    MBARRIER_DTYPE,
    AsyncCommit,
    AsyncWait,
    Barrier,
    MbarrierArrive,
    MbarrierInit,
    MbarrierWait,
    MemLoad,
    MemStore,
    ThreadKernel,
    TmaLoad,
    TmaStore,
)
from tilecore.ir.thread_printer import print_thread_node
from tilecore.ir.visit import rewrite

pytest.importorskip("tilecore_cuda")
from tilecore_cuda.lowering import tile_target_facts as cuda_facts  # noqa: E402

gemm = importlib.import_module("gemm")


class AlwaysSpecialize:
    """The CUDA facts with `warp_specialize` "always": small test kernels get a producer
    warpgroup although two blocks of them would fit on a multiprocessor."""

    @hookimpl(tryfirst=True)
    def tile_target_facts(self, target):
        facts = cuda_facts(target=target)
        if facts is None:
            return None
        extra = tuple((k, "always" if k == "warp_specialize" and v else v) for k, v in facts.extra)
        return dataclasses.replace(facts, extra=extra)


@pytest.fixture
def always_ws():
    plugins.register(AlwaysSpecialize(), name="always-ws")
    yield
    plugins.unregister("always-ws")

T = 64
tx = Var("tx")
ROWS, COLS = 10, 16
G = Buffer("G", (ROWS, COLS), dt.float32, "global")
OUT = Buffer("Out", (8 * COLS,), dt.float32, "global")
S = Buffer("S", (8 * COLS,), dt.float32, "shared", layout=RowMajor(8, COLS))
BAR = Buffer("bar", (2,), MBARRIER_DTYPE, "shared")
first = binop("eq", tx, 0)


def _load(row0=4, bar_offset=0):
    return TmaLoad(S, const(0), G, (const(row0), const(0)), (8, COLS), S.layout, BAR, const(bar_offset))


def _init(count=1):
    return IfThenElse(first, MbarrierInit(BAR, const(0), count), None)


def _arm(nbytes=8 * COLS * 4, *loads):
    return IfThenElse(first, SeqStmt((MbarrierArrive(BAR, const(0), nbytes),) + (loads or (_load(),))), None)


def _read_all():
    """Every thread copies its two elements of the 8x16 shared tile to Out."""
    return SeqStmt(tuple(MemStore(OUT, tx + T * r, MemLoad(S, tx + T * r)) for r in range(2)))


def _run(*stmts, g=None) -> np.ndarray:
    g = np.arange(ROWS * COLS, dtype=np.float32) + 1 if g is None else g
    out = np.full(8 * COLS, -1, dtype=np.float32)
    k = ThreadKernel((const(1),), (Var("bx"),), tx, T, 32, (S, BAR), (), SeqStmt(tuple(stmts)))
    Block(k, {id(G): g, id(OUT): out}, {}, [G, OUT]).run_grid()
    return out


def test_box_lands_at_the_wait_with_zero_fill():
    out = _run(_init(), Barrier(), _arm(), MbarrierWait(BAR, const(0), const(0)), _read_all())
    g = (np.arange(ROWS * COLS, dtype=np.float32) + 1).reshape(ROWS, COLS)
    want = np.zeros((8, COLS), dtype=np.float32)
    want[:ROWS - 4] = g[4:]  # rows 10.. lie outside the tensor: zeros
    np.testing.assert_array_equal(out.reshape(8, COLS), want)


def test_read_before_the_wait_is_a_race():
    with pytest.raises(TileRuntimeError, match="has landed") as err:
        _run(_init(), Barrier(), _arm(), _read_all(), MbarrierWait(BAR, const(0), const(0)))
    assert "MbarrierWait" in err.value.hint


@pytest.mark.parametrize("case", ["bytes", "parity", "arrivals"])
def test_a_phase_that_cannot_complete_is_a_deadlock(case):
    arm = {"bytes": _arm(8 * COLS * 4 + 16), "parity": _arm(), "arrivals": _arm()}[case]
    parity = const(1) if case == "parity" else const(0)
    init = _init(2 if case == "arrivals" else 1)
    with pytest.raises(TileRuntimeError, match="deadlock") as err:
        _run(init, Barrier(), arm, MbarrierWait(BAR, const(0), parity))
    assert "transaction bytes" in str(err.value)


def test_a_missing_expect_tx_completes_the_phase_early():
    # a plain arrive completes phase 0 before the copy counts its bytes: the wait returns and
    # the tile has not landed (the copy completes on phase 1, which nobody waits for)
    with pytest.raises(TileRuntimeError, match="has landed"):
        _run(_init(), Barrier(), _arm(0), MbarrierWait(BAR, const(0), const(0)), _read_all())


def test_mbarrier_needs_init_and_a_barrier_after_it():
    with pytest.raises(TileRuntimeError, match="before MbarrierInit"):
        _run(_arm(), MbarrierWait(BAR, const(0), const(0)))
    with pytest.raises(TileRuntimeError, match="data race on shared buffer bar"):
        _run(_init(), _arm(), MbarrierWait(BAR, const(0), const(0)))


def test_phases_alternate_and_refill_needs_the_readers_ordered():
    # two tiles through one stage: tile 0 (rows 0..7) at parity 0, tile 1 (rows 2..9) at parity 1
    wait0, wait1 = MbarrierWait(BAR, const(0), const(0)), MbarrierWait(BAR, const(0), const(1))
    out = _run(_init(), Barrier(), _arm(), wait0, _read_all(), Barrier(),
               _arm(8 * COLS * 4, _load(2)), wait1, _read_all())
    g = (np.arange(ROWS * COLS, dtype=np.float32) + 1).reshape(ROWS, COLS)
    np.testing.assert_array_equal(out.reshape(8, COLS), g[2:])
    with pytest.raises(TileRuntimeError, match="issues an asynchronous copy into"):
        _run(_init(), Barrier(), _arm(), wait0, _read_all(), _arm(8 * COLS * 4, _load(2)), wait1)


def test_swizzled_box_placement_and_clipped_store():
    h = Buffer("H", (20, 64), dt.float16, "global")
    lay = Swizzled(8, 64, bits=3, base=3, shift=3)  # TMA's 128-byte swizzle
    sh = Buffer("Sh", (8 * 64,), dt.float16, "shared", layout=lay)
    out = Buffer("O", (20, 64), dt.float16, "global")
    load = TmaLoad(sh, const(0), h, (const(16), const(0)), (8, 64), lay, BAR, const(0))
    store = TmaStore(sh, const(0), out, (const(16), const(0)), (8, 64), lay)
    assert load.swizzle == 128 and load.nbytes == 1024 and store.swizzle == 128
    arm = IfThenElse(first, SeqStmt((MbarrierArrive(BAR, const(0), 1024), load)), None)
    issue = IfThenElse(first, SeqStmt((store, AsyncCommit("bulk"), AsyncWait("bulk", 0))), None)
    body = (_init(), Barrier(), arm, MbarrierWait(BAR, const(0), const(0)), Barrier(), issue)
    k = ThreadKernel((const(1),), (Var("bx"),), tx, T, 32, (sh, BAR), (), SeqStmt(body))
    src = np.random.default_rng(0).standard_normal((20, 64)).astype(np.float16)
    dst = np.zeros((20, 64), dtype=np.float16)
    Block(k, {id(h): src.reshape(-1), id(out): dst.reshape(-1)}, {}, [h, out]).run_grid()
    np.testing.assert_array_equal(dst[16:], src[16:])  # rows 16..19 stored, 20..23 clipped
    assert not dst[:16].any()
    assert "tma_load Sh[0] swizzled 8x64 Swizzle<3,3,3> <- H[16 : +8, 0 : +64] else zero" in \
        print_thread_node(load)


def test_layouts_tma_cannot_write_are_rejected():
    with pytest.raises(TypeError, match="no TMA swizzle mode"):
        lay = Swizzled(8, 128, bits=3, base=3, shift=4)
        TmaLoad(Buffer("X", (1024,), dt.float16, "shared", layout=lay), const(0),
                Buffer("Y", (8, 128), dt.float16, "global"), (const(0), const(0)), (8, 128), lay, BAR,
                const(0))


# ----------------------------------------------------------------------------- the pipeline


def _gemm(M, N, K, ws=True, wgmma=True, **kw):
    configs = {} if ws else {"tl.disable_warp_specialized": True}
    if not wgmma:
        configs["tl.disable_wgmma"] = True
    return tilecore.jit(gemm.program(M=M, N=N, K=K, **kw), out_idx=gemm.OUT_IDX, target="emu:sm_90a",
                        pass_configs=configs or None)


@pytest.mark.parametrize("M, N, K, kw, ws", [
    (130, 72, 104, dict(block_N=64), True),  # ragged M, N and a K tail; A and B by TMA
    (130, 72, 104, dict(block_N=64), False),  # the same without warp specialization
    (64, 72, 48, dict(block_M=64, block_N=64, num_stages=4), True),  # fewer tiles than stages - 1
    (128, 136, 72, dict(), True),  # wgmma: B in two 64-column panels, one TMA box each
    (128, 136, 100, dict(), True),  # A's 200-byte rows stay cp.async, B by TMA, no producer
])
def test_gemm_with_tma_stages_matches_numpy(M, N, K, kw, ws, always_ws):
    kernel = _gemm(M, N, K, ws, **kw)
    ir = kernel.get_ir("final")
    all_tma = K % 8 == 0  # A's rows are 16-byte multiples
    assert ("tma_load A_shared" in ir) == all_tma and "tma_load B_shared" in ir and "mbarrier_wait" in ir
    # a producer warpgroup when every stage is TMA's; the consumers sync on named barrier 1
    assert ("producer (threads >= 128, setmaxnreg 40)" in ir) == (ws and all_tma)
    if ws and all_tma:
        assert "barrier(id=1, threads=128)" in ir and "barrier()  #" in ir.split("producer (")[0]
        assert "barrier()" not in ir.split("producer (")[1]
    a, b = gemm.make_inputs(np.random.default_rng(1), M=M, N=N, K=K)
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)


def test_unaligned_rows_and_older_archs_keep_cp_async():
    ir = _gemm(64, 64, 100, block_M=64, block_N=64).get_ir("final")
    assert "tma_load A_shared" not in ir and "tma_load B_shared" in ir  # A's rows: 200 bytes
    k = tilecore.jit(gemm.program(M=64, N=64, K=64, block_M=64, block_N=64), out_idx=[-1], target="emu:sm_80")
    assert "tma_load" not in k.get_ir("final") and "async " in k.get_ir("final")
    prog = gemm.program(M=64, N=64, K=64, block_M=64, block_N=64)
    off = tilecore.jit(prog, out_idx=[-1], target="emu:sm_90a", pass_configs={"tl.disable_tma_lower": True})
    off = off.get_ir("final")
    assert "tma_load" not in off and "async " in off


def _mutate(module, fn):
    return module.with_func(module.func.with_body(rewrite(module.func.body, fn)))


def _drop(kind, why=""):
    """A rewrite removing the `kind` statements (barriers: those whose reason has `why`)."""
    def gone(s):
        return isinstance(s, kind) and why in getattr(s, "reason", "")

    def fn(n):
        if isinstance(n, SeqStmt) and any(gone(s) for s in n.stmts):
            return SeqStmt(tuple(s for s in n.stmts if not gone(s)), n.loc)
        return None

    return fn


def _waits_on(prefix):
    def fn(n):
        if isinstance(n, SeqStmt):
            keep = tuple(s for s in n.stmts
                         if not (isinstance(s, MbarrierWait) and s.bar.name.startswith(prefix)))
            return SeqStmt(keep, n.loc) if len(keep) != len(n.stmts) else None
        return None

    return fn


def _no_release(n):
    """Drop the consumers' arrivals on the empty ring (bare, or under the relaxed loop's `if`)."""
    def release(s):
        if isinstance(s, IfThenElse) and s.else_body is None:
            s = s.then_body
        return isinstance(s, MbarrierArrive) and s.bar.name.startswith("tma_empty")

    if isinstance(n, SeqStmt):
        keep = tuple(s for s in n.stmts if not release(s))
        return SeqStmt(keep, n.loc) if len(keep) != len(n.stmts) else None
    return None


def _short(n):
    """Two bytes fewer expected than the stage's copies complete."""
    if isinstance(n, MbarrierArrive) and n.expect_tx:
        return dataclasses.replace(n, expect_tx=n.expect_tx - 2)
    return None


@pytest.mark.parametrize("ws", [True, False])
def test_gemm_mutations_are_reported_with_the_users_line(ws, always_ws):
    M = N = 64
    K = 128
    # two consumer warpgroups: thread 0's wgmma wait retires only its own warpgroup's reads of
    # a stage, so the refill needs the barrier (with one warpgroup it would not)
    kernel = _gemm(128, N, K, ws, block_M=128, block_N=64, threads=256)
    M = 128
    final = kernel.stages[-1][1]
    a, b = gemm.make_inputs(np.random.default_rng(0), M=M, N=N, K=K)

    def run(module):
        EmuArtifact(module).run([a, b, np.zeros((M, N), dtype=np.float16)], {})

    run(final)  # the unmodified program runs clean
    reused = [(_waits_on("tma_empty"), "issues an asynchronous copy into"),  # producer refills early
              (_no_release, "deadlock")] if ws else \
        [(_drop(Barrier, "_shared read at"), "issues an asynchronous copy into")]  # the refill barrier
    for mutation, message in [(_waits_on("tma_full"), "has landed"), (_short, "deadlock")] + reused:
        with pytest.raises(TileRuntimeError, match=message) as err:
            run(_mutate(final, mutation))
        assert "gemm.py:" in str(err.value)


def two_loops(M, N, K, K2, dtype="float16"):
    """C = A @ B + D @ E with two pipelined loops in one block (2 and 3 stages)."""
    import tilecore.language as T

    @T.prim_func
    def two(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), D: T.Tensor((M, K2), dtype),
            E: T.Tensor((K2, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), dtype)
            B_s = T.alloc_shared((32, 64), dtype)
            D_s = T.alloc_shared((64, 32), dtype)
            E_s = T.alloc_shared((32, 64), dtype)
            C_local = T.alloc_fragment((64, 64), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_local)
            for k in T.Pipelined(T.ceildiv(K2, 32), num_stages=3):
                T.copy(D[by * 64, k * 32], D_s)
                T.copy(E[k * 32, bx * 64], E_s)
                T.gemm(D_s, E_s, C_local)
            T.copy(C_local, C[by * 64, bx * 64])

    return two


def test_warp_specialization_only_where_one_block_fits_anyway():
    tile = dict(block_M=64, block_N=64, block_K=64)
    small = _gemm(64, 64, 448, **tile).get_ir("final")  # 3 stages of 16 KB: several blocks per SM
    assert "tma_load" in small and "producer (" not in small
    big = _gemm(64, 64, 448, num_stages=7, **tile).get_ir("final")  # 120 KB
    assert "producer (threads >= 128, setmaxnreg 40)" in big


def test_two_pipelined_loops_share_one_producer(always_ws):
    M, N, K, K2 = 72, 64, 40, 104
    kernel = tilecore.jit(two_loops(M, N, K, K2), out_idx=[-1], target="emu:sm_90a")
    ir = kernel.get_ir("final")
    producer = ir.split("producer (")[1].split("consumer (")[0]
    assert producer.count("for k_produce") == 2 and producer.count("tma_load") == 4
    rng = np.random.default_rng(0)
    a, b, d, e = (rng.standard_normal(s).astype(np.float16) for s in ((M, K), (K, N), (M, K2), (K2, N)))
    ref = a.astype(np.float32) @ b.astype(np.float32) + d.astype(np.float32) @ e.astype(np.float32)
    np.testing.assert_allclose(kernel(a, b, d, e).astype(np.float32), ref, rtol=1e-2, atol=1e-2)


def test_warp_specialized_wgmma_with_two_consumer_warpgroups():
    # 128 KB of stages: one block per SM, so a producer warpgroup joins the 256 consumers
    kw = dict(block_M=128, block_N=128, block_K=64, num_stages=4, threads=256)
    kernel = _gemm(128, 128, 200, **kw)
    ir = kernel.get_ir("final")
    assert "producer (threads >= 256, setmaxnreg 40)" in ir
    assert "consumer (threads < 256, setmaxnreg 232)" in ir
    assert "wgmma.mma_async" in ir and "barrier(id=1, threads=256)" in ir
    a, b = gemm.make_inputs(np.random.default_rng(3), M=128, N=128, K=200)
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)


def test_verifier_rejects_a_block_barrier_inside_a_role():
    from tilecore.errors import TileInternalError
    from tilecore.ir.module import PrimFunc
    from tilecore.ir.thread import WarpSpecialized
    from tilecore.ir.thread_verifier import verify_thread_func

    def func(consumer):
        ws = WarpSpecialized(128, SeqStmt((MbarrierWait(BAR, const(0), const(1)),)), consumer)
        k = ThreadKernel((const(1),), (Var("bx"),), tx, 256, 32, (S, BAR), (), SeqStmt((ws,)))
        return PrimFunc("roles", (G, OUT), k)

    verify_thread_func(func(Barrier("consumers", None, "named", 1, 128)))
    with pytest.raises(TileInternalError, match="block barrier inside a warp-specialized role"):
        verify_thread_func(func(Barrier("everyone")))


def _release_own_stage(n):
    """The relaxed loop releasing the stage it just issued wgmma on (instead of the previous
    one, whose group its `wait_group 1` retired)."""
    if not (isinstance(n, For) and n.annotation("warp_specialized")):
        return None
    stmts = n.body.stmts
    stage = stmts[0].var  # `stage = (k - start) % s`
    own = [MbarrierArrive(s.then_body.bar, stage, 0, s.loc)
           if isinstance(s, IfThenElse) and isinstance(s.then_body, MbarrierArrive) else s for s in stmts]
    body = tuple(own)
    return dataclasses.replace(n, body=SeqStmt(body, n.body.loc))


@pytest.mark.parametrize("M, N, K, stages", [(128, 64, 200, 3), (128, 72, 40, 2), (100, 64, 16, 4)])
def test_warp_specialized_wgmma_keeps_one_group_in_flight(M, N, K, stages, always_ws):
    # ragged M / N, a K tail, one tile only, and two stages (the relaxed ring then holds one
    # stage for the tensor cores and lets the producer fill the other)
    kernel = _gemm(M, N, K, block_M=128, block_N=64, block_K=32, num_stages=stages, threads=256)
    ir = kernel.get_ir("final")
    loop = ir.split("consumer (")[1].split("for k in")[1]
    assert "async_wait(wgmma, pending=1)" in loop.split("C_stage")[0]
    assert "async_wait(wgmma, pending=0)" in loop  # after the loop, before the epilogue
    a, b = gemm.make_inputs(np.random.default_rng(4), M=M, N=N, K=K)
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)
    if K // 32 > stages:  # a stage is refilled while the loop runs: releasing it early races
        with pytest.raises(TileRuntimeError, match="asynchronous") as err:
            EmuArtifact(_mutate(kernel.stages[-1][1], _release_own_stage)).run(
                [a, b, np.zeros((M, N), dtype=np.float16)], {})
        assert "gemm.py:" in str(err.value)


class PersistentOnTwo:
    """The CUDA facts with a producer warpgroup always and a 2-multiprocessor machine, so a
    small grid already runs persistently (each of 2 blocks walks several tiles)."""

    @hookimpl(tryfirst=True)
    def tile_target_facts(self, target):
        facts = cuda_facts(target=target)
        if facts is None:
            return None
        extra = tuple((k, "always" if k == "warp_specialize" and v else v) for k, v in facts.extra)
        return dataclasses.replace(facts, extra=extra + (("multiprocessors", 2),))


@pytest.fixture
def two_sms():
    plugins.register(PersistentOnTwo(), name="two-sms")
    yield
    plugins.unregister("two-sms")


@pytest.mark.parametrize("M, N, K, kw", [
    (200, 72, 136, dict()),  # 2 x 2 tiles on 2 blocks; 5 k tiles on 3 stages: the ring rotates
    (130, 72, 104, dict(panel=2)),  # ragged, rasterized (the remap is re-bound per tile)
])
def test_persistent_blocks_walk_the_tiles(M, N, K, kw, two_sms):
    kernel = _gemm(M, N, K, block_M=128, block_N=64, block_K=32, num_stages=3, threads=256, **kw)
    ir = kernel.get_ir("final")
    # producer and consumers walk the same tiles, each with its own loop variable
    assert "for tile in serial(block_id," in ir and "for tile_produce in serial(block_id," in ir
    a, b = gemm.make_inputs(np.random.default_rng(5), M=M, N=N, K=K)
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)
    final = kernel.stages[-1][1]
    # the consumers' release of a tile's last stage is what lets the producer start the next
    # tile: without it the ring deadlocks
    with pytest.raises(TileRuntimeError, match="deadlock"):
        EmuArtifact(_mutate(final, _no_release)).run([a, b, np.zeros((M, N), dtype=np.float16)], {})


def test_one_wave_grids_and_attention_like_loops_stay_one_tile_per_block(two_sms):
    ir = _gemm(128, 64, 64, block_M=128, block_N=64, block_K=32, threads=256).get_ir("final")
    assert "for tile in" not in ir  # one tile: nothing to walk
    M, N, K, K2 = 72, 192, 40, 104
    k = tilecore.jit(two_loops(M, N, K, K2), out_idx=[-1], target="emu:sm_90a")
    ir = k.get_ir("final")
    assert "for tile in" not in ir and "tile_base = 0" in ir  # two staged loops: not a GEMM main loop
    rng = np.random.default_rng(2)
    a, b, d, e = (rng.standard_normal(s).astype(np.float16) for s in ((M, K), (K, N), (M, K2), (K2, N)))
    ref = a.astype(np.float32) @ b.astype(np.float32) + d.astype(np.float32) @ e.astype(np.float32)
    np.testing.assert_allclose(k(a, b, d, e).astype(np.float32), ref, rtol=1e-2, atol=1e-2)
