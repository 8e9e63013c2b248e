"""Regression tests of issue 16's sub-cases that had none before the item-by-item audit
(docs/issue16-coverage.md): a loop reusing an index name (item 6, decided legal: TileLang's
scoping), the uninitialized-read report naming the buffer (item 4), jit factories keyed on
what same-module helpers read and on closure cells (item 7), and T.ceildiv's signs on the
backends themselves, not only the toy (item 8)."""

import json

import jit_key_helpers
import numpy as np
import pytest
from jit_key_helpers import times_factor
from optional_backends import needs_interp, target_params

import tilecore
import tilecore.language as T
from tilecore import compiler
from tilecore.errors import TileRuntimeError

THIS = __file__


# ----------------------------------------------------------------------------- item 4
def _uncleared():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((16, 16), "float16")
            acc = T.alloc_fragment((16, 16), "float32")
            T.copy(A, a)
            T.gemm(a, a, acc)  # <- acc never cleared
            T.copy(acc, C)

    return k, (np.ones((16, 16), np.float16),), "acc", "acc never cleared"


def _half_written():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            sbuf = T.alloc_shared((16,), "float32")
            for i in T.Parallel(8):
                sbuf[i] = A[i]
            for i in T.Parallel(16):
                B[i] = sbuf[i]  # <- reads sbuf[8:]

    return k, (np.zeros(16, np.float32),), "sbuf", "reads sbuf[8:]"


@pytest.mark.filterwarnings("ignore::tilecore.errors.TilePerformanceWarning")
@pytest.mark.parametrize("make", [_uncleared, _half_written], ids=["accumulator", "shared"])
@pytest.mark.parametrize("target", target_params("interp", "emu:sm_80"))
def test_an_uninitialized_read_names_the_buffer_and_the_line(target, make, monkeypatch):
    """On by default in the test suites (conftest) and conformance; here set explicitly so the
    test says what it needs."""
    monkeypatch.setenv("TILECORE_CHECK_UNINIT", "1")
    func, args, name, marker = make()
    with pytest.raises(TileRuntimeError, match="uninitialized") as e:
        tilecore.jit(func, out_idx=[-1], target=target)(*args)
    assert e.value.loc is not None and e.value.loc.file == THIS, str(e.value)
    assert marker in (e.value.loc.source_line() or ""), str(e.value)
    assert f"buffer {name}" in str(e.value), str(e.value)


