"""Shared-memory layouts, wide epilogues and block rasterization, lowered for cuda facts and run
on `emu:sm_80` against `interp`."""

import gemm
import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileError
from tilecore.ir.smem_layout import RowMajor, Swizzled
from tilecore.ir.thread import IntrinsicCall, ThreadKernel, VecMove, find_kernel
from tilecore.ir.visit import walk
from tilecore.lower.banks import shared_accesses
from tilecore.lower.smem import BankModel

EMU = "emu:sm_80"
BANKS = BankModel(4, 32, 16)  # the cuda facts' banks (checked below)


def lowered(kernel) -> ThreadKernel:
    return find_kernel(kernel.stages[-1][1].func.body)


def gemm_kernel(**sizes):
    return tilecore.jit(gemm.program(**sizes), out_idx=gemm.OUT_IDX, target=EMU)


def run_gemm(kernel, M, N, K, seed=0, **_):
    a, b = gemm.make_inputs(np.random.default_rng(seed), M=M, N=N, K=K)
    c = kernel(a, b)
    np.testing.assert_allclose(c.astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)


def test_cuda_facts_declare_the_bank_model():
    from tilecore_cuda.lowering import tile_target_facts

    from tilecore.target import Target

    facts = tile_target_facts(Target("cuda", "sm_80"))
    assert (facts.get("shared_bank_bytes"), facts.get("shared_banks"), facts.vector_bytes) == (4, 32, 16)


@pytest.mark.parametrize("sizes", [dict(M=128, N=128, K=64), dict(M=200, N=136, K=100),
                                   dict(M=64, N=64, K=64, block_M=64, block_N=64, block_K=64)])
def test_gemm_shared_accesses_are_conflict_free_and_unpadded(sizes):
    kernel = gemm_kernel(**sizes)
    k = lowered(kernel)
    acc = shared_accesses(k, BANKS)
    assert acc and all(a.degree == 1 for a in acc), [a for a in acc if a.degree > 1]
    for b in k.shared:
        # no padding bytes (pipelined operands hold whole copies of the layout, one per stage)
        assert b.shape[0] % (b.layout.rows * b.layout.cols) == 0
    assert {b.name.split("_")[0] for b in k.shared if isinstance(b.layout, Swizzled)} >= {"A", "B"}
    assert any(isinstance(n, IntrinsicCall) and n.intrinsic.kind == "ldmatrix" for n in walk(k.body))
    run_gemm(kernel, **sizes)


def test_row_major_gemm_operands_would_conflict():
    # the model is not vacuous: the same accesses against row-major storage conflict
    k = lowered(gemm_kernel(M=128, N=128, K=64, block_K=64))
    a = next(b for b in k.shared if b.name.startswith("A"))
    assert a.layout == Swizzled(128, 64, 3, 3, 3)
    from tilecore.lower.smem import Pattern, conflict_degree

    assert conflict_degree(RowMajor(128, 64), 2, BANKS, [Pattern("column", 16)]) == 8


def test_epilogue_stores_are_128_bit_and_tile_guarded():
    k = lowered(gemm_kernel(M=200, N=136, K=100))
    stores = [n for n in walk(k.body) if isinstance(n, VecMove) and n.dst.scope == "global"]
    assert stores and all(s.lanes * s.dst.dtype.itemsize == 16 for s in stores)
    # one unguarded copy for interior tiles, one predicated copy for edge tiles
    assert sum(s.pred is None for s in stores) == sum(s.pred is not None for s in stores)
    staged = [b for b in k.shared if b.name.startswith("C_stage")]
    assert len(staged) == 1 and isinstance(staged[0].layout, Swizzled)


def test_interior_only_grids_have_no_store_guards():
    k = lowered(gemm_kernel(M=256, N=256, K=64))
    stores = [n for n in walk(k.body) if isinstance(n, VecMove) and n.dst.scope == "global"]
    assert stores and all(s.pred is None for s in stores)


