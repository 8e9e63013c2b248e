"""`T.annotate_layout({S: T.Layout(shape, lambda ...)})`: a user's index map is the physical layout
of a shared buffer in the thread lowering (tilecore.ir.index_layout).

A layout never changes a value, so each test checks both that emu agrees with NumPy and
that the lowered thread program stores every element where the map says (its shared offsets,
evaluated for every thread), or reads it with the instruction the placement allows."""

import contextlib

import gemm  # noqa: F401 (test_emu_smem's kernels import it)
import numpy as np
import pytest
from test_emu_smem import annotated, lowered

import tilecore
import tilecore.language as T
from tilecore.cuda.intrinsics.layout.mma_layout import get_swizzle_layout
from tilecore.errors import TileLayoutError, TilePerformanceWarning
from tilecore.ir.index_layout import IndexMapped
from tilecore.ir.smem_layout import Panelled, Swizzled
from tilecore.ir.thread import IntrinsicCall, MemLoad, MemStore, VecMove
from tilecore.ir.visit import walk
from tilecore.lower.indexing import evaluate


def copy_through(shape, fn, threads=64):
    @T.prim_func
    def f(A: T.Tensor(shape, "float32"), B: T.Tensor(shape, "float32")):
        with T.Kernel(1, threads=threads):
            S = T.alloc_shared(shape, "float32")
            T.annotate_layout({S: T.Layout(S.shape, fn)})
            T.copy(A, S)
            T.copy(S, B)

    return f


@contextlib.contextmanager
def numpy_if_then_else():
    """T.if_then_else as np.where, for calling a user's map on NumPy index arrays (the tests'
    reference, independent of tilecore's evaluation)."""
    real = T.if_then_else
    T.if_then_else = np.where
    try:
        yield
    finally:
        T.if_then_else = real


def numpy_map(fn, shape):
    """`fn` on NumPy index arrays of `shape`."""
    with numpy_if_then_else():
        return fn(*np.indices(shape))


def shared_writes(k):
    """(global offset read, shared offset written) of every element the lowered copy A -> S
    moves, for every thread."""
    env = {id(k.thread_var): np.arange(k.num_threads)}
    pairs = []
    for n in walk(k.body):
        if isinstance(n, MemStore) and n.buffer.scope == "shared" and isinstance(n.value, MemLoad):
            src, soff, doff, lanes = n.value.buffer, n.value.offset, n.offset, 1
        elif isinstance(n, VecMove) and n.dst.scope == "shared":
            src, soff, doff, lanes = n.src, n.src_offset, n.dst_offset, n.lanes
        else:
            continue
        assert src.scope == "global"
        s, d = (np.broadcast_to(evaluate(e, env), (k.num_threads,)) for e in (soff, doff))
        for j in range(lanes):
            pairs.append(np.stack([s + j, d + j], axis=-1))
    return np.concatenate(pairs)


@pytest.mark.parametrize("shape, fn, storage", [
    ((32, 32), lambda i, j: [j, i], 1024),  # transposed
    # odd rows reversed, a branch as T.if_then_else (tabulated with np.where)
    ((32, 32), lambda i, j: [i, T.if_then_else(i % 2 < 1, j, 31 - j)], 1024),
    ((32, 32), lambda i, j: i * 33 + j, 32 * 33 - 1),  # rows 33 apart, one output dimension
    ((2, 16, 32), lambda k, i, j: [1 - k, j, i ^ (j % 16)], 1024),  # 3-D, XOR
])
def test_an_index_map_is_where_the_lowered_copy_stores(shape, fn, storage):
    f = copy_through(shape, fn)
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    b = np.zeros_like(a)
    kernel = tilecore.compile(f, target="emu:sm_80")
    kernel(a, b)
    np.testing.assert_array_equal(b, a)
    k = lowered(kernel)
    (s,) = k.shared
    assert isinstance(s.layout, IndexMapped) and s.shape == (storage,)
    assert "index_map" in kernel.get_ir("final")
    # the map, evaluated by NumPy on the logical indices, against the program's offsets
    outs = numpy_map(fn, shape)
    outs = [np.asarray(o) for o in (outs if isinstance(outs, list) else [outs])]
    ext = [int(o.max()) + 1 for o in outs]
    want = np.ravel_multi_index(outs, ext).reshape(-1)
    got = shared_writes(k)
    assert len(got) == a.size and len(np.unique(got[:, 0])) == a.size
    np.testing.assert_array_equal(got[:, 1], want[got[:, 0]])


