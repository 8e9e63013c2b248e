"""`T.atomic_add(..., return_prev=True)` (issue 14, TileLang's radix top-k): the old value in
thread-level kernels on interp (the core emulator) and emu, the generated CUDA, and the
located refusals (tile programs, tile form, cpu, which runs no thread-level kernels)."""


import numpy as np
import pytest
from optional_backends import HAVE, isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileTargetError, TileTypeError

THREADS = 64


pytestmark = pytest.mark.usefixtures("isolated_cache")


def _compaction():
    """Stream compaction by a shared counter: each thread with a positive value claims a slot
    (`pos = old count`) and writes its index there; a global counter's old values (+1, in an
    expression) are recorded per thread."""
    @T.prim_func
    def k(X: T.Tensor((THREADS,), "float32"), Out: T.Tensor((THREADS,), "int32"),
          N: T.Tensor((1,), "int32"), G: T.Tensor((1,), "int32"), Old: T.Tensor((THREADS,), "int32")):
        with T.Kernel(1, threads=THREADS) as bx:
            tx = T.get_thread_binding()
            cnt = T.alloc_shared([1], T.int32)
            pos = T.alloc_var(T.int32)
            if tx == 0:
                cnt[0] = 0
            T.sync_threads()
            if X[tx] > 0:
                pos = T.atomic_add(cnt[0], 1, return_prev=True)
                Out[pos] = tx
            Old[tx] = T.atomic_add(G[0], 3, return_prev=True) + 1
            T.sync_threads()
            if tx == 0:
                N[0] = cnt[0]
    return k


@pytest.mark.parametrize("target", target_params("interp", "emu:sm_80"))
def test_return_prev_gives_each_thread_a_distinct_old_value(target):
    x = np.random.default_rng(2).standard_normal(THREADS).astype(np.float32)
    out = np.full(THREADS, -1, np.int32)
    n, g = np.zeros(1, np.int32), np.array([5], np.int32)
    old = np.zeros(THREADS, np.int32)
    tilecore.compile(_compaction(), target=target)(x, out, n, g, old)
    want = np.nonzero(x > 0)[0]
    assert n[0] == len(want)
    # any order of the additions is correct: the claimed slots hold each positive index once
    assert sorted(out[:n[0]].tolist()) == want.tolist() and (out[n[0]:] == -1).all()
    assert g[0] == 5 + 3 * THREADS
    assert sorted(old.tolist()) == [5 + 3 * t + 1 for t in range(THREADS)]


@pytest.mark.skipif(not HAVE["cuda"], reason="no cuda backend")
def test_return_prev_renders_atomic_adds_result():
    src = tilecore.compile(_compaction(), target="cuda:sm_80").get_kernel_source()
    assert src.count("= (int)(atomicAdd(&") == 2, src


def test_return_prev_refusals_are_located():
    with pytest.raises(TileTypeError, match="thread-level") as e:
        @T.prim_func
        def k(A: T.Tensor((4,), "int32"), B: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                B[0] = T.atomic_add(A[0], 1, return_prev=True)
    assert "test_tilelang_atomic_prev.py" in str(e.value) and e.value.hint
    with pytest.raises(TileTypeError, match="of a tile"):
        @T.prim_func
        def k2(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                tx = T.get_thread_binding()
                f = T.alloc_fragment((4,), "float32")
                T.atomic_add(A[0:4], f, return_prev=True)


@pytest.mark.skipif(not HAVE["cpu"], reason="no cpu backend")
def test_cpu_refuses_the_thread_level_kernel():
    with pytest.raises(TileTargetError, match="thread-level"):
        tilecore.compile(_compaction(), target="cpu")


def _ticket(order):
    """Each block takes a ticket from a global counter (one thread, the old value published to
    the block through shared memory); the block with the last ticket marks itself."""
    @T.prim_func
    def k(Cnt: T.Tensor((1,), "int32"), Ticket: T.Tensor((4,), "int32"), Last: T.Tensor((4,), "int32")):
        with T.Kernel(4, threads=32) as bx:
            tx = T.get_thread_binding()
            got = T.alloc_shared((1,), "int32")
            if tx == 0:
                got[0] = T.atomic_add(Cnt[0], 1, memory_order=order, return_prev=True)
            T.sync_threads()
            if tx == 0:
                Ticket[bx] = got[0]
            if got[0] == 3:
                if tx == 0:
                    Last[bx] = 1
    return k


@pytest.mark.parametrize("target", target_params("interp", "emu:sm_90a"))
@pytest.mark.parametrize("order", [None, "acq_rel"])
def test_return_prev_into_shared_memory_in_a_block_level_kernel(target, order):
    """The kernel has no per-thread values, so interp runs it at block level: the old value
    still reaches the program (it read garbage before)."""
    cnt, ticket, last = np.zeros(1, np.int32), np.full(4, -1, np.int32), np.zeros(4, np.int32)
    tilecore.compile(_ticket(order), target=target)(cnt, ticket, last)
    assert cnt[0] == 4 and sorted(ticket.tolist()) == [0, 1, 2, 3]
    assert last.tolist() == [int(t == 3) for t in ticket]


@pytest.mark.skipif(not HAVE["cuda"], reason="no cuda backend")
def test_acq_rel_atomic_renders_a_fence_on_each_side():
    fenced = tilecore.compile(_ticket("release"), target="cuda:sm_90a").get_kernel_source()
    lines = [ln.strip() for ln in fenced.splitlines()]
    at = next(i for i, ln in enumerate(lines) if "atomicAdd(&Cnt[0]" in ln)
    assert lines[at - 1] == lines[at + 1] == "__threadfence();"
    relaxed = tilecore.compile(_ticket("relaxed"), target="cuda:sm_90a").get_kernel_source()
    assert "__threadfence" not in relaxed


def test_memory_order_is_checked_and_a_tiles_order_warns():
    with pytest.raises(TileTypeError, match="not a memory order"):
        _ticket("strong")
    with pytest.warns(Warning, match="of a tile is accepted but not applied"):
        @T.prim_func
        def k(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                f = T.alloc_fragment((32,), "float32")
                T.clear(f)
                T.atomic_add(A[0:32], f, memory_order="release")

