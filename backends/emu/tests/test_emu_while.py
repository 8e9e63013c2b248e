"""`while cond:` in kernels (tilecore.ir.loops.While) on interp, cpu and emu: a per-element
loop inside T.Parallel (each element leaves on its own condition), a block-level loop over a
mutable kernel scalar whose body holds tile operations (barriers inside the loop), a condition
on a local buffer (TileLang's stream-K style), and the mistakes a `while` can hold."""

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileSyntaxError

TARGETS = ["interp", "cpu", "emu:sm_80"]
N = 64


@T.prim_func
def collatz(X: T.Tensor((N,), "int32"), Steps: T.Tensor((N,), "int32")):
    with T.Kernel(N // 16, threads=16) as bx:
        for i in T.Parallel(16):
            v = T.alloc_var("int32")
            n = T.alloc_var("int32")
            v = X[bx * 16 + i]
            n = 0
            while v != 1:
                v = T.if_then_else(v % 2 == 0, v // 2, 3 * v + 1)
                n = n + 1
            Steps[bx * 16 + i] = n


@T.prim_func
def tiles(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=32):
        s = T.alloc_shared((16,), "float32")
        t = T.alloc_var("int32")
        t = 0
        while t * 16 < N:
            T.copy(A[t * 16], s)
            for i in T.Parallel(16):
                B[t * 16 + i] = s[15 - i] + 1  # another thread's element: needs the barrier
            t = t + 1


@T.prim_func
def chunks(A: T.Tensor((N,), "float32"), Out: T.Tensor((4,), "float32")):
    # stream-K's shape: the loop state in a one-element local buffer, a bound per block
    with T.Kernel(4, threads=32) as bx:
        start = T.alloc_local((1,), "int32")
        acc = T.alloc_local((1,), "float32")
        start[0] = bx * 16
        acc[0] = 0.0
        while start[0] < bx * 16 + 16:
            acc[0] = acc[0] + A[start[0]]
            start[0] = start[0] + 3
        Out[bx] = acc[0]


def _steps(x):
    out = []
    for v in x:
        n = 0
        while v != 1:
            v, n = (v // 2 if v % 2 == 0 else 3 * v + 1), n + 1
        out.append(n)
    return np.array(out, dtype=np.int32)


@pytest.mark.parametrize("target", TARGETS)
def test_while_per_element(target):
    x = np.arange(1, N + 1, dtype=np.int32)
    np.testing.assert_array_equal(tilecore.jit(collatz, out_idx=[1], target=target)(x), _steps(x))


@pytest.mark.parametrize("target", TARGETS)
def test_while_over_tile_ops(target):
    a = np.arange(N, dtype=np.float32)
    out = tilecore.jit(tiles, out_idx=[1], target=target)(a)
    np.testing.assert_array_equal(out, a.reshape(4, 16)[:, ::-1].reshape(-1) + 1)


@pytest.mark.parametrize("target", TARGETS)
def test_while_on_a_local_buffer(target):
    a = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    out = tilecore.jit(chunks, out_idx=[1], target=target)(a)
    ref = [np.float32(0) + sum(a[b * 16 + k] for k in range(0, 16, 3)) for b in range(4)]
    np.testing.assert_allclose(out, np.array(ref, dtype=np.float32), rtol=1e-6)


def test_while_renders_as_a_c_loop():
    pytest.importorskip("tilecore_cuda")
    src = tilecore.compile(tiles, out_idx=[1], target="cuda:sm_80").get_kernel_source()
    body = src[src.index("while ("):]
    assert body.index("__syncthreads()") < body.index("}")  # the barrier is inside the loop


def test_while_true_at_build_time_is_an_error():
    with pytest.raises(TileSyntaxError, match="never ends"):
        @T.prim_func
        def forever(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                while True:
                    A[0] = 1.0


def test_while_else_is_an_error():
    with pytest.raises(TileSyntaxError, match="while ... else"):
        @T.prim_func
        def other(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                t = T.alloc_var("int32")
                t = 0
                while t < 4:
                    t = t + 1
                else:
                    A[0] = 1.0