def reads_of(k, name):
    return {n.intrinsic.kind for n in walk(k.body) if isinstance(n, IntrinsicCall)
            and any(getattr(o, "buffer", None) is not None and o.buffer.name.startswith(name)
                    for o in n.operands)}


@pytest.mark.parametrize("target, fn, layout_type, ldmatrix", [
    # rows reversed: each 16-byte row segment stays contiguous, so ldmatrix reads the map's rows
    ("emu:sm_80", lambda i, j: [63 - i, j], IndexMapped, True),
    # transposed: no row segment is contiguous, so the operand is read element by element
    ("emu:sm_80", lambda i, j: [j, i], IndexMapped, False),
    # TileLang's idiom for the XOR of 16-byte chunks a wgmma descriptor reads (64-byte rows):
    # recognised as that canonical layout
    ("emu:sm_90a", lambda i, j: get_swizzle_layout(i, j, 32, "float16"), Panelled, None),
])
def test_gemm_operands_read_an_index_map_as_its_placement_allows(target, fn, layout_type, ldmatrix):
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (64, 64)).astype(np.float16)  # one block, two k tiles
    b = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    func = annotated("explicit", M=64, N=64, K=64, layout=T.Layout((64, 32), fn))
    kernel = tilecore.jit(func, out_idx=[2], target=target)
    want = a.astype(np.float32) @ b.astype(np.float32)  # small integers: exact in any order
    np.testing.assert_array_equal(kernel(a, b).astype(np.float32), want)
    k = lowered(kernel)
    (a_s,) = [x for x in k.shared if x.name.startswith("A")]
    assert type(a_s.layout) is layout_type
    if ldmatrix is not None:
        assert ("ldmatrix" in reads_of(k, "A")) == ldmatrix
    else:
        assert "wgmma" in reads_of(k, "A")


def one_block_gemm(layout_of):
    """C = A @ B for 64x64x64 fp16 in one block of one warpgroup, A staged in a shared tile
    whose layout `layout_of(A_s)` gives (T.annotate_layout on this file's line below)."""

    @T.prim_func
    def g(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
          C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({A_s: layout_of(A_s)})  # the line the warning names
            T.clear(C_l)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C)

    return g


@pytest.mark.parametrize("layout_of", [
    lambda s: T.Layout(s.shape, lambda i, j: [i, j]),  # TileLang's make_swizzle_layout, unswizzled
    lambda s: T.make_row_major_layout(s),
    lambda s: T.Layout(s.shape, lambda i, j: [63 - i, j]),  # no structural layout equals it
], ids=["identity", "row_major", "rows_reversed"])
def test_a_wgmma_operand_with_a_non_canonical_layout_runs_on_mma_sync(layout_of):
    func = one_block_gemm(layout_of)
    rng = np.random.default_rng(2)
    a = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    b = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    with pytest.warns(TilePerformanceWarning) as record:
        kernel = tilecore.jit(func, out_idx=[2], target="emu:sm_90a")
        tilecore.jit(func, out_idx=[2], target="emu:sm_90a")  # again: no second warning
    (w,) = [x for x in record if "T.annotate_layout gives A_s" in str(x.message)]
    msg = str(w.message)
    assert w.filename == __file__ and "T.annotate_layout" in open(__file__).readlines()[w.lineno - 1]
    assert "mma.sync" in msg and "descriptors" in msg
    assert "T.make_swizzled_layout(A_s)" in msg and "drop the annotation" in msg
    want = tilecore.jit(func, out_idx=[2], target="interp")(a, b)
    np.testing.assert_array_equal(kernel(a, b), want)  # small integers: exact in any order
    np.testing.assert_array_equal(want, a.astype(np.float32) @ b.astype(np.float32))
    k = lowered(kernel)
    assert "mma" in reads_of(k, "A") and "wgmma" not in reads_of(k, "A") | reads_of(k, "B")
    # the CUDA source for sm_90a (rendered only: nvcc compiles sources in backends/cuda's CI)
    src = tilecore.compile(func, out_idx=[2], target="cuda:sm_90a").get_kernel_source()
    assert "mma.sync.aligned.m16n8k16" in src and "wgmma" not in src


