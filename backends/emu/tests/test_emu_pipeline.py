"""T.Pipelined as a multi-stage cp.async pipeline on `emu:sm_80`: results against NumPy for ragged
shapes and short loops, FlashAttention's dependent gemms, which path each copy takes, and
mutations (a deleted or weakened wait, too few stage buffers) reported as races naming the
buffer and the user's line."""

import dataclasses
import importlib
import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
from tilecore.emulator.machine import EmuArtifact
from tilecore.errors import TileRuntimeError
from tilecore.ir.expr import BinOp, Const
from tilecore.ir.stmt import For, LetStmt, SeqStmt
from tilecore.ir.thread import AsyncWait
from tilecore.ir.thread_printer import print_thread_func
from tilecore.ir.visit import rewrite, walk
from tilecore.lower import async_pipelines, barriers, plan_shared, prefetch_pipelined
from tilecore.plugins import describe
from tilecore.target import Target, TargetDesc, TargetFacts

pytest.importorskip("tilecore_cuda")
gemm = importlib.import_module("gemm")
flash = importlib.import_module("flash_attention")


def _gemm(M, N, K, target="emu:sm_80", **kw):
    sizes = dict(M=M, N=N, K=K)
    kernel = tilecore.jit(gemm.program(**sizes, **kw), out_idx=[-1], target=target)
    a, b = gemm.make_inputs(np.random.default_rng(M * 7 + N * 3 + K), **sizes)
    return kernel, (a, b)


def _check(c, a, b):
    want = gemm.reference(a, b).astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), want, **gemm.TOLERANCE)


@pytest.mark.parametrize("M, N, K, stages", [
    (64, 64, 32, 3),     # one tile: fewer tiles than s - 1, the prologue's second tile is off
    (72, 40, 24, 4),     # K smaller than one tile, M/N ragged
    (130, 70, 200, 3),   # K tail (200 = 6 * 32 + 8), ragged M and N
    (64, 136, 100, 2),   # 8-byte A copies (K = 100), two stages
    (64, 64, 98, 3),     # 4-byte A copies (K = 98)
])
def test_pipelined_gemm_ragged(M, N, K, stages):
    kernel, (a, b) = _gemm(M, N, K, block_M=64, block_N=64, block_K=32, num_stages=stages)
    assert "async_wait(cp.async" in kernel.get_ir("async-pipeline")
    c = kernel(a, b)
    _check(c, a, b)


@settings(max_examples=8, deadline=None, derandomize=True, database=None)
@given(M=st.integers(1, 140), N=st.integers(1, 140), K=st.integers(1, 150), stages=st.integers(2, 4))
def test_pipelined_gemm_any_shape(M, N, K, stages):
    """Any M, N, K (so any row alignment: some copies cp.async, some synchronous) and stage count."""
    kernel, (a, b) = _gemm(M, N, K, block_M=64, block_N=64, block_K=32, num_stages=stages)
    _check(kernel(a, b), a, b)


def test_two_byte_rows_stay_synchronous():
    """K = 99: A's rows are 2-byte aligned only, so A is copied synchronously in place while B
    (16-byte rows) is staged; the result is still exact to the tolerance."""
    kernel, (a, b) = _gemm(64, 64, 99, block_M=64, block_N=64, block_K=32, num_stages=3)
    ir = kernel.get_ir("async-pipeline")
    assert "async B_shared[" in ir and "async A_shared[" not in ir
    c = kernel(a, b)
    _check(c, a, b)


def test_without_async_copies_the_register_prefetch_stays():
    """Facts without `async_copy_sizes` (sm < 80, other vendors): async-pipeline leaves the loop
    and prefetch-pipelined loads the next tile into registers, as before."""
    kernel, (a, b) = _gemm(64, 64, 64, block_M=64, block_N=64, block_K=32)
    lowered = dict(kernel.stages)["lower-threads"]
    facts = TargetFacts(target=Target("cuda", "sm_75"), lowers_to_threads=True, warp_size=32,
                        shared_memory_bytes=64 * 1024, extra=(("sm", 75),))
    desc = TargetDesc(facts.target, facts.target, facts)
    assert async_pipelines(lowered, desc).func.body is lowered.func.body
    module = barriers(prefetch_pipelined(lowered, desc), desc)
    text = print_thread_func(module.func)
    assert "A_next" in text and "async_commit" not in text
    c = np.zeros((64, 64), dtype=np.float16)
    EmuArtifact(module).run([a, b, c], {})
    _check(c, a, b)


