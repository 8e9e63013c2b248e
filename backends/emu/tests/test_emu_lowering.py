"""Tile programs exercising each lowering pass, run on `emu:sm_80` against `interp`.

TILECORE_LOWERING_TARGET=cuda runs the same programs on a GPU (the emu-only fault tests skip).
"""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.errors import TileError, TileRuntimeError

EMU = os.environ.get("TILECORE_LOWERING_TARGET", "emu:sm_80")
emu_only = pytest.mark.skipif(not EMU.startswith("emu"), reason="fault detection is the emulator's")


def both(func, *args, out_idx=(-1,), exact=True, tol=1e-5):
    """Run on interp and emu; compare (exactly or with `tol`); return the emu outputs."""
    ref = tilecore.jit(func, out_idx=list(out_idx), target="interp")(*args)
    kernel = tilecore.jit(func, out_idx=list(out_idx), target=EMU)
    out = kernel(*args)
    refs = ref if isinstance(ref, list) else [ref]
    outs = out if isinstance(out, list) else [out]
    for o, r in zip(outs, refs):
        if exact:
            np.testing.assert_array_equal(o, r)
        else:
            np.testing.assert_allclose(o.astype(np.float64), r.astype(np.float64), rtol=tol, atol=tol)
    return kernel


def ints(rng, shape, dtype="float32", lo=-8, hi=8):
    return rng.integers(lo, hi, size=shape).astype(dtype)


# --------------------------------------------------------------------------- reductions


@pytest.mark.parametrize("kind", ["sum", "max", "min", "abssum", "absmax"])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("clear", [True, False])
def test_reduce_fragment(kind, dim, clear):
    M, N, threads = 16, 64, 128
    out_len = N if dim == 0 else M
    reduce = getattr(T, f"reduce_{kind}")

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), O: T.Tensor((out_len,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            x = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((out_len,), "float32")
            T.copy(A[0, 0], x)
            T.fill(r, 1.0)
            reduce(x, r, dim=dim, clear=clear)
            T.copy(r, O[0])

    both(k, ints(np.random.default_rng(0), (M, N)))


def test_reduce_of_shared_source_and_gemm_layout():
    """reduce over a shared tile, and over a tensor-core accumulator (shuffles + cross-warp)."""
    M = N = 32

    @T.prim_func
    def k(A: T.Tensor((M, N), "float16"), B: T.Tensor((N, N), "float16"), O: T.Tensor((M,), "float32"),
          P: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((M, N), "float16")
            b_s = T.alloc_shared((N, N), "float16")
            c = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            p = T.alloc_fragment((N,), "float32")
            T.copy(A[0, 0], a_s)
            T.copy(B[0, 0], b_s)
            T.clear(c)
            T.gemm(a_s, b_s, c)
            T.reduce_max(c, r, dim=1)
            T.reduce_sum(a_s, p, dim=0)
            T.copy(r, O[0])
            T.copy(p, P[0])

    rng = np.random.default_rng(1)
    both(k, ints(rng, (M, N), "float16", -3, 4), ints(rng, (N, N), "float16", -3, 4), out_idx=(-2, -1))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_cumsum(reverse, dim):
    M, N = 8, 32

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=64) as bx:
            x = T.alloc_fragment((M, N), "float32")
            y = T.alloc_shared((M, N), "float32")
            T.copy(A[0, 0], x)
            T.cumsum(x, y, dim=dim, reverse=reverse)
            T.copy(y, O[0, 0])

    both(k, ints(np.random.default_rng(2), (M, N)))


# --------------------------------------------------------------------------- copies and loops


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 70), bm=st.sampled_from([8, 16, 32]),
       bn=st.sampled_from([8, 16, 64]), threads=st.sampled_from([32, 64, 128]),
       dtype=st.sampled_from(["float16", "float32", "int32"]),
       frag=st.sampled_from(["same", "float32"]))
