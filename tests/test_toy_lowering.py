"""The core's thread lowering on the toy targets (warps of 4 and 64, scrambled mma lane maps).

Each kernel is lowered by `tilecore.lower` and executed by `tilecore.emulator`, and compared with
NumPy: exactly where the arithmetic is exact (integer and small-integer float data), within the
fp16 rounding of the output otherwise. Nothing here needs a backend distribution.
"""

import functools

import numpy as np
import pytest
import toy_backend
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore import dtypes as dt
from tilecore.ir.thread import IntrinsicCall, find_kernel
from tilecore.ir.visit import rewrite
from tilecore.lower.tensorize import GemmQuery
from tilecore.target import Target

W4, W64 = "toy:w4", "toy:w64"


def run(func, *args, target, out_idx=(-1,)):
    kernel = tilecore.jit(func, out_idx=list(out_idx), target=target)
    return kernel, kernel(*args)


# ------------------------------------------------------------------------------------- gemm

def gemm_kernel(M, N, K, bM, bN, bK, threads, policy="square", ta=False, tb=False, dtype="float16"):
    """C = op(A) @ op(B) tiled over blocks; A is (K, M) when ta, B is (N, K) when tb."""
    a_shape, b_shape = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))
    a_tile, b_tile = ((bK, bM) if ta else (bM, bK)), ((bN, bK) if tb else (bK, bN))

    @T.prim_func
    def k(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            a_s = T.alloc_shared(a_tile, dtype)
            b_s = T.alloc_shared(b_tile, dtype)
            c = T.alloc_fragment((bM, bN), "float32")
            T.clear(c)
            for kk in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                if ta:
                    T.copy(A[kk * bK, by * bM], a_s)
                else:
                    T.copy(A[by * bM, kk * bK], a_s)
                if tb:
                    T.copy(B[bx * bN, kk * bK], b_s)
                else:
                    T.copy(B[kk * bK, bx * bN], b_s)
                T.gemm(a_s, b_s, c, transpose_A=ta, transpose_B=tb, policy=policy)
            T.copy(c, C[by * bM, bx * bN])

    return k


def small_ints(rng, shape, dtype):
    """Integers in [-4, 4]: every product and partial sum is exact in fp16/bf16 and float32."""
    return rng.integers(-4, 5, shape).astype(dt.as_dtype(dtype).np)


def plan(target, m, n, k, threads, policy, dtype=dt.float16):
    """The toy backend's tensorization answer for one gemm (None: SIMT fallback)."""
    t = Target.parse(target)
    q = GemmQuery(dtype, dtype, dt.float32, m, n, k, False, False, "shared", "shared", threads,
                  toy_backend.warp_size(t), policy)
    return toy_backend.TOY.tile_gemm_tensorize(target=t, query=q)


@pytest.mark.parametrize("target,threads,policy,grid", [
    (W4, 16, "square", (2, 2)), (W4, 16, "full_row", (4, 1)), (W4, 16, "full_col", (1, 4)),
    (W4, 4, "square", (1, 1)), (W4, 32, "full_col", (1, 8)),
    (W64, 256, "square", (2, 2)), (W64, 256, "full_row", (4, 1)), (W64, 256, "full_col", (1, 4)),
    (W64, 64, "square", (1, 1)),
])
def test_scrambled_mma_gemm_under_each_warp_grid(target, threads, policy, grid):
    """Exact: small-integer operands make every fp16 product and fp32 sum exact."""
    M, N, K, bM, bN, bK = 48, 40, 40, 32, 32, 16
    p = plan(target, bM, bN, bK, threads, policy)
    assert p is not None and tuple(p.warps) == grid
    rng = np.random.default_rng(0)
    a, b = small_ints(rng, (M, K), "float16"), small_ints(rng, (K, N), "float16")
    kernel, c = run(gemm_kernel(M, N, K, bM, bN, bK, threads, policy), a, b, target=target)
    assert "toy.mma" in kernel.get_ir("final")
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


@pytest.mark.parametrize("target,threads", [(W4, 8), (W64, 128)])
@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_scrambled_mma_with_transposed_operands(target, threads, ta, tb):
    M, N, K = 32, 32, 24
    rng = np.random.default_rng(1)
    a = small_ints(rng, (K, M) if ta else (M, K), "float16")
    b = small_ints(rng, (N, K) if tb else (K, N), "float16")
    kernel, c = run(gemm_kernel(M, N, K, 16, 16, 8, threads, ta=ta, tb=tb), a, b, target=target)
    assert "toy.mma" in kernel.get_ir("final")
    ref = (a.T if ta else a).astype(np.float32) @ (b.T if tb else b).astype(np.float32)
    np.testing.assert_array_equal(c, ref)


@pytest.mark.parametrize("target,threads", [(W4, 16), (W64, 256)])
def test_bf16_gemm_on_ragged_shapes(target, threads):
    """M, N and K are not multiples of the block tile: edge tiles read zeros, drop writes."""
    M, N, K = 37, 29, 53
    rng = np.random.default_rng(2)
    a = rng.standard_normal((M, K)).astype(dt.bfloat16.np)
    b = rng.standard_normal((K, N)).astype(dt.bfloat16.np)
    kernel, c = run(gemm_kernel(M, N, K, 32, 32, 16, threads, dtype="bfloat16"), a, b, target=target)
    assert "toy.mma" in kernel.get_ir("final")
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("target,threads,bk", [(W4, 16, 6), (W64, 128, 12)])
def test_gemm_the_mma_cannot_take_falls_back_to_simt(target, threads, bk):
    """A K tile that is not a multiple of the mma's k, and float32 operands: no toy mma."""
    M, N, K = 32, 32, 30
    rng = np.random.default_rng(3)
    a, b = small_ints(rng, (M, K), "float16"), small_ints(rng, (K, N), "float16")
    kernel, c = run(gemm_kernel(M, N, K, 16, 16, bk, threads), a, b, target=target)
    assert "toy.mma" not in kernel.get_ir("final")
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    kernel, c = run(gemm_kernel(M, N, K, 16, 16, 8, threads, dtype="float32"), a32, b32, target=target)
    assert "toy.mma" not in kernel.get_ir("final")
    np.testing.assert_array_equal(c, a32 @ b32)


@pytest.mark.parametrize("target,threads", [(W4, 16), (W64, 128)])
def test_gemm_with_a_fragment_operand(target, threads):
    """A computed in registers (T.Parallel over a fragment), as FlashAttention's P @ V is."""
    M, N, K = 16, 32, 32

    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            a_f = T.alloc_fragment((M, K), "float16")
            b_s = T.alloc_shared((K, N), "float16")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A, a_f)
            for i, j in T.Parallel(M, K):
                a_f[i, j] = a_f[i, j] * 2
            T.copy(B, b_s)
            T.clear(c)
            T.gemm(a_f, b_s, c)
            T.copy(c, C)

    rng = np.random.default_rng(4)
    a, b = small_ints(rng, (M, K), "float16"), small_ints(rng, (K, N), "float16")
    kernel, c = run(k, a, b, target=target)
    assert "toy.mma" in kernel.get_ir("final")
    np.testing.assert_array_equal(c, 2 * a.astype(np.float32) @ b.astype(np.float32))