def _stages_under(limit, stages=3):
    """The 64x64x32 GEMM's lower-threads module pipelined for emu:sm_80 with a shared limit of
    `limit` bytes: (planned module, the stage counts chosen, inputs)."""
    kernel, (a, b) = _gemm(64, 64, 128, block_M=64, block_N=64, block_K=32, num_stages=stages)
    lowered = dict(kernel.stages)["lower-threads"]
    desc = describe(Target.parse("emu:sm_80"))
    desc = dataclasses.replace(desc, facts=dataclasses.replace(desc.facts, shared_memory_bytes=limit))
    module = plan_shared(barriers(async_pipelines(lowered, desc), desc), desc)
    chosen = [n.annotation("async_stages") for n in walk(module.func.body)
              if isinstance(n, For) and n.annotation("async_stages")]
    return module, chosen, a, b


def test_stages_fit_beside_an_epilogue_tile_that_reuses_them():
    """A, B 4 KB per stage, C_stage 8 KB (the epilogue's, after the loop): three stages sum to
    32 KB but plan to 24 KB (C_stage reuses the stage bytes), so a 26 KB limit keeps the three
    stages asked for (the summed budget gave two), a 20 KB one drops to two; the result is
    correct and race-free, the reuse ordered by a barrier."""
    module, chosen, a, b = _stages_under(26 * 1024)
    assert chosen == [3]
    _run(module, a, b)
    _, chosen, _, _ = _stages_under(20 * 1024)
    assert chosen == [2]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("stages", [2, 3])
def test_flash_attention_pipelined(causal, stages):
    sizes = dict(batch=1, heads=1, seq_len=192, dim=64, is_causal=causal)
    func = flash.program(**sizes, num_stages=stages)
    kernel = tilecore.jit(func, out_idx=[-1], target="emu:sm_80")
    ir = kernel.get_ir("async-pipeline")
    assert "async K_shared[" in ir and "async V_shared[" in ir
    q, k, v = flash.make_inputs(np.random.default_rng(3), **sizes)
    o = kernel(q, k, v)
    np.testing.assert_allclose(o.astype(np.float32), flash.reference(q, k, v, causal).astype(np.float32),
                               **flash.TOLERANCE)


# ----------------------------------------------------------------------------- mutations


def _final(stages=3):
    kernel, (a, b) = _gemm(64, 64, 128, block_M=64, block_N=64, block_K=32, num_stages=stages)
    # the pipeline as async-pipeline and insert-barriers leave it (fragment-pipeline, after them,
    # moves the head into a guarded block; its own mutation test is in test_emu_fragment_pipeline)
    return dict(kernel.stages)["insert-barriers"], a, b


def _run(module, a, b):
    EmuArtifact(module).run([a, b, np.zeros((64, 64), dtype=np.float16)], {})


def _map_loop_body(module, fn):
    """The module with `fn` applied to the statements of the pipelined loop's body."""
    def go(n):
        if isinstance(n, For) and n.annotation("async_stages"):
            body = n.body.stmts if isinstance(n.body, SeqStmt) else (n.body,)
            return dataclasses.replace(n, body=SeqStmt(tuple(fn(list(body))), n.loc))
        return None
    return module.with_func(module.func.with_body(rewrite(module.func.body, go)))


def _expect_race(module, a, b):
    with pytest.raises(TileRuntimeError) as err:
        _run(module, a, b)
    msg = str(err.value)
    assert "data race on shared buffer" in msg and ("A_shared" in msg or "B_shared" in msg)
    assert "gemm.py:" in msg  # the user's line
    return msg


def test_unmutated_pipeline_runs_clean():
    final, a, b = _final()
    _run(final, a, b)