def test_partial_tile_copies(m, n, bm, bn, threads, dtype, frag):
    """global -> shared -> fragment -> global with tiles overhanging the tensor (the fragment
    possibly of another dtype: vector accesses convert in registers)."""
    fdt = dtype if frag == "same" else frag

    @T.prim_func
    def k(A: T.Tensor((m, n), dtype), O: T.Tensor((m, n), dtype)):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=threads) as (bx, by):
            s = T.alloc_shared((bm, bn), dtype)
            f = T.alloc_fragment((bm, bn), fdt)
            T.copy(A[by * bm, bx * bn], s)
            T.copy(s, f)
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] * 2 + 1
            T.copy(f, O[by * bm, bx * bn])

    both(k, ints(np.random.default_rng(3), (m, n), dtype))


def test_dynamic_shape_and_if_then_else():
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n, 16), "float32"), O: T.Tensor((n, 16), "float32")):
        with T.Kernel(T.ceildiv(n, 8), threads=32) as bx:
            f = T.alloc_fragment((8, 16), "float32")
            T.copy(A[bx * 8, 0], f)
            for i, j in T.Parallel(8, 16):
                f[i, j] = T.if_then_else(f[i, j] > 0, f[i, j], -f[i, j] * 0.5)
            T.copy(f, O[bx * 8, 0])

    both(k, ints(np.random.default_rng(4), (21, 16)))


def test_block_level_scalars_and_atomics():
    """alloc_var, serial loops and element atomics outside and inside T.Parallel."""

    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), O: T.Tensor((4,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            acc = T.alloc_var("float32")
            acc = 0.0
            for t in T.serial(16):
                acc = acc + A[bx * 16 + t]
            T.atomic_add(O[bx], acc)
            for i in T.Parallel(16):
                T.atomic_add(O[(bx + 1) % 4], A[bx * 16 + i])

    both(k, ints(np.random.default_rng(5), (64,)))


def test_local_buffers_are_per_thread():
    """T.alloc_local: fill and copy give every thread the whole buffer."""

    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), O: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            w = T.alloc_local((8,), "float32")
            T.fill(w, 1.0)
            T.copy(A[0], w)
            for i in T.Parallel(64):
                O[i] = w[i % 8] + w[(i + 3) % 8]

    both(k, ints(np.random.default_rng(10), (8,)))


def test_atomic_add_region():
    @T.prim_func
    def k(A: T.Tensor((32, 32), "float32"), O: T.Tensor((16, 16), "float32")):
        with T.Kernel(2, 2, threads=64) as (bx, by):
            f = T.alloc_fragment((16, 16), "float32")
            T.copy(A[by * 16, bx * 16], f)
            T.atomic_add(O[0:16, 0:16], f)

    both(k, ints(np.random.default_rng(6), (32, 32)))


# --------------------------------------------------------------------------- gemm


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("policy", ["square", "full_row", "full_col"])
def test_tensor_core_gemm_variants(dtype, ta, tb, policy):
    M, N, K = 64, 32, 32
    a_shape = (K, M) if ta else (M, K)
    b_shape = (N, K) if tb else (K, N)

    @T.prim_func
    def k(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared(a_shape, dtype)
            b_s = T.alloc_shared(b_shape, dtype)
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A[0, 0], a_s)
            T.copy(B[0, 0], b_s)
            T.gemm(a_s, b_s, c, transpose_A=ta, transpose_B=tb, policy=policy, clear_accum=True)
            T.copy(c, C[0, 0])

    rng = np.random.default_rng(7)
    kern = both(k, ints(rng, a_shape, dtype, -4, 4), ints(rng, b_shape, dtype, -4, 4))
    assert "mma.sync" in kern.get_ir("final")


@pytest.mark.parametrize("dtype,acc", [("float32", "float32"), ("int8", "int32")])
def test_simt_gemm_fallback(dtype, acc):
    M, N, K = 32, 32, 16

    @T.prim_func
    def k(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), acc)):
        with T.Kernel(1, threads=64) as bx:
            a_s = T.alloc_shared((M, K), dtype)
            b_s = T.alloc_shared((K, N), dtype)
            c = T.alloc_fragment((M, N), acc)
            T.copy(A[0, 0], a_s)
            T.copy(B[0, 0], b_s)
            T.clear(c)
            T.gemm(a_s, b_s, c)
            T.copy(c, C[0, 0])

    rng = np.random.default_rng(8)
    kern = both(k, ints(rng, (M, K), dtype), ints(rng, (K, N), dtype))
    assert "mma.sync" not in kern.get_ir("final")