def test_thread_printer_shows_layouts():
    ir = gemm_kernel(M=128, N=128, K=64).get_ir("final")
    assert "swizzled 128x32 Swizzle<2,3,3>" in ir and "swizzled 32x128 Swizzle<3,3,4>" in ir


# --------------------------------------------------------------------------- annotate_layout


def annotated(kind, M=96, N=80, K=72, layout=None):
    @T.prim_func
    def g(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            if kind == "swizzled":
                T.annotate_layout({A_s: T.make_swizzled_layout(A_s), B_s: T.make_swizzled_layout(B_s)})
            elif kind == "padded":
                T.annotate_layout({A_s: T.make_padded_layout(A_s), B_s: T.make_padded_layout(B_s, pad=4)})
            elif kind == "row_major":
                T.annotate_layout({A_s: T.make_row_major_layout(A_s)})
            elif kind == "explicit":
                T.annotate_layout({A_s: layout})
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 64, bx * 64])

    return g


@pytest.mark.parametrize("kind, a_layout", [
    ("swizzled", "swizzled 64x32 Swizzle<2,3,3>"), ("padded", "padded 64x32 +8"),
    ("row_major", "row_major 64x32"), ("explicit", "swizzled 64x32 Swizzle<1,3,3>"),
])
def test_annotated_layouts_are_used_and_agree_with_interp(kind, a_layout):
    func = annotated(kind, layout=Swizzled(64, 32, 1, 3, 3))
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (96, 72)).astype(np.float16)
    b = rng.integers(-3, 4, (72, 80)).astype(np.float16)
    want = tilecore.jit(func, out_idx=[2], target="interp")(a, b)
    kernel = tilecore.jit(func, out_idx=[2], target=EMU)
    np.testing.assert_array_equal(kernel(a, b), want)  # small integers: exact in any order
    assert a_layout in kernel.get_ir("final")