# ------------------------------------------------------------------------- reductions

def reduce_kernel(M, N, bM, bN, threads, kind, dim, dtype):
    """Per block: reduce 3 * the (bM, bN) tile of A along `dim`; write the partials. (The
    T.Parallel loop gives the fragment its layout, so the reduction takes the shuffle path.)"""
    out_shape = (T.ceildiv(M, bM) * bM, T.ceildiv(N, bN)) if dim == 1 else (T.ceildiv(M, bM), N)
    out_shape = tuple(int(x) for x in out_shape)
    red = {"sum": T.reduce_sum, "max": T.reduce_max, "absmax": T.reduce_absmax}[kind]

    @T.prim_func
    def k(A: T.Tensor((M, N), dtype), O: T.Tensor(out_shape, dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            f = T.alloc_fragment((bM, bN), dtype)
            T.copy(A[by * bM, bx * bN], f)
            for i, j in T.Parallel(bM, bN):
                f[i, j] = f[i, j] * 3
            if dim == 1:
                r = T.alloc_fragment((bM,), dtype)
                red(f, r, dim=1)
                for i in T.Parallel(bM):
                    O[by * bM + i, bx] = r[i]
            else:
                r = T.alloc_fragment((bN,), dtype)
                red(f, r, dim=0)
                for j in T.Parallel(bN):
                    if bx * bN + j < N:
                        O[by, bx * bN + j] = r[j]

    return k


def reduce_ref(a, M, N, bM, bN, kind, dim):
    """The blockwise reduction of 3 * A in NumPy; cells outside A read 0 (T.copy's rule)."""
    Mp, Np = -(-M // bM) * bM, -(-N // bN) * bN
    pad = np.zeros((Mp, Np), a.dtype)
    pad[:M, :N] = 3 * a
    blocks = pad.reshape(Mp, Np // bN, bN) if dim == 1 else pad.reshape(Mp // bM, bM, Np)
    axis = 2 if dim == 1 else 1
    v = np.abs(blocks) if kind == "absmax" else blocks
    out = v.sum(axis=axis) if kind == "sum" else v.max(axis=axis)
    return out if dim == 1 else out[:, :N]


# thread counts include partial warps (6 on w4; 32 and 96 on w64)
@pytest.mark.parametrize("target,threads", [(W4, 4), (W4, 6), (W4, 16), (W4, 32), (W64, 32), (W64, 64),
                                            (W64, 96), (W64, 256)])
@pytest.mark.parametrize("kind", ["sum", "max", "absmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_reductions_across_lanes_and_warps(target, threads, kind, dim):
    """Ragged shapes (37 x 90 over 16 x 64 tiles); int32 sums and maxima are exact."""
    M, N, bM, bN = 37, 90, 16, 64
    rng = np.random.default_rng(5)
    a = rng.integers(-1000, 1000, (M, N)).astype(np.int32)
    kernel, o = run(reduce_kernel(M, N, bM, bN, threads, kind, dim, "int32"), a, target=target)
    want = reduce_ref(a, M, N, bM, bN, kind, dim)
    np.testing.assert_array_equal(o[:want.shape[0], :want.shape[1]], want)


@pytest.mark.parametrize("target,threads", [(W4, 16), (W64, 256)])
def test_row_reduction_spanning_warps_uses_shuffles(target, threads):
    """One row spread over several warps: butterfly shuffles within a warp of the target's width,
    then a shared-memory combine across warps."""
    M, N = 2, 256
    rng = np.random.default_rng(6)
    a = rng.standard_normal((M, N)).astype(np.float32)
    kernel, o = run(reduce_kernel(M, N, M, N, threads, "max", 1, "float32"), a, target=target)
    np.testing.assert_array_equal(o[:, 0], 3 * a.max(axis=1))
    ir = kernel.get_ir("final")
    width = toy_backend.warp_size(Target.parse(target))
    assert f"width={width})" in ir and "shfl_xor" in ir
    assert "red_scratch" in ir and "barrier()" in ir


@pytest.mark.parametrize("target,threads", [(W4, 6), (W4, 16), (W64, 96), (W64, 128)])
@pytest.mark.parametrize("dim", [0, 1])
def test_cumsum_over_a_fragment(target, threads, dim):
    @T.prim_func
    def k(A: T.Tensor((16, 64), "int32"), B: T.Tensor((16, 64), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            f = T.alloc_fragment((16, 64), "int32")
            T.copy(A, f)
            T.cumsum(f, dim=dim)
            T.copy(f, B)

    a = np.random.default_rng(8).integers(-9, 9, (16, 64)).astype(np.int32)
    _, b = run(k, a, target=target)
    np.testing.assert_array_equal(b, np.cumsum(a, axis=dim))


# ------------------------------------------------------------------------ elementwise, dynamic

@functools.cache
def _dynamic_elementwise(target):
    """examples/elementwise_add with a symbolic length, lowered once per target: the
    Hypothesis examples below vary only the length the one kernel is called with."""
    import elementwise_add

    return tilecore.jit(elementwise_add.program(block=128), out_idx=[-1], target=target)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 700), target=st.sampled_from([W4, W64]))
def test_dynamic_ragged_elementwise(n, target):
    kernel = _dynamic_elementwise(target)
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 0.5, dtype=np.float32)
    np.testing.assert_array_equal(kernel(a, b), a + b)


@pytest.mark.parametrize("target,threads", [(W4, 8), (W64, 64)])
def test_global_atomics_from_every_block(target, threads):
    @T.prim_func
    def k(A: T.Tensor((300,), "int32"), S: T.Tensor((4,), "int32")):
        with T.Kernel(T.ceildiv(300, 64), threads=threads) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < 300:
                    T.atomic_add(S[(bx * 64 + i) % 4], A[bx * 64 + i])

    a = np.arange(300, dtype=np.int32)
    s = np.zeros(4, np.int32)
    tilecore.jit(k, target=target)(a, s)
    np.testing.assert_array_equal(s, [a[r::4].sum() for r in range(4)])


# ------------------------------------------------------------------------------ mutation

@pytest.mark.parametrize("lanes", [4, 64])
def test_toy_maps_are_scrambled_bijections(lanes):
    """The premise of the toy: every map is a bijection but not the natural order, and A's map
    has no bit-field formula (the lowering must index through a table)."""
    from tilecore.ir.expr import Var
    from tilecore.ir.thread import LaneTable

    maps = toy_backend.mma_maps(lanes)
    lane = Var("lane", dt.int32)
    for name, m in maps.items():
        natural = tuple(divmod(s, m.cols) for s in range(m.rows * m.cols))
        assert m.is_bijective() and m.table != natural, name
    a = maps["A"]
    assert any(isinstance(a.coord(lane, e, ax), LaneTable) for e in range(a.elems) for ax in (0, 1))
    c = maps["C"]
    c_tables = [isinstance(c.coord(lane, e, ax), LaneTable) for e in range(c.elems) for ax in (0, 1)]
    assert not any(c_tables) if lanes == 4 else any(c_tables)


@functools.cache
def _gemm_case(target, threads):
    """(program, A, B, NumPy product, kernel with the toy's own maps, its output) of the 16^3
    gemm the lane-map mutation tests below start from: the good kernel is lowered and run once
    per target (toy artifacts are not in the compile cache), each test then builds its mutant.
    The good kernel is lowered before any test installs a mutated backend: every test asserts
    it computes the exact product."""
    M = N = K = 16
    rng = np.random.default_rng(7)
    a, b = small_ints(rng, (M, K), "float16"), small_ints(rng, (K, N), "float16")
    func = gemm_kernel(M, N, K, 16, 16, 8, threads)
    kernel, good = run(func, a, b, target=target)
    return func, a, b, a.astype(np.float32) @ b.astype(np.float32), kernel, good


CASES = [(W4, 8, 4), (W64, 128, 64)]  # (target, threads, lanes)


@pytest.mark.parametrize("target,threads,lanes", CASES)
@pytest.mark.parametrize("operand", ["A", "B", "C"])
def test_a_corrupted_lane_map_breaks_the_result(target, threads, lanes, operand):
    """Slot (1, 0) claims the cell of slot (2, 0) too: one cell held twice, one never. The
    lowering and the emulator both read the table, so the result must go wrong."""
    func, a, b, ref, _, good = _gemm_case(target, threads)
    np.testing.assert_array_equal(good, ref)
    m = toy_backend.mma_maps(lanes)[operand]
    bad_maps = toy_backend.with_entry(lanes, operand, 1, 0, m.at(2, 0))
    with toy_backend.installed(toy_backend.ToyBackend(maps=bad_maps)):
        kernel, bad = run(func, a, b, target=target)
    assert "toy.mma" in kernel.get_ir("final")
    assert np.isnan(bad).any() or not np.array_equal(bad, ref)


@pytest.mark.parametrize("target,threads,lanes", CASES)
@pytest.mark.parametrize("operand", ["A", "C"])
def test_a_consistently_permuted_map_still_computes_the_product(target, threads, lanes, operand):
    """Swapping two slots keeps the map a bijection: the lowering's loads change with it (the IR
    differs) and the result stays exact, because both sides read the one table."""
    func, a, b, ref, good_kernel, good = _gemm_case(target, threads)
    np.testing.assert_array_equal(good, ref)
    good_ir = good_kernel.get_ir("final")
    maps = toy_backend.swapped(lanes, operand, (0, 0), (lanes - 1, 0))
    with toy_backend.installed(toy_backend.ToyBackend(maps=maps)):
        kernel, c = run(func, a, b, target=target)
    assert kernel.get_ir("final") != good_ir
    np.testing.assert_array_equal(c, ref)


@pytest.mark.parametrize("target,threads,lanes", CASES)
def test_the_emulator_executes_the_declared_map(target, threads, lanes):
    """Lower with the toy maps, then change the A map only in the executed instruction: the
    registers were loaded for the old map, so the emulated product must be wrong."""
    func, a, b, ref, kernel, _ = _gemm_case(target, threads)
    final = kernel.stages[-1][1]
    maps = toy_backend.swapped(lanes, "A", (0, 0), (lanes - 1, 0))

    def fn(n):
        if isinstance(n, IntrinsicCall) and n.intrinsic.kind == "mma":
            return IntrinsicCall(n.intrinsic.with_operand("A", map=maps["A"]), n.operands, n.loc)
        return None

    mutated = final.with_func(final.func.with_body(rewrite(final.func.body, fn)))
    assert find_kernel(mutated.func.body) is not None
    from tilecore.emulator.machine import EmuArtifact

    c = np.zeros((16, 16), np.float32)
    EmuArtifact(mutated).run([a, b, c], {})
    assert not np.array_equal(c, ref)
    EmuArtifact(final).run([a, b, c], {})
    np.testing.assert_array_equal(c, ref)