def test_a_canonical_layout_keeps_wgmma_without_a_warning():
    import warnings

    func = one_block_gemm(lambda s: T.make_swizzled_layout(s))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TilePerformanceWarning)
        kernel = tilecore.jit(func, out_idx=[2], target="emu:sm_90a")
    assert "wgmma" in reads_of(lowered(kernel), "A")


@pytest.mark.parametrize("fn, what", [
    (lambda i, j: [i // 2, j], r"not injective: elements \(0, 0\) and \(1, 0\) both go to \[0, 0\]"),
    (lambda i, j: [i - 1, j], r"sends element \(0, 0\) to \[-1, 0\], a negative index"),
    (lambda i: [i], "could not be applied to 2 indices"),
    (lambda i, j: [i, j][2], "raised IndexError on index variables"),
    (lambda i, j: [i, j if i < 4 else 7 - j], r"branches on an index in Python .* T\.if_then_else"),
    # `==` on an expression is Python's equality (False): caught by running the map on ints
    (lambda i, j: [i, T.if_then_else(i % 2 == 0, j, 7 - j)],
     r"element \(0, 0\) \[0, 0\] on integers but \[0, 7\] on index variables.*`==`"),
    (lambda i, j: [i, (j - i) % 8], r"\[1, 7\] on integers but \[1, -1\].*T\.floormod"),
])
def test_a_map_that_cannot_be_a_layout_names_the_line(fn, what):
    with pytest.raises(TileLayoutError, match=what) as err:
        copy_through((8, 8), fn)
    assert "test_emu_index_layout.py" in str(err.value)
    assert "T.annotate_layout({S: T.Layout(S.shape, fn)})" in str(err.value)


def test_index_maps_equal_to_structural_layouts_are_those_layouts():
    from tilecore.ir.index_layout import index_layout
    from tilecore.ir.smem_layout import RowMajor

    assert index_layout((16, 32), lambda i, j: [i, j]) == RowMajor(16, 32)
    padded = index_layout((16, 32), lambda i, j: i * 40 + j)  # no padding after the last row
    assert type(padded) is IndexMapped and padded.size == 15 * 40 + 32
    assert padded.contiguous(8) and not padded.contiguous(16)
    # Swizzle<3,3,3> of a 64x64 fp16 tile: the 16-byte chunk XOR the row (mod 8)
    assert index_layout((64, 64), lambda i, j: [i, j ^ (i % 8 * 8)]) == Swizzled(64, 64, 3, 3, 3)


def test_the_cuda_source_addresses_shared_memory_through_the_map():
    # rendered only (nvcc compiles generated sources in backends/cuda's CI tests)
    src = tilecore.compile(copy_through((32, 32), lambda i, j: i * 33 + (j ^ (i % 4))),
                           target="cuda:sm_80").get_kernel_source()
    assert "float* S = reinterpret_cast<float*>(tilecore_smem + 0);  // [1055]" in src
    stores = [ln for ln in src.splitlines() if ln.strip().startswith("S[")]
    assert len(stores) == 16 and all("* 33)" in ln and "^" in ln for ln in stores), stores


def pipelined_sum(fn):
    @T.prim_func
    def f(A: T.Tensor((256, 64), "float16"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float16")
            F = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({S: T.Layout(S.shape, fn)})
            T.clear(F)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[k * 64, 0], S)
                for i, j in T.Parallel(64, 64):
                    F[i, j] += S[i, j]
            T.copy(F, B)

    return f


@pytest.mark.parametrize("fn, copy", [
    (lambda i, j: [i, j ^ (i % 8 * 8)], "TmaLoad"),  # a swizzle TMA writes (128-byte rows)
    (lambda i, j: [63 - i, j], "AsyncCopy"),  # no TMA mode writes it: cp.async stages it
])
def test_a_pipelined_copy_into_an_index_map_uses_tma_only_for_a_swizzle_it_writes(fn, copy):
    kernel = tilecore.compile(pipelined_sum(fn), target="emu:sm_90a")
    kinds = {type(n).__name__ for n in walk(lowered(kernel).body)}
    assert copy in kinds and not kinds & {"TmaLoad", "AsyncCopy"} - {copy}
    if copy == "AsyncCopy":  # the values, once (the swizzled one is 2a's on emu)
        a = np.random.default_rng(0).integers(-3, 4, (256, 64)).astype(np.float16)
        b = np.zeros((64, 64), np.float32)
        kernel(a, b)
        np.testing.assert_array_equal(b, a.astype(np.float32).reshape(4, 64, 64).sum(0))