# ----------------------------------------------------------------------------- item 6
@needs_interp
def test_a_loop_reusing_an_index_name_shadows_it_only_inside():
    """TileLang (TVMScript) scoping, not Python's: inside the inner loop `i` is the inner index;
    after it, `i` is the outer index again (Python would leave the inner loop's last value)."""
    @T.prim_func
    def k(A: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(2):
                for i in T.serial(4):
                    A[4 + i] = i
                A[i] = 10 + i

    a = np.zeros(8, np.int32)
    tilecore.jit(k, target="interp")(a)
    np.testing.assert_array_equal(a, [10, 11, 0, 0, 0, 1, 2, 3])


# ----------------------------------------------------------------------------- item 7
FACTOR = 2.0


def _times_factor(x):
    return x * FACTOR  # a global the factory's body never names itself


@T.macro
def _store_times_factor(B, A, i):
    B[i] = A[i] * FACTOR


@tilecore.jit(out_idx=[-1], target="toy:w4")
def _through_function(m):
    @T.prim_func
    def k(A: T.Tensor((m,), "float32"), B: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(m):
                B[i] = _times_factor(A[i])

    return k


@tilecore.jit(out_idx=[-1], target="toy:w4")
def _through_macro(m):
    @T.prim_func
    def k(A: T.Tensor((m,), "float32"), B: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(m):
                _store_times_factor(B, A, i)

    return k


@pytest.mark.parametrize("factory", [_through_function, _through_macro], ids=["function", "macro"])
def test_jit_factory_rebuilds_when_a_global_read_by_a_helper_changes(factory):
    global FACTOR
    x = np.ones(8, np.float32)
    try:
        first = factory(8)
        assert factory(8) is first  # nothing changed: the cached kernel
        np.testing.assert_array_equal(first(x), 2 * x)
        FACTOR = 5.0
        np.testing.assert_array_equal(factory(8)(x), 5 * x)
    finally:
        FACTOR = 2.0


@tilecore.jit(out_idx=[-1], target="toy:w4")
def _through_an_imported_function(m):
    @T.prim_func
    def k(A: T.Tensor((m,), "float32"), B: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(m):
                B[i] = times_factor(A[i])  # `from jit_key_helpers import times_factor`

    return k


@tilecore.jit(out_idx=[-1], target="toy:w4")
def _through_a_module_attribute(m):
    @T.prim_func
    def k(A: T.Tensor((m,), "float32"), B: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(m):
                jit_key_helpers.store_plus_offset(B, A, i)  # a T.macro of another module

    return k


def test_jit_factory_rebuilds_when_a_global_of_another_module_read_by_its_helper_changes():
    """7c: helpers of another user module are followed too, imported by name or used through
    the module (a macro there), two hops deep inside that module."""
    x = np.ones(8, np.float32)
    first = _through_an_imported_function(8)
    assert _through_an_imported_function(8) is first
    np.testing.assert_array_equal(first(x), 2 * x)
    macro_first = _through_a_module_attribute(8)
    np.testing.assert_array_equal(macro_first(x), x)
    try:
        jit_key_helpers.FACTOR = 5.0
        jit_key_helpers.OFFSET = 3.0
        np.testing.assert_array_equal(_through_an_imported_function(8)(x), 5 * x)
        np.testing.assert_array_equal(_through_a_module_attribute(8)(x), x + 3)
    finally:
        jit_key_helpers.FACTOR = 2.0
        jit_key_helpers.OFFSET = 0.0
    assert _through_an_imported_function(8) is first  # back to the first key: the cached kernel


def test_the_factory_key_walk_ends_on_cycles_and_skips_library_code():
    """The walk follows user modules through an import cycle once per function, and does not
    descend into tilecore, the standard library or installed packages (NumPy)."""
    def factory():
        return jit_key_helpers.ping(np.int64(2)), json.dumps, T.ceildiv

    names = compiler._names_read(factory)
    assert ("jit_key_cycle", "LIMIT") in names and ("jit_key_helpers", "ping") in names
    assert {m for m, _ in names} == {__name__, "jit_key_helpers", "jit_key_cycle"}, names


def test_jit_factory_rebuilds_when_a_closure_cell_it_reads_changes():
    scale = 2.0

    @tilecore.jit(out_idx=[-1], target="toy:w4")
    def scaled(m):
        @T.prim_func
        def k(A: T.Tensor((m,), "float32"), B: T.Tensor((m,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(m):
                    B[i] = A[i] * scale

        return k

    x = np.ones(8, np.float32)
    np.testing.assert_array_equal(scaled(8)(x), 2 * x)
    scale = 3.0
    np.testing.assert_array_equal(scaled(8)(x), 3 * x)


# ----------------------------------------------------------------------------- item 8
_PAIRS = [(a, b) for a in (-7, -6, -1, 0, 1, 6, 7) for b in (-3, -2, -1, 1, 2, 3)][:32]


@pytest.mark.parametrize("target", target_params("interp", "emu:sm_80", "cpu"))
def test_ceildiv_of_kernel_values_is_exact_for_every_sign_on(target):
    """The backends' own integer division (C's truncation on cpu and emu) under T.ceildiv's one
    definition: every sign pair of dividend and divisor, as Python's -(-a // b)."""
    @T.prim_func
    def k(A: T.Tensor((2, 32), "int32"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                B[i] = T.ceildiv(A[0, i], A[1, i])

    a = np.array(_PAIRS + [(1, 1)] * (32 - len(_PAIRS)), np.int32).T.copy()
    got = np.asarray(tilecore.jit(k, out_idx=[-1], target=target)(a))
    want = [-(-x // y) for x, y in a.T]
    np.testing.assert_array_equal(got, want)
    assert [T.ceildiv(int(x), int(y)) for x, y in a.T] == want  # Python ints: the same definition
