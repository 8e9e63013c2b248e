"""`T.annotate_layout({F: T.Fragment(shape, forward_thread_fn=..., forward_index_fn=...)})`: a
user's (thread, register) map is the fragment's layout in the thread lowering, where it can be
taken as given (copies, T.Parallel); a gemm accumulator that needs another layout is a located
error (tilecore.ir.index_layout.fragment_map, tilecore.lower.infer).

Layouts never change values, so the tests check both the result (against NumPy)
and that the lowered program's register r of thread t reads the element the map puts there."""

import numpy as np
import pytest
from test_emu_index_layout import numpy_if_then_else
from test_emu_smem import lowered

import tilecore
import tilecore.language as T
from tilecore.errors import TileLayoutError
from tilecore.ir.stmt import IfThenElse, Stmt
from tilecore.ir.thread import MemLoad, MemStore
from tilecore.ir.visit import children
from tilecore.lower.indexing import evaluate


def scaled_copy(thread_fn, index_fn, threads=32, replicate=1):
    @T.prim_func
    def f(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=threads):
            F = T.alloc_fragment((16, 16), "float32")
            T.annotate_layout({F: T.Fragment(F.shape, forward_thread_fn=thread_fn,
                                             forward_index_fn=index_fn, replicate=replicate)})
            T.copy(A, F)
            for i, j in T.Parallel(16, 16):
                F[i, j] = F[i, j] * 2
            T.copy(F, B)

    return f


def register_loads(k):
    """{(thread, register): flat element of A} for every load of A into a register, in the
    threads that execute it (branch conditions and predicates evaluated for every thread)."""
    tx = np.arange(k.num_threads)
    env = {id(k.thread_var): tx}
    out = {}

    def on(e):
        return np.broadcast_to(evaluate(e, env), tx.shape)

    def visit(n, active):
        if isinstance(n, IfThenElse):
            c = on(n.cond)
            visit(n.then_body, active & c)
            if n.else_body is not None:
                visit(n.else_body, active & ~c)
        elif isinstance(n, MemStore):
            if n.buffer.scope == "local" and isinstance(n.value, MemLoad) and n.value.buffer.name == "A":
                ok = active if n.pred is None else active & on(n.pred)
                reg, src = int(evaluate(n.offset, env)), on(n.value.offset)
                out.update({(int(t), reg): int(e) for t, e in zip(tx[ok], src[ok])})
        else:
            for c in children(n):
                if isinstance(c, Stmt):
                    visit(c, active)

    visit(k.body, np.ones(tx.shape, bool))
    return out


