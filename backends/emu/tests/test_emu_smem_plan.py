"""Shared-memory planning (tilecore.lower.smem_plan): buffers with disjoint live ranges share
bytes on every target, the portable limit counts the planned size, and a reuse is ordered by a
barrier that the emulator proves necessary (removing it is reported as a race)."""

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.emulator.machine import EmuArtifact
from tilecore.errors import TileRuntimeError, TileShapeError
from tilecore.ir.stmt import SeqStmt
from tilecore.ir.thread import Barrier, find_kernel
from tilecore.ir.visit import rewrite

N = 128
REUSE = "shared memory reused by another buffer"


def _reuse(n: int = N, extra: int = 0):
    """A_s is read mirrored (thread t reads what thread n-1-t wrote), then B_s, in A_s's bytes,
    is written: without a barrier between, a fast thread overwrites what a slow one reads.
    `extra` pads both buffers (a size over the portable limit when summed)."""

    @T.prim_func
    def reuse(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"),
              Z: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n) as bx:
            A_s = T.alloc_shared((n + extra,), "float32")
            B_s = T.alloc_shared((n + extra,), "float32")
            T.copy(X, A_s[0:n])
            for i in T.Parallel(n):
                Y[i] = A_s[n - 1 - i] + bx
            for i in T.Parallel(n):
                B_s[i] = X[i] * 2
            for i in T.Parallel(n):
                Z[i] = B_s[n - 1 - i]

    return reuse


def _check(y, z, x):
    np.testing.assert_array_equal(y, x[::-1])
    np.testing.assert_array_equal(z, 2 * x[::-1])


@pytest.mark.parametrize("target", ["interp", "cpu", "emu:sm_80"])
def test_over_the_summed_limit_but_planned_under_it_runs(target):
    # two 120 KB buffers: 240 KB summed (over 227 KB), 120 KB planned
    extra = 30 * 1024 - N
    x = np.arange(N, dtype=np.float32)
    y, z = tilecore.jit(_reuse(extra=extra), out_idx=[1, 2], target=target)(x)
    _check(y, z, x)


def test_live_buffers_still_count_in_full():
    @T.prim_func
    def both_live(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            A_s = T.alloc_shared((30 * 1024,), "float32")
            B_s = T.alloc_shared((30 * 1024,), "float32")
            T.copy(X, A_s[0:N])
            T.copy(X, B_s[0:N])
            for i in T.Parallel(N):
                Y[i] = A_s[i] + B_s[i]

    with pytest.raises(TileShapeError, match="245760 bytes of shared memory"):
        tilecore.jit(both_live, out_idx=[1], target="interp")


def test_reuse_shares_bytes_and_the_barrier_is_needed():
    x = np.arange(N, dtype=np.float32)
    kernel = tilecore.jit(_reuse(), out_idx=[1, 2], target="emu:sm_80")
    _check(*kernel(x), x)
    final = kernel.stages[-1][1]
    k = find_kernel(final.func.body)
    a, b = k.shared
    assert k.shared_plan.total == N * 4  # one buffer's bytes, not two
    assert k.shared_plan.offset_of(a) == k.shared_plan.offset_of(b) == 0
    assert kernel.get_ir("final").count(REUSE) == 1
    EmuArtifact(final).run([x, np.zeros(N, np.float32), np.zeros(N, np.float32)], {})

    def drop(n):  # the planner's barrier removed
        if isinstance(n, SeqStmt) and any(isinstance(s, Barrier) and s.reason == REUSE
                                          for s in n.stmts):
            return SeqStmt(tuple(s for s in n.stmts
                                 if not (isinstance(s, Barrier) and s.reason == REUSE)), n.loc)
        return None

    mutated = final.with_func(final.func.with_body(rewrite(final.func.body, drop)))
    with pytest.raises(TileRuntimeError, match="data race on shared buffer A_s/B_s") as err:
        EmuArtifact(mutated).run([x, np.zeros(N, np.float32), np.zeros(N, np.float32)], {})
    assert "test_emu_smem_plan.py" in str(err.value)  # the user's lines


def test_the_generated_code_places_both_buffers_at_one_offset():
    pytest.importorskip("tilecore_cuda")
    src = tilecore.compile(_reuse(), out_idx=[1, 2], target="cuda:sm_80").get_kernel_source()
    assert src.count("(tilecore_smem + 0)") == 2, src  # A_s and B_s
    assert REUSE in src