def test_annotating_a_fragment_names_the_line():
    with pytest.raises(TileError, match="fragment F is not supported") as err:
        @T.prim_func
        def f(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                F = T.alloc_fragment((64, 64), "float32")
                S = T.alloc_shared((64, 64), "float32")
                T.annotate_layout({F: T.make_swizzled_layout(S)})
                T.copy(A[0, 0], F)

    assert "test_emu_smem.py" in str(err.value) and "T.annotate_layout({F:" in str(err.value)


def test_unsupported_layout_objects_and_unswizzlable_tiles_are_errors():
    with pytest.raises(TileError, match="str is not a supported layout for S"):
        @T.prim_func
        def f(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((64, 64), "float16")
                T.annotate_layout({S: "swizzle"})
                T.copy(A[0, 0], S)

    @T.prim_func
    def g(A: T.Tensor((64, 20), "float16"), B: T.Tensor((64, 20), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 20), "float16")
            T.annotate_layout({S: T.make_swizzled_layout(S)})
            T.copy(A[0, 0], S)
            T.copy(S, B[0, 0])

    with pytest.raises(TileError, match="cannot be swizzled") as err:
        tilecore.compile(g, out_idx=[1], target=EMU)
    assert "T.annotate_layout({S:" in str(err.value)

    with pytest.raises(TileError, match="buffer is 64x32"):
        tilecore.compile(annotated("explicit", layout=Swizzled(32, 64, 3, 3, 3)), out_idx=[2], target=EMU)


def self_staged(M=96, N=80, K=72):
    """A GEMM whose epilogue stages its accumulator itself, as FlashAttention's O_shared: the
    fragment copied into a shared tile, the tile copied out (ragged: edge tiles too)."""
    @T.prim_func
    def g(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_s = T.alloc_shared((64, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * 64, bx * 64])

    return g


@pytest.mark.parametrize("disabled", [False, True])
def test_a_tile_the_kernel_stages_itself_is_swizzled(disabled):
    # 64 fp16 columns are 128 bytes: row-major, the accumulator's writes (8 rows of 16 bytes
    # per phase) all hit the same 4 banks; the staged-tile swizzle makes them conflict-free
    # and the vector reads stay conflict-free through the same layout
    func = self_staged()
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (96, 72)).astype(np.float16)
    b = rng.integers(-3, 4, (72, 80)).astype(np.float16)
    want = tilecore.jit(func, out_idx=[2], target="interp")(a, b)
    configs = {"tilecore.disable_staged_swizzle": True} if disabled else None
    kernel = tilecore.jit(func, out_idx=[2], target=EMU, pass_configs=configs)
    np.testing.assert_array_equal(kernel(a, b), want)  # small integers: exact in any order
    k = lowered(kernel)
    c_s = next(b for b in k.shared if b.name == "C_s")
    got = {(x.kind, x.degree) for x in shared_accesses(k, BANKS) if x.buffer == "C_s"}
    if disabled:
        assert c_s.layout == RowMajor(64, 64)
        assert ("vector store", 8) in got
    else:
        assert isinstance(c_s.layout, Swizzled), c_s.layout
        assert {kind for kind, _ in got} == {"vector store", "vector load"}
        assert all(degree == 1 for _, degree in got), got


# --------------------------------------------------------------------------- use_swizzle


def tiles(M, N, panel, order, bm=16, bn=16):
    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
          Cnt: T.Tensor((T.ceildiv(M, bm), T.ceildiv(N, bn)), "int32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=64) as (bx, by):
            T.use_swizzle(panel, order)
            S = T.alloc_shared((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], S)
            T.copy(S, B[by * bm, bx * bn])
            T.atomic_add(Cnt[by, bx], 1)

    return k


@pytest.mark.parametrize("M, N, panel, order", [(70, 50, 3, "row"), (64, 100, 4, "col"),
                                                (33, 17, 8, "row"), (48, 80, 2, "column")])
def test_use_swizzle_runs_every_block_once_with_identical_results(M, N, panel, order):
    a = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    kernel = tilecore.jit(tiles(M, N, panel, order), out_idx=[1, 2], target=EMU)
    b, cnt = kernel(a)
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(cnt, 1)
    assert "bx_r = " in kernel.get_ir("final")  # the remap is really there


def test_use_swizzle_gemm_matches():
    @T.prim_func
    def g(A: T.Tensor((200, 72), "float16"), B: T.Tensor((72, 136), "float16"),
          C: T.Tensor((200, 136), "float16")):
        with T.Kernel(T.ceildiv(136, 32), T.ceildiv(200, 32), threads=128) as (bx, by):
            T.use_swizzle(panel_size=3)
            A_s = T.alloc_shared((32, 32), "float16")
            B_s = T.alloc_shared((32, 32), "float16")
            C_l = T.alloc_fragment((32, 32), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(72, 32), num_stages=2):
                T.copy(A[by * 32, k * 32], A_s)
                T.copy(B[k * 32, bx * 32], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 32, bx * 32])

    rng = np.random.default_rng(2)
    a = rng.integers(-3, 4, (200, 72)).astype(np.float16)
    b = rng.integers(-3, 4, (72, 136)).astype(np.float16)
    want = tilecore.jit(g, out_idx=[2], target="interp")(a, b)
    np.testing.assert_array_equal(tilecore.jit(g, out_idx=[2], target=EMU)(a, b), want)


def test_use_swizzle_needs_a_2d_grid_and_one_call():
    @T.prim_func
    def one_d(A: T.Tensor((64,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            T.use_swizzle(2)
            A[bx] = 1.0

    with pytest.raises(TileError, match="rasterizes a 2-D grid") as err:
        tilecore.compile(one_d, target=EMU)
    assert "T.use_swizzle(2)" in str(err.value)

    with pytest.raises(TileError, match="given twice"):
        @T.prim_func
        def twice(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(4, 4, threads=32) as (bx, by):
                T.use_swizzle(2)
                T.use_swizzle(4)
                A[by, bx] = 1.0

    with pytest.raises(TileError, match="order must be"):
        @T.prim_func
        def bad(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(4, 4, threads=32) as (bx, by):
                T.use_swizzle(2, order="diagonal")
                A[by, bx] = 1.0
