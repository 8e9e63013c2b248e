"""Shared-memory layouts as data (tilecore.ir.smem_layout), their choice from bank facts
(tilecore.lower.smem) and block rasterization (tilecore.lower.raster): core only, no backend."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilecore.ir.expr import Var, linear
from tilecore.ir.smem_layout import Padded, RowMajor, Swizzled
from tilecore.lower.indexing import evaluate, simplify
from tilecore.lower.raster import remap
from tilecore.lower.smem import BankModel, Pattern, choose, conflict_degree, swizzles

BANKS = BankModel(bank_bytes=4, banks=32, vector_bytes=16)
GEMM = [Pattern("column", 16), Pattern("row", 16)]  # ldmatrix rows of 16 bytes, 16-byte vectors


def grid(lay):
    return np.meshgrid(np.arange(lay.rows), np.arange(lay.cols), indexing="ij")


def expr_offsets(lay, bounds=True):
    r, c = Var("r"), Var("c")
    e = lay.offset(r, c)
    if bounds:
        e = simplify(e, {id(r): (0, lay.rows - 1), id(c): (0, lay.cols - 1)})
    R, C = grid(lay)
    return np.broadcast_to(evaluate(e, {id(r): R, id(c): C}), R.shape)


@st.composite
def swizzled(draw):
    base = draw(st.integers(0, 3))
    bits = draw(st.integers(1, 3))
    shift = draw(st.integers(bits, 5))
    period = 1 << (base + shift + bits)
    cols = (1 << base) * draw(st.integers(1, 24))
    rows = draw(st.integers(1, 4)) * period // np.gcd(period, cols)
    return Swizzled(rows, cols, bits, base, shift)


@given(swizzled())
def test_swizzle_expression_matches_numpy_and_is_a_bijection(lay):
    offs = expr_offsets(lay)
    np.testing.assert_array_equal(offs, lay.offset_np(*grid(lay)))
    assert sorted(offs.ravel().tolist()) == list(range(lay.size))


@given(swizzled())
def test_swizzle_keeps_chunks_contiguous_and_periods_repeat(lay):
    offs = lay.offset_np(*grid(lay))
    chunks = offs.reshape(lay.rows, -1, lay.chunk)
    assert (chunks[..., 0] % lay.chunk == 0).all()
    np.testing.assert_array_equal(np.diff(chunks, axis=-1), 1)
    # the same (row, col) one period further in flat row-major order lands one period further
    flat = np.arange(lay.size - lay.period)
    r, c = flat // lay.cols, flat % lay.cols
    r2, c2 = (flat + lay.period) // lay.cols, (flat + lay.period) % lay.cols
    np.testing.assert_array_equal(lay.offset_np(r2, c2), lay.offset_np(r, c) + lay.period)


def test_swizzle_matches_cute_definition_on_bytes():
    # Swizzle<3,4,3> on byte addresses (the 128-byte TMA/wgmma mode) == Swizzle<3,3,3> on fp16
    lay = Swizzled(16, 64, 3, 3, 3)
    R, C = grid(lay)
    byte = (R * 64 + C) * 2
    want = byte ^ (((byte >> 7) & 7) << 4)
    np.testing.assert_array_equal(lay.offset_np(R, C) * 2, want)


def test_vector_offsets_stay_provably_consecutive():
    lay = Swizzled(128, 32, 2, 3, 3)
    r, a = Var("r"), Var("a")
    bounds = {id(r): (0, 127), id(a): (0, 3)}
    base = simplify(lay.offset(r, a * 8), bounds)
    for k in range(8):
        diff = linear(simplify(lay.offset(r, a * 8 + k), bounds) - base)
        assert diff == ({}, k)


def _ops(e) -> list[str]:
    from tilecore.ir.expr import BinOp
    from tilecore.ir.visit import walk
    return [n.op for n in walk(e) if isinstance(n, BinOp)]


def test_fragment_store_chunks_cost_one_xor_on_a_per_thread_row_term():
    # FlashAttention's O_shared (64 fp16 columns, Swizzle<3,3,3>) written from an mma
    # accumulator: thread tx holds rows tx / 4 + 8 i and columns 8 j + 2 (tx % 4) + {0, 1}.
    # Each chunk j must be one XOR of the constant j with the thread's row field, rows 8 apart
    # one constant apart (the STS immediate), not a sum of per-bit terms (which spilled).
    lay = Swizzled(64, 64, 3, 3, 3)
    tx = Var("tx")
    bounds = {id(tx): (0, 127)}
    row0 = simplify(tx // 4, bounds)
    for j in range(8):
        col = simplify(8 * j + (tx % 4) * 2, bounds)
        e0 = simplify(lay.offset(row0, col), bounds)
        e1 = simplify(lay.offset(simplify(row0 + 8, bounds), col), bounds)
        assert _ops(e0).count("bitxor") == (1 if j else 0) and "bitand" not in _ops(e0)
        assert linear(e1 - e0) == ({}, 8 * 64)
        assert linear(simplify(lay.offset(row0, col + 1), bounds) - e0) == ({}, 1)
        T = np.arange(128)
        want = lay.offset_np(T // 4, 8 * j + (T % 4) * 2)
        np.testing.assert_array_equal(evaluate(e0, {id(tx): T}), want)


def test_simplifier_bounds_bit_operations():
    # a bit operation is an atom the simplifier bounds: (x ^ 5) < 8 for x < 8, so a division
    # of a sum with it by 8 folds, and constant XORs fold
    x, k = Var("x"), Var("k")
    bounds = {id(x): (0, 7), id(k): (0, 7)}
    e = simplify(((x ^ 5) * 8 + k) // 8, bounds)
    assert _ops(e) == ["bitxor"]
    assert simplify(((x & 3) + 4) // 8, bounds).value == 0
    assert simplify(x ^ 0, bounds) is x
    from tilecore.ir.expr import BinOp, const
    assert simplify(BinOp("bitxor", const(6), const(3), x.dtype), bounds).value == 5


def test_xor_takes_a_disjoint_constant_out():
    # the k steps of a swizzled operand read chunk (K + y) ^ m: the constant leaves the XOR
    # (one shared per-thread y ^ m), as an immediate when m cannot reach K's bits
    tx = Var("tx")
    bounds = {id(tx): (0, 127)}
    T = np.arange(128)
    y = (tx // 32) * 4 + (tx % 32) // 16  # bits 0 and 2-3: bit 1 is free for K = 2
    cases = [((y + 2) ^ (tx % 8), "bitxor", 2),  # m reaches bit 1: (y ^ m) ^ 2
             ((tx % 8 + 8) ^ (tx // 16), "add", 8),  # m < 8: 8 + ((tx % 8) ^ m)
             ((tx % 4 + 2) ^ (tx // 32), None, None)]  # K = 2 overlaps y's bits: kept
    for e, top, k in cases:
        got = simplify(e, bounds)
        np.testing.assert_array_equal(evaluate(got, {id(tx): T}), evaluate(e, {id(tx): T}))
        if top is None:
            assert got.op == "bitxor" and linear(got.a)[1] == 2
        else:
            assert got.op == top and linear(got)[1] == (k if top == "add" else 0)
            if top == "bitxor":
                assert got.b.value == k and linear(got.a.a)[1] == 0


def test_padded_and_row_major():
    p = Padded(4, 6, 2)
    assert p.size == 32 and p.contiguous(2) and not p.contiguous(4)
    np.testing.assert_array_equal(expr_offsets(p), p.offset_np(*grid(p)))
    assert expr_offsets(RowMajor(3, 5))[2, 4] == 14


def test_bad_swizzles_are_rejected():
    for args in [(8, 64, 0, 3, 3), (8, 64, 3, 3, 2), (8, 60, 3, 3, 3), (2, 64, 3, 3, 3)]:
        with pytest.raises(ValueError):
            Swizzled(*args)


def test_conflict_model():
    # 128-byte rows read 8 rows at a time: row-major puts all 8 in the same banks
    assert conflict_degree(RowMajor(64, 64), 2, BANKS, [Pattern("column", 16)]) == 8
    assert conflict_degree(Padded(64, 64, 8), 2, BANKS, [Pattern("column", 16)]) == 1
    assert conflict_degree(RowMajor(64, 64), 2, BANKS, [Pattern("row", 16)]) == 1
    # padding 64-byte rows by 16 bytes breaks 16-byte vector rows (the old rule)
    assert conflict_degree(Padded(128, 32, 8), 2, BANKS, [Pattern("row", 16)]) == 2


@pytest.mark.parametrize("cols, dtype_bytes, want", [
    (16, 2, (1, 3, 3)), (32, 2, (2, 3, 3)), (64, 2, (3, 3, 3)), (128, 2, (3, 3, 4)),
    (32, 4, (3, 2, 3)), (192, 2, (3, 3, 3)),
])
def test_choice_is_a_conflict_free_swizzle_without_padding(cols, dtype_bytes, want):
    rows = 64
    lay = choose(rows, cols, dtype_bytes, BANKS, GEMM)
    assert isinstance(lay, Swizzled) and lay.size == rows * cols
    assert (lay.bits, lay.base, lay.shift) == want
    assert conflict_degree(lay, dtype_bytes, BANKS, GEMM) == 1
    assert conflict_degree(RowMajor(rows, cols), dtype_bytes, BANKS, GEMM) > 1


def test_choice_without_bank_facts_or_column_reads_is_row_major():
    assert choose(64, 64, 2, None, GEMM) == RowMajor(64, 64)
    assert choose(64, 64, 2, BANKS, [Pattern("row", 16)]) == RowMajor(64, 64)
    # rows that are not whole 16-byte chunks cannot be swizzled: padding is the fallback
    assert swizzles(64, 20, 2, BANKS) == []


@given(st.integers(1, 13), st.integers(1, 13), st.integers(1, 6), st.sampled_from(["row", "col"]))
def test_rasterization_is_a_bijection(gx, gy, panel, order):
    bx, by = Var("bx"), Var("by")
    nx, ny = remap(bx, by, gx, gy, panel, order)
    X, Y = np.meshgrid(np.arange(gx), np.arange(gy), indexing="xy")
    env = {id(bx): X.ravel(), id(by): Y.ravel()}
    px, py = evaluate(nx, env), evaluate(ny, env)
    assert ((0 <= px) & (px < gx) & (0 <= py) & (py < gy)).all()
    assert len(set(zip(px.tolist(), py.tolist()))) == gx * gy
    # launch order walks panels: the first panel * gx blocks stay within `panel` rows (columns)
    first = slice(0, min(panel, gy if order == "row" else gx) * (gx if order == "row" else gy))
    lin_order = np.argsort(Y.ravel() * gx + X.ravel(), kind="stable")
    held = (py if order == "row" else px)[lin_order][first]
    assert held.max() < panel


KERNEL = '''
import tilecore.language as T


@T.prim_func
def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
    with T.Kernel(4, 4, threads=64) as (bx, by):
        T.use_swizzle(2, "col")
        S = T.alloc_shared((16, 16), "float16")
        R = T.alloc_shared((16, 16), "float16")
        T.annotate_layout({S: T.make_padded_layout(S, pad=8), R: T.make_swizzled_layout(R)})
        T.copy(A[by * 16, bx * 16], S)
        T.copy(S, R)
        T.copy(R, B[by * 16, bx * 16])
'''


def _load(path, text):
    import importlib.util

    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.k


def test_placement_annotations_print_and_reparse(tmp_path):
    func = _load(tmp_path / "orig.py", KERNEL)
    src = func.script()
    assert "T.use_swizzle(2, 'col')" in src
    assert "T.make_padded_layout(S, pad=8)" in src and "T.make_swizzled_layout(R)" in src
    again = _load(tmp_path / "again.py", "import tilecore.language as T\n\n" + src)
    assert again.script() == src


def test_loader_geometry_comes_from_the_intrinsic():
    """A loader of four 4x8 matrices (not ldmatrix's 8x8) is found and placed from its shape."""
    from tilecore import dtypes
    from tilecore.ir.intrinsic import Intrinsic, LaneMap, Operand
    from tilecore.lower.gemm import find_loader, loader_rows

    dst = LaneMap.from_fn(16, 8, 32, 4, lambda lane, e: (4 * e + lane // 8, lane % 8))
    src = LaneMap.from_fn(16, 8, 32, 1, lambda lane, e: (lane % 16, 0))
    ld = Intrinsic("load.4x8.x4", "ldmatrix", (4, 4, 8),
                   (Operand("dst", "out", dtypes.float16, "reg", dst),
                    Operand("src", "in", dtypes.float16, "shared", src)))
    where = [(4, 8), (0, 0), (4, 0), (0, 8)]
    op = LaneMap.from_fn(8, 16, 32, 4, lambda lane, e: (where[e][0] + lane // 8, where[e][1] + lane % 8))
    found = find_loader([ld], op, contiguous_axis=1)
    assert found is not None and list(found[1]) == where
    starts = loader_rows(ld, found[1], 1, 8, 16)
    # lane l addresses stacked row l: matrix l // 4 (placed at where[l // 4]), its row l % 4
    assert [starts.at(lane, 0) for lane in (3, 5, 9, 14)] == [(7, 8), (1, 0), (5, 0), (2, 8)]
