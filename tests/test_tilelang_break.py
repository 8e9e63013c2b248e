"""`break` in kernel loops (issue 14, tilecore/language/loop_exit.py): T.serial, range and
while loops in block-level and thread-level code against a Python reference, on interp, cpu
and the emulator; the loops where `break` has no meaning are located refusals."""


import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileSyntaxError

TARGETS = target_params("interp", "cpu", "emu:sm_80")


pytestmark = pytest.mark.usefixtures("isolated_cache")


def _first_negative(n=16, rows=4):
    """Per block (row): the index of the first negative element and the sum before it (a
    serial loop with a break nested in an `if`, code after it), and a while loop that stops at
    a value above 2 (a break that leaves the while before its condition fails)."""
    @T.prim_func
    def k(A: T.Tensor((rows, n), "float32"), Idx: T.Tensor((rows,), "int32"),
          S: T.Tensor((rows,), "float32"), W: T.Tensor((rows,), "int32")):
        with T.Kernel(rows, threads=32) as bx:
            idx = T.alloc_var(T.int32)
            acc = T.alloc_var(T.float32)
            w = T.alloc_var(T.int32)
            idx = n
            acc = 0.0
            for i in T.serial(n):
                if A[bx, i] < 0:
                    idx = i
                    break
                acc = acc + A[bx, i]
            w = 0
            while w < n:
                if A[bx, w] > 2.0:
                    break
                w = w + 1
            Idx[bx] = idx
            S[bx] = acc
            W[bx] = w
    return k


def _reference(a):
    idx, s, w = [], [], []
    for row in a:
        i, acc = len(row), 0.0
        for j, v in enumerate(row):
            if v < 0:
                i = j
                break
            acc += float(v)
        idx.append(i)
        s.append(acc)
        j = 0
        while j < len(row) and not row[j] > 2.0:
            j += 1
        w.append(j)
    return np.array(idx, np.int32), np.array(s, np.float32), np.array(w, np.int32)


@pytest.mark.parametrize("target", TARGETS)
def test_break_leaves_serial_and_while_loops(target):
    rng = np.random.default_rng(1)
    a = rng.uniform(-0.5, 3.0, (4, 16)).astype(np.float32)
    a[3] = np.abs(a[3]) * 0.5  # a row without a negative value or one above 2: no break
    got = [np.asarray(x) for x in tilecore.compile(_first_negative(), out_idx=[1, 2, 3], target=target)(a)]
    want = _reference(a)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    np.testing.assert_array_equal(got[2], want[2])


def _per_thread(n=8, threads=64):
    """Each thread counts up until its own limit: a thread-level break, one flag per thread."""
    @T.prim_func
    def k(L: T.Tensor((threads,), "int32"), C: T.Tensor((threads,), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            c = T.alloc_var(T.int32)
            c = 0
            for i in range(n):
                if i >= L[tx]:
                    break
                c = c + 1
            C[tx] = c
    return k


@pytest.mark.parametrize("target", ["interp", pytest.param("emu:sm_80", marks=TARGETS[2].marks)])
def test_break_in_thread_level_code_is_per_thread(target):
    lim = (np.arange(64, dtype=np.int32) * 5) % 11
    c = np.asarray(tilecore.compile(_per_thread(), out_idx=[1], target=target)(lim))
    np.testing.assert_array_equal(c, np.minimum(lim, 8))


def test_break_in_parallel_or_pipelined_is_located():
    with pytest.raises(TileSyntaxError, match="T.Parallel") as e:
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(8):
                    if A[i] < 0:
                        break
                    A[i] = 1.0
    assert "test_tilelang_break.py" in str(e.value) and e.value.hint
    with pytest.raises(TileSyntaxError, match="Pipelined"):
        @T.prim_func
        def k2(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Pipelined(8, num_stages=2):
                    if A[i] < 0:
                        break


def _tile_op_after_break(per_thread_limit: bool):
    """A tile operation after a `break` in a thread-level kernel: allowed when the exit
    condition is uniform (read from memory at a uniform address), refused when it varies."""
    @T.prim_func
    def k(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared([64], T.int32)
            lim = T.alloc_var(T.int32)
            lim = A[tx] if per_thread_limit else A[0]
            T.fill(s, -1)
            for r in T.serial(8):
                if r >= lim:
                    break
                T.fill(s, r)
            T.sync_threads()
            B[tx] = s[tx]
    return k


@pytest.mark.parametrize("target", ["interp", pytest.param("emu:sm_80", marks=TARGETS[2].marks)])
def test_tile_op_after_a_uniform_break(target):
    a = np.full(64, 5, np.int32)
    b = np.asarray(tilecore.compile(_tile_op_after_break(False), out_idx=[1], target=target)(a))
    np.testing.assert_array_equal(b, np.full(64, 4, np.int32))


def test_tile_op_after_a_thread_varying_break_is_refused():
    from tilecore.errors import TileShapeError

    with pytest.raises(TileShapeError, match="thread-varying"):
        tilecore.compile(_tile_op_after_break(True), out_idx=[1], target="interp")
