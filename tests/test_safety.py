"""Regression tests of issue 16's items that are not a single malformed kernel (those are in the
generated suite of tests/test_errors.py): 64-bit offsets, the emulator's write-write race
report, stale jit factories, T.ceildiv's signs, the oracle's integer full reductions, inputs
never written back, the CPU-only opt-out of the portable limits, and a fix on every error."""

import ast
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from optional_backends import needs_interp, target_params

import tilecore
import tilecore.language as T
from tilecore import dtypes as dt
from tilecore.emulator.race import SharedTracker, SyncClock
from tilecore.errors import TileRuntimeError
from tilecore.ir.buffer import Buffer
from tilecore.ir.expr import Var
from tilecore.lower.indexing import evaluate
from tilecore.lower.wide_offsets import needs_wide_offsets, widen

ROOT = pathlib.Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- item 2
def test_buffers_that_can_reach_2_31_elements_get_64_bit_offsets():
    n = T.dynamic("n")
    assert needs_wide_offsets(Buffer("A", (n, 64), dt.float32, "global"))  # symbolic: assumed large
    assert needs_wide_offsets(Buffer("B", (1 << 16, 1 << 15), dt.int8, "global"))  # exactly 2^31
    assert not needs_wide_offsets(Buffer("C", (1 << 16, (1 << 15) - 1), dt.int8, "global"))
    assert not needs_wide_offsets(Buffer("S", (64, 64), dt.float32, "shared"))


def test_widened_offsets_do_not_wrap_where_int32_does():
    bx, tx = Var("bx"), Var("tx")
    off = bx * 4096 + (tx // 16) * 64 + tx % 16
    env = {id(bx): 1 << 20, id(tx): 37}
    exact = (1 << 20) * 4096 + (37 // 16) * 64 + 37 % 16
    assert evaluate(off, env) != exact  # 32-bit arithmetic wraps (what the emulator computes)
    wide = widen(off, frozenset({id(tx)}))
    assert wide.dtype == dt.int64 and evaluate(wide, env) == exact
    assert "(tx // 16)" in str(wide) or "tx" in repr(wide)  # tile-sized parts stay in int32


# 2^31 + 2^15 int8 elements: the last row starts at flat offset 2^31. np.zeros maps the 2 GiB
# lazily (calloc); the kernels touch only the two last rows' ends, so the test stays at ~45 MB.
_ROWS, _COLS = (1 << 16) + 1, 1 << 15


@T.prim_func
def _ends_of_the_last_rows(A: T.Tensor((_ROWS, _COLS), "int8")):
    with T.Kernel(2, threads=32) as bx:
        for j in T.Parallel(32):
            A[_ROWS - 2 + bx, _COLS - 32 + j] = A[_ROWS - 2 + bx, _COLS - 32 + j] + 1  # WRAP


@T.prim_func
def _end_of_the_last_row(A: T.Tensor((_ROWS, _COLS), "int8")):
    with T.Kernel(1, threads=32) as bx:
        for j in T.Parallel(32):
            A[_ROWS - 1, _COLS - 32 + j] = 7  # constant row and stride: folded at compile time


@pytest.mark.parametrize("target", target_params("emu:sm_80"))
def test_the_emulator_runs_offsets_past_2_31_and_catches_them_wrapping_at_32_bits(target):
    """2e end to end: the emulator runs the lowered program on a tensor of more than 2^31
    elements. With the per-buffer decision its offsets are int64 and the writes land; with the
    offsets forced to int32 (`tl.config_index_bitwidth: 32`) block 1's `(bx + 65535) * 32768`
    wraps in the emulator's own int32 arithmetic, and it reports the negative offset as an
    out-of-bounds access at the kernel's line. A constant offset past 2^31 (constant row times
    constant stride, folded by the lowering) must not wrap either."""
    a = np.zeros((_ROWS, _COLS), np.int8)
    tilecore.jit(_ends_of_the_last_rows, target=target)(a)
    tilecore.jit(_end_of_the_last_row, target=target)(a)
    np.testing.assert_array_equal(a[-2, -33:], [0] + [1] * 32)
    np.testing.assert_array_equal(a[-1, -33:], [0] + [7] * 32)
    assert not a[0, :64].any() and not a[-3, -64:].any()  # nothing landed at a wrapped offset
    narrow = tilecore.jit(_ends_of_the_last_rows, target=target,
                          pass_configs={"tl.config_index_bitwidth": 32})
    with pytest.raises(TileRuntimeError, match=r"global buffer A.* flat element -2147450912,") as e:
        narrow(a)
    assert e.value.loc.line == _line_of("# WRAP")


def _line_of(marker: str) -> int:
    return next(i for i, line in enumerate(pathlib.Path(__file__).read_text().splitlines(), 1)
                if line.rstrip().endswith(marker))


def test_the_lowered_ir_and_generated_code_use_64_bit_offsets_for_symbolic_tensors():
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n, 8), "float32"), C: T.Tensor((16, 8), "float32")):
        with T.Kernel(T.ceildiv(n, 16), threads=32) as bx:
            for i, j in T.Parallel(16, 8):
                if bx * 16 + i < n:
                    A[bx * 16 + i, j] = A[bx * 16 + i, j] + C[i, j]

    kern = tilecore.jit(k, target="toy:w4")
    ir = kern.get_ir("wide-offsets")
    assert "int64" in ir  # A's offsets are widened, C's (16 x 8) are not
    a, c = np.ones((20, 8), np.float32), np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    kern(a, c)
    np.testing.assert_array_equal(a, 1 + np.concatenate([c, c[:4]]))