CASES = {
    # row-major elements dealt round-robin: a formula of the thread index's bits
    "round_robin": (lambda i, j: (i * 16 + j) % 32, lambda i, j: (i * 16 + j) // 32, 32, 1),
    # column-major, in a 64-thread block whose upper 32 threads hold nothing
    "column_major": (lambda i, j: (j * 16 + i) % 32, lambda i, j: (j * 16 + i) // 32, 64, 1),
    # no formula of the thread bits fits: a constant table per register
    "scattered": (lambda i, j: (i * 7 + j * 3) % 16, lambda i, j: i, 32, 1),
    # every element in two threads (TileLang's `rep` argument of the thread map)
    "replicated": (lambda i, j, rep: i % 8 * 4 + j % 4 + rep * 32, lambda i, j: i // 8 * 4 + j // 4, 64, 2),
    # a register index of two dimensions, flattened row-major
    "two_index": (lambda i, j: i % 8 * 4 + j % 4, lambda i, j: [i // 8, j // 4], 32, 1),
    # the lower half's threads in reverse order: a branch, T.if_then_else (tabulated by np.where)
    "branched": (lambda i, j: T.if_then_else(i < 8, (i * 16 + j) % 32, 31 - (i * 16 + j) % 32),
                 lambda i, j: (i * 16 + j) // 32, 32, 1),
}


@pytest.mark.parametrize("name", CASES)
def test_a_fragment_map_is_the_lowered_register_layout(name):
    thread_fn, index_fn, threads, rep = CASES[name]
    f = scaled_copy(thread_fn, index_fn, threads, rep)
    a = np.arange(256, dtype=np.float32).reshape(16, 16)
    b = np.zeros_like(a)  # interp and cpu: tests/test_issue14_gaps.py
    kernel = tilecore.compile(f, target="emu:sm_80")
    kernel(a, b)
    np.testing.assert_array_equal(b, 2 * a)
    assert "# layout of F: T.Fragment((16, 16)" in f.script()
    i, j = np.indices((16, 16)).reshape(2, -1)
    with numpy_if_then_else():
        reps = [thread_fn(i, j) if rep == 1 else thread_fn(i, j, r) for r in range(rep)]
    reg = index_fn(i, j)
    reg = np.ravel_multi_index(reg, [int(x.max()) + 1 for x in reg]) if isinstance(reg, list) else reg
    want = {(int(t), int(r)): int(e) for th in reps for t, r, e in zip(th, reg, i * 16 + j)}
    assert register_loads(lowered(kernel)) == want


def test_a_forward_fn_fragment_with_replicas_is_the_same_layout():
    """TileLang's one-function form: `forward_fn(i, j, rep) -> (thread, register)`."""
    thread_fn, index_fn, threads, _ = CASES["replicated"]

    def both(i, j, rep):
        return thread_fn(i, j, rep), index_fn(i, j)

    @T.prim_func
    def f(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=threads):
            F = T.alloc_fragment((16, 16), "float32")
            T.annotate_layout({F: T.Fragment(F.shape, forward_fn=both, replicate=2)})
            T.copy(A, F)
            T.copy(F, B)

    one = lowered(tilecore.compile(f, target="emu:sm_80"))
    two = lowered(tilecore.compile(scaled_copy(thread_fn, index_fn, threads, 2), target="emu:sm_80"))
    assert register_loads(one) == register_loads(two) and len(register_loads(one)) == 512


@pytest.mark.parametrize("thread_fn, index_fn, what", [
    (lambda i, j: j % 4, lambda i, j: i, r"elements \(0, 0\) and \(0, 4\) are both register 0 of thread 0"),
    (lambda i, j: j - 1, lambda i, j: i, r"gives element \(0, 0\) a negative thread"),
    (lambda i, j: j, None, "needs both its thread map and its register map"),
])
def test_a_fragment_map_that_cannot_be_a_layout_names_the_line(thread_fn, index_fn, what):
    with pytest.raises(TileLayoutError, match=what) as err:
        scaled_copy(thread_fn, index_fn)
    assert "test_emu_fragment_layout.py" in str(err.value) and "T.annotate_layout({F:" in str(err.value)


def test_a_fragment_map_beyond_the_block_names_the_line():
    f = scaled_copy(lambda i, j: (i * 16 + j) % 64, lambda i, j: (i * 16 + j) // 64, threads=32)
    with pytest.raises(TileLayoutError, match="thread 63, but the block has 32 threads") as err:
        tilecore.compile(f, target="emu:sm_80")
    assert "T.annotate_layout({F:" in str(err.value)


def test_a_fragment_map_against_a_gemm_accumulator_is_a_located_conflict():
    @T.prim_func
    def g(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
          C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({C_l: T.Fragment(C_l.shape, forward_thread_fn=lambda i, j: (i * 64 + j) % 128,
                                               forward_index_fn=lambda i, j: (i * 64 + j) // 128)})
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C)

    with pytest.raises(TileLayoutError, match="conflicts with the layout fixed by T.gemm at") as err:
        tilecore.compile(g, target="emu:sm_80")
    assert "T.annotate_layout({C_l:" in str(err.value) and "drop the T.Fragment of C_l" in str(err.value)


def test_the_cuda_source_reads_a_scattered_map_from_constant_tables():
    thread_fn, index_fn, threads, rep = CASES["scattered"]
    src = tilecore.compile(scaled_copy(thread_fn, index_fn, threads, rep),
                           target="cuda:sm_80").get_kernel_source()
    # one table per register's column (the row is the register), read by threadIdx.x
    assert src.count("__device__ const int lane_table_") == 16 and "lane_table_0[tx]" in src
