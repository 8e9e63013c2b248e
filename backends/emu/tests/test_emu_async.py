"""The asynchronous memory model in the emulator and in insert-barriers, on hand-built programs.

An AsyncCopy lands at the AsyncWait that retires its group (of the issuing thread), is visible
to other threads only after a barrier, and its issue is a write for write-after-read; named and
warpgroup barriers order only the threads taking part (docs/architecture.md).
"""

import numpy as np
import pytest

from tilecore import dtypes as dt
from tilecore.emulator.machine import Block
from tilecore.errors import TileRuntimeError
from tilecore.ir.buffer import Buffer
from tilecore.ir.expr import Var, binop, const
from tilecore.ir.stmt import IfThenElse, SeqStmt
from tilecore.ir.thread import (
    AsyncCommit,
    AsyncCopy,
    AsyncWait,
    Barrier,
    MemLoad,
    MemStore,
    ThreadKernel,
)
from tilecore.ir.thread_printer import print_thread_node
from tilecore.ir.visit import walk
from tilecore.lower.barrier import insert_barriers

T = 64
tx = Var("tx")
G = Buffer("G", (T,), dt.float32, "global")
OUT = Buffer("Out", (T,), dt.float32, "global")
S = Buffer("S", (T,), dt.float32, "shared")
S2 = Buffer("S2", (T,), dt.float32, "shared")


def _kernel(*stmts, threads=T) -> ThreadKernel:
    return ThreadKernel((const(1),), (Var("bx"),), tx, threads, 32, (S, S2), (), SeqStmt(tuple(stmts)))


def _run(*stmts, threads=T) -> np.ndarray:
    g = np.arange(T, dtype=np.float32) + 1
    out = np.full(T, -1, dtype=np.float32)
    Block(_kernel(*stmts, threads=threads), {id(G): g, id(OUT): out}, {}, [G, OUT]).run_grid()
    return out


copy = AsyncCopy(S, tx, G, tx, 1)
copy2 = AsyncCopy(S2, tx, G, tx, 1)
own = MemStore(OUT, tx, MemLoad(S, tx))
other = MemStore(OUT, tx, MemLoad(S, (tx + 1) % T))


def test_own_copy_after_wait():
    out = _run(copy, AsyncCommit(), AsyncWait(pending=0), own)
    np.testing.assert_array_equal(out, np.arange(T) + 1)


def test_read_before_wait_is_a_race():
    with pytest.raises(TileRuntimeError, match="data race on shared buffer S: .*has landed"):
        _run(copy, AsyncCommit(), own)


def test_wait_retires_committed_groups_only():
    with pytest.raises(TileRuntimeError, match="has landed"):
        _run(copy, AsyncWait(pending=0), own)


def test_other_threads_copy_needs_a_barrier_after_the_wait():
    with pytest.raises(TileRuntimeError, match="asynchronous copy of thread .* no barrier"):
        _run(copy, AsyncCommit(), AsyncWait(pending=0), other)
    out = _run(copy, AsyncCommit(), AsyncWait(pending=0), Barrier(), other)
    np.testing.assert_array_equal(out, np.roll(np.arange(T) + 1, -1))


def test_a_barrier_does_not_complete_a_copy():
    with pytest.raises(TileRuntimeError, match="has landed"):
        _run(copy, AsyncCommit(), Barrier(), own)


def test_wait_group_n_leaves_the_n_newest_groups_in_flight():
    read2 = MemStore(OUT, tx, MemLoad(S2, tx))
    out = _run(copy, AsyncCommit(), copy2, AsyncCommit(), AsyncWait(pending=1), own)
    np.testing.assert_array_equal(out, np.arange(T) + 1)
    with pytest.raises(TileRuntimeError, match="S2: .*has landed"):
        _run(copy, AsyncCommit(), copy2, AsyncCommit(), AsyncWait(pending=1), read2)


def test_issue_into_a_buffer_others_still_read_is_a_race():
    fill = MemStore(S, tx, const(0.0, dt.float32))
    with pytest.raises(TileRuntimeError, match="issues an asynchronous copy into element .* read"):
        _run(fill, Barrier(), other, copy)
    _run(fill, Barrier(), other, Barrier(), copy, AsyncCommit(), AsyncWait(pending=0))


def test_two_copies_in_flight_into_one_element_race():
    with pytest.raises(TileRuntimeError, match="issues an asynchronous copy into .*has landed"):
        _run(copy, AsyncCommit(), AsyncCopy(S, tx, G, (tx + 1) % T, 1))