# ----------------------------------------------------------------------------- item 4
def test_shared_tracker_reports_write_write_races_and_accepts_ordered_writes():
    clock = SyncClock(4)
    tr = SharedTracker("s", 8, clock)
    tid = np.array([0, 1])
    tr.write(np.array([0, 1]), tid, 0, [None])
    clock.barrier()
    tr.write(np.array([1, 0]), tid, 0, [None])  # ordered by the barrier: fine
    with pytest.raises(TileRuntimeError, match="overwrites element"):
        tr.write(np.array([0]), np.array([0]), 0, [None])  # thread 0 over thread 1's write
    with pytest.raises(TileRuntimeError, match="both write element 5"):
        tr.write(np.array([5, 5]), np.array([2, 3]), 0, [None])


# ----------------------------------------------------------------------------- item 7
SCALE = 2.0


def test_jit_factory_rebuilds_when_a_global_it_reads_changes():
    global SCALE

    @tilecore.jit(out_idx=[-1], target="toy:w4")
    def scaled(m):
        @T.prim_func
        def k(A: T.Tensor((m,), "float32"), B: T.Tensor((m,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(m):
                    B[i] = A[i] * SCALE

        return k

    x = np.ones(8, np.float32)
    try:
        first = scaled(8)
        assert scaled(8) is first  # unchanged globals: the cached kernel
        np.testing.assert_array_equal(first(x), 2 * x)
        SCALE = 3.0
        np.testing.assert_array_equal(scaled(8)(x), 3 * x)
    finally:
        SCALE = 2.0


# ----------------------------------------------------------------------------- item 8
def _ceildiv_kernel():
    @T.prim_func
    def k(A: T.Tensor((2,), "int32"), B: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            B[0] = T.ceildiv(A[0], A[1])
            B[1] = T.ceildiv(T.int32(7), T.int32(-3))

    return tilecore.jit(k, out_idx=[-1], target="toy:w4")


@settings(max_examples=20)
@given(st.integers(-50, 50), st.integers(-9, 9).filter(lambda b: b != 0))
def test_ceildiv_is_correct_for_every_sign(a, b):
    got = _KERNEL(np.array([a, b], np.int32))
    assert got[0] == -(-a // b) == T.ceildiv(a, b)
    assert got[1] == -2


_KERNEL = _ceildiv_kernel()


# ----------------------------------------------------------------------------- item 9
@needs_interp
@pytest.mark.parametrize("kind", ["max", "absmax", "abssum", "sum", "min"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8"])
def test_oracle_full_reduction_of_an_integer_1d_fragment(kind, dtype):
    reduce = getattr(T, f"reduce_{kind}")

    @T.prim_func
    def k(A: T.Tensor((16,), dtype), B: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((16,), dtype)
            o = T.alloc_fragment((1,), dtype)
            T.copy(A, f)
            reduce(f, o, dim=0)
            T.copy(o, B)

    a = (np.arange(16) - (0 if dtype == "uint8" else 8)).astype(dtype)
    ref = {"max": a.max(), "min": a.min(), "sum": a.astype(np.int64).sum(),
           "absmax": np.abs(a.astype(np.int64)).max(), "abssum": np.abs(a.astype(np.int64)).sum()}[kind]
    got = tilecore.jit(k, out_idx=[-1], target="interp")(a)
    assert int(got[0]) == int(np.asarray(ref).astype(dtype))


# ----------------------------------------------------------------------------- item 11
def test_inputs_are_never_written_back_and_autograd_tensors_are_read():
    torch = pytest.importorskip("torch")

    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(16):
                B[i] = A[i] * 2.0

    kern = tilecore.jit(k, out_idx=[-1], target="toy:w4")
    view = torch.ones(1).expand(16)  # broadcast, read only: fine (no copy back into it)
    np.testing.assert_array_equal(kern(view).numpy(), 2 * np.ones(16, np.float32))
    x = torch.arange(16, dtype=torch.float32, requires_grad=True)
    np.testing.assert_array_equal(kern(x).numpy(), 2 * np.arange(16, dtype=np.float32))
    ro = np.arange(16, dtype=np.float32)
    ro.setflags(write=False)
    np.testing.assert_array_equal(kern(A=ro), 2 * ro)  # keyword call, read-only input


# ----------------------------------------------------------------------------- item 14
@pytest.mark.parametrize("target", target_params("interp", "cpu"))
def test_cpu_only_kernels_opt_out_of_the_portable_limits(target):
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=2048, is_cpu=True) as bx:
            A[0] = 1.0

    a = np.zeros(16, np.float32)
    tilecore.jit(k, target=target)(a)
    assert a[0] == 1.0


# ----------------------------------------------------------------------------- item 13
_ERRORS = {"TileError", "TileSyntaxError", "TileNameError", "TileTypeError", "TileShapeError",
           "TileBindingError", "TileCallError", "TileTargetError", "TileRuntimeError"}
#: Raise sites not yet given a fix, by file: this list may only shrink (it is empty).
_NOT_YET: dict[str, int] = {}


def _sites_without_hint() -> dict[str, int]:
    roots = [ROOT / "tilecore", ROOT / "conformance" / "tilecore_conformance",
             *sorted((ROOT / "backends").glob("*/tilecore_*"))]
    out: dict[str, int] = {}
    for root in roots:
        for f in sorted(root.rglob("*.py")):
            for n in ast.walk(ast.parse(f.read_text())):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _ERRORS:
                    if not any(k.arg == "hint" for k in n.keywords) and len(n.args) < 3:
                        key = f.relative_to(ROOT).as_posix()
                        out[key] = out.get(key, 0) + 1
    return out


def test_every_tile_error_raise_site_carries_a_fix():
    missing = _sites_without_hint()
    grown = {f: c for f, c in missing.items() if c > _NOT_YET.get(f, 0)}
    assert not grown, f"TileErrors raised without hint= (say how to fix it): {grown}"


# ----------------------------------------------------------------------------- item 11 (device)
def _cuda_installed_not_runnable() -> bool:
    info = tilecore.plugins.target_infos().get("cuda")
    return info is not None and not info.runnable()[0]


@pytest.mark.skipif(not _cuda_installed_not_runnable(), reason="needs the cuda backend on a machine "
                    "without a GPU (on a GPU the kernel simply runs)")
def test_a_device_kernel_without_its_device_says_not_runnable_here():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            A[0] = 1.0

    kern = tilecore.jit(k, target="cuda")
    assert "A[0]" in kern.get_kernel_source() or "__global__" in kern.get_kernel_source()
    with pytest.raises(tilecore.errors.TileTargetError, match="not runnable here") as e:
        kern(np.zeros(16, np.float32))
    assert e.value.hint and e.value.loc.file == __file__


def test_ceildiv_of_a_tensor_size_keeps_the_plain_form_backends_bound_ranges_with():
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), s: T.int32):
        with T.Kernel(T.ceildiv(n, 64), T.ceildiv(s, 64), threads=32) as (bx, by):
            A[0] = 1.0

    kern = tilecore.jit(k, target="toy:w4")
    grid = kern.stages[-1][1].func.body
    from tilecore.ir.printer import print_node
    from tilecore.ir.thread import find_kernel

    g0, g1 = (print_node(g) for g in find_kernel(grid).grid[:2])
    assert g0.replace(" ", "") == "(n+63)//64", g0  # a size is >= 0: the plain form is exact
    assert "%" in g1  # a scalar may be negative: the exact form stays
