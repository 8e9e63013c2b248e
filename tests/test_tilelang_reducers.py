"""TileLang's reducer buffers (`T.alloc_reducer` / `T.finalize_reducer`, issue 14) against
NumPy on interp, cpu and the thread-lowered targets (emu:sm_80 / emu:sm_90a: the
reducer-partials pass), the located errors for index forms that pass refuses and for misuse;
`T.uint64` as a build-time constant type and `T.reinterpret(x, "handle")`."""

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileRuntimeError, TileSyntaxError, TileTargetError, TileTypeError

pytestmark = pytest.mark.usefixtures("isolated_cache")
M, N, BM, BN = 32, 48, 16, 16


def _gemv_max_min():
    """o = A @ x (sum reducer), mx = row max (max reducer), mn = row min of an int tile (min)."""

    @T.prim_func
    def k(A: T.Tensor((M, N), T.float32), X: T.Tensor((N,), T.float32),
          I: T.Tensor((M, N), T.int32), O: T.Tensor((M,), T.float32),
          Mx: T.Tensor((M,), T.float32), Mn: T.Tensor((M,), T.int32)):
        with T.Kernel(M // BM, threads=128) as bx:
            r = T.alloc_reducer(BM, T.float32, replication="all")
            mx = T.alloc_reducer((BM,), T.float32, op="max")
            mn = T.alloc_reducer((BM,), T.int32, op="min", replication="none")
            T.clear(r)
            T.fill(mx, -T.infinity(T.float32))
            T.fill(mn, T.max_value(T.int32))
            for ko in T.serial(N // BN):
                a = T.alloc_fragment((BM, BN), T.float32)
                T.copy(A[bx * BM, ko * BN], a)
                for i, j in T.Parallel(BM, BN):
                    r[i] += a[i, j] * X[ko * BN + j]
                    mx[i] = T.max(mx[i], a[i, j])
                    mn[i] = T.min(I[bx * BM + i, ko * BN + j], mn[i])
            T.finalize_reducer(r)
            T.finalize_reducer(mx)
            T.finalize_reducer(mn)
            T.copy(r, O[bx * BM])
            T.copy(mx, Mx[bx * BM])
            T.copy(mn, Mn[bx * BM])

    return k


ALL = target_params("interp", "cpu", "emu:sm_80", "emu:sm_90a")


@pytest.mark.parametrize("target", ALL)
def test_reducers_sum_max_min_match_numpy(target):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, N)).astype(np.float32)
    x = rng.standard_normal(N).astype(np.float32)
    ints = rng.integers(-1000, 1000, (M, N), dtype=np.int32)
    o, mx, mn = np.zeros(M, np.float32), np.zeros(M, np.float32), np.zeros(M, np.int32)
    tilecore.compile(_gemv_max_min(), target=target)(a, x, ints, o, mx, mn)
    np.testing.assert_allclose(o, a.astype(np.float64) @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(mx, a.max(axis=1))
    np.testing.assert_array_equal(mn, ints.min(axis=1))


def test_replication_none_is_warned_as_not_applied(monkeypatch):
    from tilecore.errors import TileConfigWarning
    from tilecore.language import hints

    monkeypatch.setattr(hints, "_told", set())  # warned once per line and process
    with pytest.warns(TileConfigWarning, match=r'replication="none"\) is accepted but not applied'):
        _gemv_max_min()


def test_a_reducer_update_counts_every_iteration_exactly():
    """Integer sums are exact: every T.Parallel iteration's contribution is added once."""

    @T.prim_func
    def k(A: T.Tensor((8, 64), T.int32), O: T.Tensor((4,), T.int32)):
        with T.Kernel(1, threads=64) as bx:
            r = T.alloc_reducer((4,), T.int32)
            T.clear(r)
            for i, j in T.Parallel(8, 64):
                r[i % 4] += A[i, j]  # two rows land in each element
            T.finalize_reducer(r)
            T.copy(r, O)

    a = np.random.default_rng(1).integers(-50, 50, (8, 64), dtype=np.int32)
    o = np.zeros(4, np.int32)
    tilecore.compile(k, target="interp")(a, o)
    np.testing.assert_array_equal(o, a.sum(axis=1).reshape(2, 4).sum(axis=0))


def _read_before_finalize():
    @T.prim_func
    def k(A: T.Tensor((16, 16), T.float32), O: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            r = T.alloc_reducer((16,), T.float32)
            T.clear(r)
            for i, j in T.Parallel(16, 16):
                r[i] += A[i, j]
            T.copy(r, O)

    return k


def test_reducer_misuse_is_located():
    with pytest.raises(TileSyntaxError, match="before T.finalize_reducer") as e:
        tilecore.compile(_read_before_finalize(), target="interp")
    assert "test_tilelang_reducers.py" in str(e.value)
    with pytest.raises(TileSyntaxError, match=r"updated only as `r\[...\] \+= value`"):
        @T.prim_func
        def k(A: T.Tensor((16,), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                r = T.alloc_reducer((16,), T.float32)
                T.clear(r)
                for i in T.Parallel(16):
                    r[i] = A[i]
    with pytest.raises(TileTypeError, match="op='prod'"):
        @T.prim_func
        def k2(A: T.Tensor((16,), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                T.alloc_reducer((16,), T.float32, op="prod")


def test_an_uninitialized_max_reducer_is_reported():
    @T.prim_func
    def k(A: T.Tensor((16, 16), T.float32), O: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            r = T.alloc_reducer((16,), T.float32, op="max")
            for i, j in T.Parallel(16, 16):
                r[i] = T.max(r[i], A[i, j])
            T.finalize_reducer(r)
            T.copy(r, O)

    with pytest.raises(TileRuntimeError, match="before it was initialized"):
        tilecore.compile(k, target="interp")(np.ones((16, 16), np.float32), np.zeros(16, np.float32))


def _rounds():
    """A reducer used in two rounds (refilled with a non-zero init, updated over a 3-D nest
    reducing two of its loops, finalized, read), and one whose every iteration owns an element
    (updated over the loops it names)."""

    @T.prim_func
    def k(A: T.Tensor((2, 4, 8, 16), T.int32), O: T.Tensor((2, 4), T.int32),
          E: T.Tensor((4, 8), T.int32)):
        with T.Kernel(1, threads=128) as bx:
            r = T.alloc_reducer((4,), T.int32)
            e = T.alloc_reducer((4, 8), T.int32, op="max")
            T.fill(e, -7)
            for rnd in T.serial(2):
                T.fill(r, rnd + 5)
                for i, j, c in T.Parallel(4, 8, 16):
                    r[i] += A[rnd, i, j, c]
                for i, j in T.Parallel(4, 8):
                    e[i, j] = T.max(e[i, j], A[rnd, i, j, 3])
                T.finalize_reducer(r)
                T.copy(r, O[rnd, 0])
            T.finalize_reducer(e)
            T.copy(e, E)

    return k


@pytest.mark.parametrize("target", ALL)
def test_reducers_over_rounds_and_nests_are_exact(target):
    a = np.random.default_rng(2).integers(-50, 50, (2, 4, 8, 16), dtype=np.int32)
    o, e = np.zeros((2, 4), np.int32), np.zeros((4, 8), np.int32)
    tilecore.compile(_rounds(), target=target)(a, o, e)
    np.testing.assert_array_equal(o, a.sum(axis=(2, 3)) + np.array([[5], [6]]))
    np.testing.assert_array_equal(e, np.maximum(a[:, :, :, 3].max(axis=0), -7))


@pytest.mark.parametrize("target", target_params("emu:sm_80"))
def test_thread_lowered_targets_refuse_other_reducer_indices_with_the_fix(target):
    @T.prim_func
    def k(A: T.Tensor((8, 64), T.int32), O: T.Tensor((4,), T.int32)):
        with T.Kernel(1, threads=64) as bx:
            r = T.alloc_reducer((4,), T.int32)
            T.clear(r)
            for i, j in T.Parallel(8, 64):
                r[i % 4] += A[i, j]
            T.finalize_reducer(r)
            T.copy(r, O)

    with pytest.raises(TileTargetError, match="is not one of the T.Parallel loop variables") as e:
        tilecore.compile(k, target=target)
    assert "T.reduce_sum" in e.value.hint and "test_tilelang_reducers.py" in str(e.value)


def test_a_reducer_after_a_grid_sync():
    """The partial starts where its nest's phase does: a T.sync_grid phase keeps no block
    state from the one before (tilecore.ir.grid_sync)."""

    @T.prim_func
    def k(A: T.Tensor((4, 64), T.float32), B: T.Tensor((4, 64), T.float32), O: T.Tensor((4,), T.float32)):
        with T.Kernel(4, threads=64) as bx:
            for j in T.Parallel(64):
                B[bx, j] = A[bx, j] * 2.0
            T.sync_grid()
            r = T.alloc_reducer((1,), T.float32)
            T.clear(r)
            for i, j in T.Parallel(1, 64):
                r[i] += B[3 - bx, j]  # another block's phase-one output
            T.finalize_reducer(r)
            O[bx] = r[0]

    a = np.arange(256, dtype=np.float32).reshape(4, 64)
    for target in ("interp", "emu:sm_80"):
        b, o = np.zeros((4, 64), np.float32), np.zeros(4, np.float32)
        tilecore.compile(k, target=target)(a, b, o)
        np.testing.assert_array_equal(o, (2 * a).sum(axis=1)[::-1])


# --------------------------------------------------------------------------- uint64
def test_uint64_is_a_build_time_constant_type():
    assert T.uint64 == "uint64" and T.uint64.bits == 64 and T.dtype("uint64") is T.uint64

    @T.prim_func
    def const_ok(A: T.Tensor((8,), T.int64)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(8):
                A[i] = T.cast(T.uint64(5), T.int64) + i  # folded while building

    a = np.zeros(8, np.int64)
    tilecore.compile(const_ok, target="interp")(a)
    np.testing.assert_array_equal(a, np.arange(8) + 5)

    @T.prim_func
    def value(A: T.Tensor((8,), T.int64)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(8):
                A[i] = T.cast(T.cast(A[i], T.uint64) >> 1, T.int64)

    with pytest.raises(TileTypeError, match="uint64 is a build-time constant type") as e:
        tilecore.compile(value, target="interp")
    assert "test_tilelang_reducers.py" in str(e.value)


def test_reinterpret_to_handle_is_the_reduce_scope_value():
    @T.prim_func
    def k(A: T.Tensor((8, 4), "float32"), B: T.Tensor((8, 4), "float32")):
        with T.Kernel(1, threads=(4, 8)) as bx:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            acc = T.alloc_local((1,), "float32")
            red = T.alloc_local((1,), "float32")
            acc[0] = A[tk, tn]
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, "float32")]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, red[0], tk,
                                                  dtype="handle"))
            B[tk, tn] = red[0]

    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    out = tilecore.compile(k, out_idx=[1], target="interp")(a)
    np.testing.assert_array_equal(np.asarray(out), np.broadcast_to(a.sum(axis=0), (8, 4)))