def test_deleting_the_wait_is_reported():
    final, a, b = _final()
    mutated = _map_loop_body(final, lambda body: [s for s in body if not isinstance(s, AsyncWait)])
    assert "has landed" in _expect_race(mutated, a, b)


def test_waiting_for_too_few_groups_is_reported():
    final, a, b = _final()
    mutated = _map_loop_body(final, lambda body: [
        AsyncWait(s.queue, s.pending + 1, s.loc) if isinstance(s, AsyncWait) else s for s in body])
    assert "has landed" in _expect_race(mutated, a, b)


def _stage_mod(stmt, stages):
    def fn(n):
        if isinstance(n, BinOp) and n.op == "mod" and isinstance(n.b, Const):
            return BinOp("mod", n.a, Const(stages, n.b.dtype), n.dtype)
        return None
    return LetStmt(stmt.var, rewrite(stmt.value, fn), stmt.loc)


def test_too_few_stage_buffers_is_reported():
    """Three tiles in flight need three buffers: with the stage index taken mod 2 the copy of
    tile k+2 refills the buffer tile k is read from."""
    final, a, b = _final(3)
    mutated = _map_loop_body(final, lambda body: [
        _stage_mod(s, 2) if isinstance(s, LetStmt) and s.var.name.startswith("stage") else s for s in body])
    _expect_race(mutated, a, b)


def test_refilling_a_stage_still_in_flight_is_reported():
    """Writing tile k+2 into tile k+1's stage: two copies in flight into one element."""
    final, a, b = _final(3)

    def fn(body):
        out = []
        for s in body:
            if isinstance(s, LetStmt) and s.var.name == "stage_next":
                s = LetStmt(s.var, BinOp("mod", s.value.a - 1, s.value.b, s.value.dtype), s.loc)
            out.append(s)
        return out

    assert "issues an asynchronous copy" in _expect_race(_map_loop_body(final, fn), a, b)


def test_hand_double_buffered_copy_is_not_staged():
    """A copy whose destination moves with the loop counter (the user's own double buffer, read
    one iteration later) keeps its synchronous semantics: staging it would read the wrong tile."""
    import tilecore.language as T

    @T.prim_func
    def shifted(A: T.Tensor((8, 64), "float32"), B: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, threads=64) as bx:
            S = T.alloc_shared((2, 64), "float32")
            for k in T.Pipelined(8, num_stages=3):
                T.copy(A[k, 0:64], S[k % 2, 0:64])
                if k > 0:
                    for j in T.Parallel(64):
                        B[k - 1, j] = S[(k - 1) % 2, j]
    kernel = tilecore.jit(shifted, out_idx=[-1], target="emu:sm_80")
    assert "async_commit" not in kernel.get_ir("async-pipeline")
    a = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
    out = kernel(a)
    np.testing.assert_array_equal(out[:7], a[:7])


@pytest.mark.parametrize("arg", ["order=[0, 1]", "stage=[0, 1]", "group=[[0], [1]]", "sync=[[0, 1]]"])
def test_tilelang_schedule_arguments_warn(arg, tmp_path):
    """TileLang's hand schedule arguments warn once at the user's line (accepted, not applied:
    a schedule never changes a value), never silently ignored."""
    from tilecore.errors import TileConfigWarning
    src = tmp_path / "kern.py"
    src.write_text(
        "import tilecore.language as T\n\n"
        "def build():\n"
        "    @T.prim_func\n"
        "    def f(A: T.Tensor((64,), 'float32')):\n"
        "        with T.Kernel(1, threads=32) as bx:\n"
        f"            for k in T.Pipelined(4, num_stages=2, {arg}):\n"
        "                A[k] = 1.0\n"
        "    return f\n")
    spec = importlib.util.spec_from_file_location("kern", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.warns(TileConfigWarning, match="not applied.*num_stages") as rec:
        mod.build()
    w = next(r for r in rec if issubclass(r.category, TileConfigWarning))
    assert w.filename.endswith("kern.py") and w.lineno == 7 and arg.split("=")[0] in str(w.message)