# --------------------------------------------------------------------------- errors


def test_layout_conflict_names_both_uses():
    """One loop writes the gemm accumulator in place and a second fragment transposed: the second
    fragment's layout (fixed by an earlier loop) cannot match the accumulator's."""

    @T.prim_func
    def k(A: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((32, 32), "float16")
            c = T.alloc_fragment((32, 32), "float32")
            d = T.alloc_fragment((32, 32), "float32")
            T.copy(A[0, 0], a_s)
            for i, j in T.Parallel(32, 32):
                d[i, j] = 0.0
            T.gemm(a_s, a_s, c, clear_accum=True)
            for i, j in T.Parallel(32, 32):
                c[i, j] = c[i, j] + 1.0
                d[j, i] = c[i, j]
            T.copy(d, C[0, 0])

    with pytest.raises(TileError) as err:
        tilecore.jit(k, out_idx=[-1], target=EMU)
    msg = str(err.value)
    assert "layout conflict" in msg and "T.gemm at" in msg and "T.Parallel loop at" in msg
    assert "test_emu_lowering.py:" in msg and "d[j, i] = c[i, j]" in msg


def test_transposed_fragment_update_is_staged():
    """c[j, i] = c[i, j] + 1 on a tensor-core accumulator: the owner of c[j, i] computes it from a
    staged copy (no conflict: one fragment, owner computes)."""

    @T.prim_func
    def k(A: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((32, 32), "float16")
            c = T.alloc_fragment((32, 32), "float32")
            T.copy(A[0, 0], a_s)
            T.gemm(a_s, a_s, c, clear_accum=True)
            for i, j in T.Parallel(32, 32):
                c[j, i] = c[i, j] + 1.0
            T.copy(c, C[0, 0])

    both(k, ints(np.random.default_rng(9), (32, 32), "float16", -3, 4))


@pytest.mark.parametrize("inner", ["unroll", "serial"])
def test_inner_loop_writes_whole_fragment_rows(inner):
    """`for i, j in T.Parallel(a, b): for k in T.unroll(c): F[i, j, k] = ...`: the thread running
    iteration (i, j) holds the row F[i, j, :] (TileLang's rule), read back in place, written
    transposed into a second fragment, then reduced and copied out. Before the fix the lowering
    guarded each iteration with `k == <coordinate>` before the loop binding k."""
    a, b, c = 4, 8, 3  # c = 3: a strided layout of (a, b, c) would split the rows over threads
    loop = T.unroll if inner == "unroll" else T.serial

    @T.prim_func
    def k(A: T.Tensor((a, b, c), "float32"), O: T.Tensor((a, b, c), "float32"),
          S: T.Tensor((b, a), "float32")):
        with T.Kernel(1, threads=32) as bx:
            F = T.alloc_fragment((a, b, c), "float32")
            G = T.alloc_fragment((c, b, a), "float32")
            s = T.alloc_fragment((b, a), "float32")
            for i, j in T.Parallel(a, b):
                for kk in loop(c):
                    F[i, j, kk] = A[i, j, kk] * 2.0 + kk
            for i, j in T.Parallel(a, b):
                for kk in loop(c):
                    F[i, j, kk] = F[i, j, kk] - j
                    G[kk, j, i] = F[i, j, kk] * F[i, j, kk]
            T.reduce_sum(G, s, dim=0)
            T.copy(F, O[0, 0, 0])
            T.copy(s, S[0, 0])

    x = ints(np.random.default_rng(14), (a, b, c))
    o, s = both(k, x, out_idx=(-2, -1))(x)
    want = x * 2 + np.arange(c) - np.arange(b)[None, :, None]
    np.testing.assert_array_equal(o, want)
    np.testing.assert_array_equal(s, (want ** 2).sum(axis=2).T)


def test_inner_loop_rows_take_the_layout_their_loop_gets_later():
    """The loop writing F's rows is distributed by G, which has no layout until a default is
    picked; F, also read by a larger loop over all its dimensions, must not take a default of its
    own first (it would spread the rows over threads)."""
    a, b, c = 4, 8, 3

    @T.prim_func
    def k(A: T.Tensor((a, b), "float32"), O: T.Tensor((a, b, c), "float32")):
        with T.Kernel(1, threads=32) as bx:
            F = T.alloc_fragment((a, b, c), "float32")
            G = T.alloc_fragment((a, b), "float32")
            for i, j in T.Parallel(a, b):
                G[i, j] = A[i, j] * 2.0
                for kk in T.serial(c):
                    F[i, j, kk] = G[i, j] + kk
            for i, j, kk in T.Parallel(a, b, c):
                O[i, j, kk] = F[i, j, kk] + 1.0

    x = ints(np.random.default_rng(15), (a, b))
    np.testing.assert_array_equal(both(k, x)(x), x[:, :, None] * 2 + np.arange(c) + 1)


@pytest.mark.parametrize("inner", ["unroll", "serial"])
def test_inner_loop_splitting_a_loop_index_owns_the_split_elements(inner):
    """Dequantization's `F[i, j * E + v]` (a loop variable split by an inner loop inside one
    index): iteration (i, j) holds F[i, j*E : j*E + E]; written from packed 2-bit fields, updated
    in place with the operands in the other order (`v + E * j`), then read by a loop over all of
    F's dimensions and reduced. Before the rule each store was a layout conflict."""
    a, b, E = 16, 8, 4
    loop = T.unroll if inner == "unroll" else T.serial

    @T.prim_func
    def k(A: T.Tensor((a, b), "int8"), S: T.Tensor((a,), "float32"), O: T.Tensor((a, b * E), "float32"),
          R: T.Tensor((a,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            F = T.alloc_fragment((a, b * E), "float32")
            r = T.alloc_fragment((a,), "float32")
            for i, j in T.Parallel(a, b):
                for v in loop(E):
                    F[i, j * E + v] = T.Cast("float32", (A[i, j] >> (v * 2)) & 3) * S[i]
            for i, j in T.Parallel(a, b):
                for v in loop(E):
                    F[i, v + E * j] = F[i, v + E * j] - v
            for i, n in T.Parallel(a, b * E):
                O[i, n] = F[i, n] * 2.0
            T.reduce_sum(F, r, dim=1)
            T.copy(r, R[0])

    rng = np.random.default_rng(16)
    x = rng.integers(-128, 128, (a, b)).astype(np.int8)
    sc = ints(rng, (a,))
    o, red = both(k, x, sc, out_idx=(-2, -1))(x, sc)
    fields = (x[:, :, None].astype(np.int32) >> (np.arange(E) * 2)) & 3
    want = (fields * sc[:, None, None] - np.arange(E)).reshape(a, b * E).astype(np.float32)
    np.testing.assert_array_equal(o, want * 2)
    np.testing.assert_array_equal(red, want.sum(axis=1))


def test_inner_loop_rows_of_a_gemm_accumulator_are_a_located_conflict():
    """A tensor-core accumulator spreads each row over several threads, so a loop that writes
    whole rows of it through an inner loop cannot own them: a located layout conflict."""

    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a_s = T.alloc_shared((16, 16), "float16")
            c = T.alloc_fragment((16, 16), "float32")
            T.copy(A[0, 0], a_s)
            T.gemm(a_s, a_s, c, clear_accum=True)
            for i in T.Parallel(16):
                for kk in T.serial(16):
                    c[i, kk] = c[i, kk] + kk
            T.copy(c, C[0, 0])

    with pytest.raises(TileError) as err:
        tilecore.jit(k, out_idx=[-1], target=EMU)
    msg = str(err.value)
    assert "layout conflict" in msg and "T.gemm at" in msg and "through an inner loop" in msg
    assert "c[i, kk] = c[i, kk] + kk" in msg


@emu_only
def test_out_of_bounds_global_store_names_the_line():
    n = T.dynamic("n")  # symbolic, so only the run can see it (constant shapes fail to compile)

    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), O: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                O[i + 1] = A[i]

    kernel = tilecore.jit(k, out_idx=[-1], target=EMU, pass_configs={"tl.disable_safe_memory_legalize": True})
    with pytest.raises(TileRuntimeError) as err:
        kernel(np.zeros(32, dtype=np.float32))
    assert "out-of-bounds write of global buffer O" in str(err.value)
    assert "O[i + 1] = A[i]" in str(err.value)


@emu_only
def test_out_of_bounds_index_inside_the_flat_range_is_caught():
    """A[i, j + 1] at the end of a row lands in the next row's memory: still out of bounds."""

    m = T.dynamic("m")

    @T.prim_func
    def k(A: T.Tensor((4, m), "float32"), O: T.Tensor((4, m), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i, j in T.Parallel(4, 8):
                O[i, j] = A[i, j + 1]

    kernel = tilecore.jit(k, out_idx=[-1], target=EMU, pass_configs={"tl.disable_safe_memory_legalize": True})
    with pytest.raises(TileRuntimeError) as err:
        kernel(np.zeros((4, 8), dtype=np.float32))
    assert "out-of-bounds read of global buffer A" in str(err.value)
    assert "dimension 1 of size 8" in str(err.value) and "O[i, j] = A[i, j + 1]" in str(err.value)


@emu_only
def test_out_of_bounds_shared_read_names_the_line():
    @T.prim_func
    def k(A: T.Tensor((32,), "float32"), off: T.int32, O: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((32,), "float32")
            T.copy(A[0], s)
            for i in T.Parallel(32):
                O[i] = s[i + off]  # a run-time offset: a constant one fails to compile

    kernel = tilecore.jit(k, out_idx=[-1], target=EMU)
    with pytest.raises(TileRuntimeError) as err:
        kernel(np.zeros(32, dtype=np.float32), 4)
    assert "out-of-bounds read of shared buffer s" in str(err.value)
    assert "O[i] = s[i + off]" in str(err.value)


def test_parallel_loop_vectorized():
    """A T.Parallel loop over global and shared fp16 data moves 8 elements (16 bytes) per access."""
    M, N = 64, 64

    @T.prim_func
    def k(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((32, N), "float16")
            T.copy(B[bx * 32, 0], s)
            for i, j in T.Parallel(32, N):
                C[bx * 32 + i, j] = A[bx * 32 + i, j] * 2 + s[i, j]

    rng = np.random.default_rng(11)
    kern = both(k, ints(rng, (M, N), "float16"), ints(rng, (M, N), "float16"))
    ir = kern.get_ir("final")
    assert "A_vec[0 : +8] = A[" in ir and "] = C_vec[0 : +8]" in ir


@pytest.mark.parametrize("first_policy", ["full_row", "full_col", "square"])
def test_gemm_with_a_from_a_fragment(first_policy):
    """P = A @ B, then P (cast, in registers) @ V: the second gemm takes A from a fragment, in
    registers when the layouts line up (full_row), through shared memory otherwise."""
    M, N, D = 64, 32, 32

    @T.prim_func
    def k(A: T.Tensor((M, D), "float16"), B: T.Tensor((D, N), "float16"), V: T.Tensor((N, D), "float16"),
          O: T.Tensor((M, D), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((M, D), "float16")
            b_s = T.alloc_shared((D, N), "float16")
            v_s = T.alloc_shared((N, D), "float16")
            p = T.alloc_fragment((M, N), "float32")
            p16 = T.alloc_fragment((M, N), "float16")
            o = T.alloc_fragment((M, D), "float32")
            T.copy(A[0, 0], a_s)
            T.copy(B[0, 0], b_s)
            T.copy(V[0, 0], v_s)
            T.gemm(a_s, b_s, p, clear_accum=True, policy=first_policy)
            T.copy(p, p16)
            T.gemm(p16, v_s, o, clear_accum=True, policy="full_row")
            T.copy(o, O[0, 0])

    rng = np.random.default_rng(12)
    args = [ints(rng, s, "float16", -2, 3) for s in ((M, D), (D, N), (N, D))]
    kern = both(k, *args)
    staged = "p16_staged" in kern.get_ir("final")
    if first_policy != "square":  # square picks (4, 1) warps here, the same as full_row
        assert staged == (first_policy == "full_col")
