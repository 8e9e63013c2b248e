"""TileLang's safe-memory semantics for element accesses of global tensors (issue 14,
tilecore.passes.safe_memory): a load outside its tensor reads 0 and a store outside it is
dropped, dimension by dimension, on every target; `tl.disable_safe_memory_legalize` turns the
guards off, and the oracle then reports the access at its line."""

import warnings

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileRuntimeError, TileShapeError

pytestmark = pytest.mark.usefixtures("isolated_cache")

TARGETS = target_params("interp", "cpu", "emu:sm_80")
OFF = {"tl.disable_safe_memory_legalize": True}


def _gather():
    """`Out[i] = KV[Idx[i], d] * 2 + 1`: the top-k gather of sparse attention, whose index
    list is padded with the sentinel `S` (one past the end) and may hold -1."""
    s = T.dynamic("s")

    @T.prim_func
    def k(KV: T.Tensor((s, 4), "float32"), Idx: T.Tensor((16,), "int32"),
          Out: T.Tensor((16, 4), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i, d in T.Parallel(16, 4):
                Out[i, d] = KV[Idx[i], d] * 2.0 + 1.0
    return k


def _gather_ref(kv, idx):
    ok = (idx >= 0) & (idx < kv.shape[0])
    rows = np.where(ok[:, None], kv[np.clip(idx, 0, kv.shape[0] - 1)], 0.0)
    return (rows * 2 + 1).astype(np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_gather_outside_the_tensor_reads_zero(target):
    kv = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    idx = np.array([0, 3, 9, 10, 11, -1, -7, 2, 10, 10, 5, 1, 8, 10, 4, 6], np.int32)
    out = tilecore.jit(_gather(), out_idx=[-1], target=target)(kv, idx)
    np.testing.assert_array_equal(out, _gather_ref(kv, idx))


def _tail_store():
    """One 16-wide tile over a tensor of n < 16 elements: the stores past n are dropped."""
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(16):
                B[i] = A[i] + 1.0  # <- here
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_store_outside_the_tensor_is_dropped(target):
    a = np.arange(10, dtype=np.float32)
    # a larger array viewed through its first 10 elements: a dropped store leaves the rest alone
    backing = np.full(16, -5.0, np.float32)
    tilecore.jit(_tail_store(), target=target)(a, backing[:10])
    np.testing.assert_array_equal(backing[:10], a + 1)
    np.testing.assert_array_equal(backing[10:], -5.0)


def _row_shift():
    m = T.dynamic("m")

    @T.prim_func
    def k(A: T.Tensor((4, m), "float32"), O: T.Tensor((4, m), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i, j in T.Parallel(4, 8):
                O[i, j] = A[i, j + 1]
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_each_dimension_is_checked_on_its_own(target):
    """A[i, j + 1] at the end of a row is outside dimension 1 although its flat offset is the
    next row's first element: it reads 0, as TileLang's per-dimension predicate does."""
    a = np.arange(32, dtype=np.float32).reshape(4, 8) + 1
    out = tilecore.jit(_row_shift(), out_idx=[-1], target=target)(a)
    ref = np.zeros_like(a)
    ref[:, :7] = a[:, 1:]
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("target", TARGETS)
def test_disabled_legalization_reports_the_access(target):
    kern = tilecore.jit(_tail_store(), target=target, pass_configs=OFF)
    with pytest.raises(TileRuntimeError) as e:
        kern(np.zeros(10, np.float32), np.zeros(10, np.float32))
    assert "out-of-bounds" in str(e.value) and "B[i] = A[i] + 1.0" in str(e.value)


def test_the_key_is_honoured_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opts = tilecore.options.options_from_pass_configs(OFF)
    assert opts.disable_safe_memory


def test_only_unproven_bounds_get_a_guard():
    """Constant shapes covered by the grid need no guard; a symbolic extent does, once; a bound
    an enclosing `if` states is not repeated; the disabled pass adds none."""
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            for i in T.Parallel(16):
                C[bx * 16 + i] = A[bx * 16 + i]
                if bx * 16 + i < n:
                    B[bx * 16 + i] = A[bx * 16 + i] + 1.0

    ir = tilecore.compile(k, target="interp").get_ir("safe-memory")
    assert "T.if_then_else" not in ir  # A's loads are proven inside
    assert ir.count("< n") == 2  # C's store gets one guard; B's store only its own `if`
    off = tilecore.compile(k, target="interp", pass_configs=OFF).get_ir("simplify")
    assert off.count("< n") == 1


def test_generated_cuda_guards_the_gather():
    src = tilecore.compile(_gather(), target="cuda:sm_90").get_kernel_source()
    assert "< s)) ?" in src and ": 0.0f)" in src


def _im2col():
    @T.prim_func
    def k(A: T.Tensor((2, 8, 8, 4), "float16"), Out: T.Tensor((128, 36), "float16")):
        with T.Kernel(1, 2, threads=128) as (bx, by):
            col = T.alloc_shared((64, 36), "float16")
            T.im2col(A, col, by, 0, 3, 1, 1, 1)
            T.copy(col, Out[by * 64, 0])
    return k


def test_bounds_through_division_and_an_enclosing_select_need_no_guard():
    """T.im2col's load: indices built with `//` and `%` by constants are bounded by interval
    arithmetic, and the ones only its padding test bounds are known inside that test's
    `T.if_then_else`: no guard is added, and the values are NumPy's im2col."""
    kern = tilecore.compile(_im2col(), target="interp")
    assert kern.get_ir("safe-memory") == kern.get_ir("verify")
    a = np.random.default_rng(1).standard_normal((2, 8, 8, 4)).astype(np.float16)
    out = np.zeros((128, 36), np.float16)
    kern(a, out)
    pad = np.pad(a, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.stack([pad[:, y:y + 8, x:x + 8, :] for y in range(3) for x in range(3)], axis=3)
    np.testing.assert_array_equal(out, ref.reshape(128, 36))


def test_an_enclosing_if_narrows_a_loop_range():
    """`if i < groups:` bounds `by * groups + i` (flash decoding's per-head store): the store
    needs no guard. Outside the `if` the store provably leaves the constant-shape tensor, which
    stays a compile-time error (docs/tilelang.md)."""
    def build(guarded: bool):
        @T.prim_func
        def k(A: T.Tensor((2, 8), "float32"), Out: T.Tensor((6,), "float32")):
            with T.Kernel(2, threads=32) as by:
                for i in T.Parallel(8):
                    if guarded:
                        if i < 3:
                            Out[by * 3 + i] = A[by, i]
                    else:
                        Out[by * 3 + i] = A[by, i]
        return k

    assert "if " not in tilecore.compile(build(True), target="interp").get_ir("safe-memory").split(
        "i < 3:")[1]
    a = np.arange(16, dtype=np.float32).reshape(2, 8)
    out = np.zeros(6, np.float32)
    tilecore.jit(build(True), target="interp")(a, out)
    np.testing.assert_array_equal(out, np.concatenate([a[0, :3], a[1, :3]]))
    with pytest.raises(TileShapeError, match="reaches 10"):
        tilecore.compile(build(False), target="interp")