def test_zero_fill_when_the_predicate_is_false():
    zcopy = AsyncCopy(S, tx, G, tx, 1, binop("lt", tx, 10), True)
    out = _run(zcopy, AsyncCommit(), AsyncWait(pending=0), own)
    want = np.where(np.arange(T) < 10, np.arange(T) + 1, 0)
    np.testing.assert_array_equal(out, want)


def test_named_barrier_orders_only_its_threads():
    fill = MemStore(S, tx, const(1.0, dt.float32))
    warp0 = binop("lt", tx, 32)
    bar = Barrier("", None, "named", 1, 32)
    inside = MemStore(OUT, tx, MemLoad(S, (tx + 1) % 32))
    across = MemStore(OUT, tx, MemLoad(S, tx + 32))
    out = _run(fill, IfThenElse(warp0, SeqStmt((bar, inside))))
    assert (out[:32] == 1).all() and (out[32:] == -1).all()
    with pytest.raises(TileRuntimeError, match="no barrier"):
        _run(fill, IfThenElse(warp0, SeqStmt((bar, across))))
    with pytest.raises(TileRuntimeError, match="expects 32 threads but 64 arrive"):
        _run(fill, bar)


def test_warpgroup_barrier_orders_each_warpgroup():
    big = Buffer("S", (256,), dt.float32, "shared")
    out_b = Buffer("Out", (256,), dt.float32, "global")
    fill = MemStore(big, tx, const(1.0, dt.float32))
    wg = Barrier("", None, "warpgroup", 1)

    def run(read_offset):
        body = SeqStmt((fill, wg, MemStore(out_b, tx, MemLoad(big, read_offset))))
        k = ThreadKernel((const(1),), (Var("bx"),), tx, 256, 32, (big,), (), body)
        o = np.zeros(256, dtype=np.float32)
        Block(k, {id(out_b): o}, {}, [out_b]).run_grid()
        return o

    assert (run(tx - tx % 128 + (tx + 1) % 128) == 1).all()  # within each warpgroup
    with pytest.raises(TileRuntimeError, match="no barrier"):
        run((tx + 128) % 256)  # across warpgroups: not ordered


def test_barrier_validation_and_printing():
    with pytest.raises(TypeError):
        Barrier("", None, "named", 0, 32)
    with pytest.raises(TypeError):
        Barrier("", None, "block", 3)
    AsyncCopy(S, tx, G, tx, 2)  # 8 bytes of float32 is a cp.async size ...
    with pytest.raises(TypeError):
        AsyncCopy(S, tx, G, tx, 8)  # ... 32 bytes is not
    with pytest.raises(TypeError):
        AsyncCopy(S, tx, G, tx, 1, completion="mbarrier")  # designed, not built
    assert "barrier(id=1, threads=32)" in print_thread_node(Barrier("", None, "named", 1, 32))
    assert print_thread_node(AsyncWait(pending=2)) == "async_wait(cp.async, pending=2)"


# ----------------------------------------------------------------------------- insert-barriers


def _lowered(*stmts):
    k = insert_barriers(_kernel(*stmts))
    return [n for n in walk(k.body) if isinstance(n, (Barrier, AsyncWait, MemStore, AsyncCopy))]


def test_pass_waits_before_reading_a_copy_in_flight():
    seq = _lowered(copy, AsyncCommit(), own)
    kinds = [type(n).__name__ for n in seq]
    assert kinds == ["AsyncCopy", "AsyncWait", "MemStore"]  # own data: a wait, no barrier
    seq = _lowered(copy, AsyncCommit(), other)
    assert [type(n).__name__ for n in seq] == ["AsyncCopy", "AsyncWait", "Barrier", "MemStore"]


def test_pass_barrier_after_the_wait_and_before_a_refill():
    seq = _lowered(copy, AsyncCommit(), AsyncWait(pending=0), other, copy, AsyncCommit(),
                   AsyncWait(pending=0))
    kinds = [type(n).__name__ for n in seq]
    # landed copy read by another thread; then the refill must wait for those reads
    assert kinds == ["AsyncCopy", "AsyncWait", "Barrier", "MemStore", "Barrier", "AsyncCopy", "AsyncWait"]


def test_pass_results_run_clean():
    k = insert_barriers(_kernel(copy, AsyncCommit(), other))
    g = np.arange(T, dtype=np.float32) + 1
    out = np.zeros(T, dtype=np.float32)
    Block(k, {id(G): g, id(OUT): out}, {}, [G, OUT]).run_grid()
    np.testing.assert_array_equal(out, np.roll(g, -1))
