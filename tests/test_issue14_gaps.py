"""Issue 14 coverage gaps (docs/issue14-coverage.md): targets that a construct's own tests skip.

Each test reuses another file's kernel and reference, on the targets the audit found untested:
integer `T.atomic_max`/`atomic_min` on cpu, the build-time-Python kernel (`T.truncdiv`,
`T.truncmod`, `T.clamp`, `getattr(T, "reduce_" + op)`, `is not`, a helper function) on cpu and
the emulator, and `T.Cast` (TVM's argument order), which no test ran.
"""

from __future__ import annotations

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)
from test_atomic_extrema import _check as _check_atomic_extrema
from test_tilelang_compat import _ops_kernel

import tilecore
import tilecore.language as T


@pytest.mark.parametrize("dtype", ["int32", "float32"])
@pytest.mark.parametrize("target", target_params("cpu"))
def test_atomic_max_min_match_numpy_on_cpu(target, dtype):
    _check_atomic_extrema(target, dtype)


@pytest.mark.parametrize("target", target_params("cpu", "emu:sm_80"))
def test_build_time_python_kernel_on_cpu_and_emu(target):
    k = tilecore.compile(_ops_kernel("max", 2), out_idx=[1, 2], target=target)
    a = np.arange(-64, 64, dtype=np.int32).reshape(8, 16)
    out, q = k(a)
    np.testing.assert_array_equal(out, a.max(axis=1) * 2)
    tq = np.trunc(a / 3).astype(np.int32)  # truncating division, not floor: -7 // 3 is -2 here
    np.testing.assert_array_equal(q, np.clip(tq + (a - tq * 3) * 100, -152, 150))


def _cast_kernel():
    @T.prim_func
    def f(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "int32")):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(4, 8):
                B[i, j] = T.Cast("int32", A[i, j] * 3.0)
    return f


@pytest.mark.parametrize("target", target_params("interp", "cpu", "emu:sm_80"))
def test_cast_in_tvm_argument_order(target):
    k = tilecore.compile(_cast_kernel(), out_idx=[1], target=target)
    a = np.linspace(-5.3, 5.3, 32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(k(a), (a * np.float32(3.0)).astype(np.int32))


def test_register_hints_and_gemm_k_pack_warn_once_and_set_max_nreg_checks_its_arguments():
    """Item 8's hints that no other test names: each is accepted with one warning naming it."""
    from tilecore.errors import TileConfigWarning, TileShapeError

    with pytest.warns(TileConfigWarning) as rec:
        @T.prim_func
        def f(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
              C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                T.no_set_max_nreg()
                T.annotate_producer_reg_dealloc(24)
                T.annotate_consumer_reg_alloc(240)
                As = T.alloc_shared((64, 64), "float16")
                Bs = T.alloc_shared((64, 64), "float16")
                acc = T.alloc_fragment((64, 64), "float32")
                T.copy(A, As)
                T.copy(B, Bs)
                T.clear(acc)
                T.gemm(As, Bs, acc, k_pack=2)
                T.copy(acc, C)

        # the register hints warn at compile time, where the target is known: interp has no
        # setmaxnreg (on sm_90a they set it: backends/emu/tests/test_register_hints.py)
        tilecore.compile(f, target="interp")

    text = [str(r.message) for r in rec]
    for what in ("T.no_set_max_nreg() has nothing to turn off on interp",
                 "T.annotate_producer_reg_dealloc(24) is accepted but not applied on interp",
                 "T.annotate_consumer_reg_alloc(240) is accepted but not applied on interp", "k_pack"):
        assert sum(what in t for t in text) == 1, (what, text)
    with pytest.warns(TileConfigWarning, match="wg_wait"):
        @T.prim_func
        def w(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
              C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                As = T.alloc_shared((64, 64), "float16")
                Bs = T.alloc_shared((64, 64), "float16")
                acc = T.alloc_fragment((64, 64), "float32")
                T.copy(A, As)
                T.copy(B, Bs)
                T.clear(acc)
                T.gemm(As, Bs, acc, wg_wait=1)
                T.copy(acc, C)
    @T.prim_func
    def g(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            T.set_max_nreg(240, 1)
            A[tx] = 1.0

    # honoured on thread-lowered sm_90a (backends/emu/tests/test_thread_reg_budget.py); a
    # compile for a target without setmaxnreg warns once
    told = r"set_max_nreg\(240, 1\) is accepted but not applied on interp"
    with pytest.warns(TileConfigWarning, match=told):
        tilecore.compile(g, target="interp")
    with pytest.raises(TileShapeError, match="multiple of 8"):
        @T.prim_func
        def h(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                tx = T.get_thread_binding()
                T.set_max_nreg(100, 1)
                A[tx] = 1.0


def test_set_random_seed_and_set_log_level(monkeypatch):
    """Item 11's host helpers that no other test calls. torch's seeding is left out: importing
    torch here would cost more than a second of CI."""
    import logging

    import tilecore.testing

    real_find_spec = tilecore.testing.importlib.util.find_spec
    monkeypatch.setattr(tilecore.testing.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real_find_spec(name, *a))
    tilecore.testing.set_random_seed(7)
    first = np.random.rand(3)
    tilecore.testing.set_random_seed(7)
    np.testing.assert_array_equal(np.random.rand(3), first)
    log = logging.getLogger("tilecore")
    before = log.level
    try:
        tilecore.set_log_level("debug")
        assert log.level == logging.DEBUG
        tilecore.set_log_level(logging.ERROR)
        assert log.level == logging.ERROR
    finally:
        log.setLevel(before)


@pytest.mark.parametrize("target", target_params("cpu", "emu:sm_80"))
def test_scalar_parameters_on_cpu_and_emu_through_jit(target):
    """Item 4 on cpu and the emulator (rows 4b, 4a): the kernel and checks of
    tests/test_scalar_params.py; the scalars size the grid and reach the body as Python ints
    (`shift` an int16, negative too, or a NumPy int16)."""
    from test_scalar_params import _masked_scale

    kernel = tilecore.jit(_masked_scale(), out_idx=[-1], target=target)
    a = np.arange(256, dtype=np.int32)
    for limit, shift in [(256, 3), (100, -7), (1, np.int16(-32768))]:
        want = np.zeros(256, np.int32)
        want[:limit] = a[:limit] + shift
        np.testing.assert_array_equal(kernel(a, limit, shift), want)


@pytest.mark.parametrize("target", target_params("cpu", "emu:sm_80"))
def test_nan_propagate_reduce_on_cpu_and_emu(target):
    """Item 10's `nan_propagate=True`, run only on interp in tests/test_reduce_bits.py."""
    from test_reduce_bits import _one

    a = np.arange(128, dtype=np.float32).reshape(4, 32)
    a[2, 5] = np.nan
    out = np.zeros(4, np.float32)
    prog = _one(lambda x, y: T.reduce(x, y, "max", 1, True, nan_propagate=True))
    tilecore.compile(prog, target=target)(a, out)
    np.testing.assert_array_equal(out, [31, 63, np.nan, 127])


def _scratch_in_one_kernel():
    @T.prim_func
    def f(A: T.Tensor((16,), "float32"), Out: T.Tensor((16,), "float32")):
        scratch = T.alloc_global((16,), "float32")  # a hidden, zeroed parameter
        with T.Kernel(1, threads=32):
            for i in T.Parallel(16):
                scratch[i] = A[i] * 2 + scratch[i]
            T.sync_threads()
            for i in T.Parallel(16):
                Out[i] = scratch[15 - i]

    return f


@pytest.mark.parametrize("target", target_params("interp", "cpu", "emu:sm_80"))
def test_alloc_global_scratch_in_one_kernel(target):
    """Item 5's T.alloc_global on every target (the two-kernel form runs on interp only)."""
    k = tilecore.compile(_scratch_in_one_kernel(), out_idx=[-1], target=target)
    assert [p.name for p in k.inputs] == ["A"]
    a = np.arange(16, dtype=np.float32)
    for _ in range(2):  # zeroed on each call
        np.testing.assert_array_equal(k(a), (a * 2)[::-1])


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
@pytest.mark.parametrize("target", target_params("emu:sm_80"))
def test_named_bit_operations_on_emu(target, dtype):
    """Item 7's `T.shift_left` / `T.bitwise_*` / `T.floordiv` spellings (tests/test_int_ops.py's
    kernel), run on interp and toy there, on the emulator here."""
    from test_int_ops import _bits_inputs, _bits_kernel, _bits_reference

    a, b, s = _bits_inputs(dtype)
    out = tilecore.jit(_bits_kernel(dtype), out_idx=[-1], target=target)(a, b, s)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, _bits_reference(a, b, s))


def _slice_at_loop_dependent_offset():
    @T.prim_func
    def f(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 16), "float32")):
        with T.Kernel(4, threads=32) as bx:
            S = T.alloc_shared((16,), "float32")
            lo = (bx % 2) * 32 + 8
            hi = lo + 16
            T.copy(A[bx, lo:hi], S)
            T.copy(S, B[bx, :])

    return f


@pytest.mark.parametrize("target", target_params("cpu", "emu:sm_80"))
def test_copy_of_a_slice_with_symbolic_bounds_on_cpu_and_emu(target):
    """Item 6's `T.copy(A[b, lo:hi], S)`: the kernel of tests/test_tilelang_compat.py's
    test_slice_extents_are_proved_through_let_names (interp), on the compiled targets."""
    a = np.arange(256, dtype=np.float32).reshape(4, 64)
    b = np.zeros((4, 16), np.float32)
    tilecore.compile(_slice_at_loop_dependent_offset(), target=target)(a, b)
    for r in range(4):
        lo = (r % 2) * 32 + 8
        np.testing.assert_array_equal(b[r], a[r, lo:lo + 16])


def _fragment_annotated_copy():
    @T.prim_func
    def f(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32):
            F = T.alloc_fragment((16, 16), "float32")
            T.annotate_layout({F: T.Fragment(F.shape,
                                             forward_thread_fn=lambda i, j: (i * 16 + j) % 32,
                                             forward_index_fn=lambda i, j: (i * 16 + j) // 32)})
            T.copy(A, F)
            T.copy(F, B)

    return f


def test_an_explicit_fragment_layout_is_honoured_without_a_warning():
    """Item 2's `T.Fragment` on a fragment (row 2d): honoured, so no warning; the addresses are
    checked in backends/emu/tests/test_emu_fragment_layout.py."""
    import warnings

    from tilecore.errors import TileConfigWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", TileConfigWarning)
        prog = _fragment_annotated_copy()
    frag = T.Fragment((4, 8), forward_fn=lambda i, j: (j, i))
    assert (frag.thread(1, 2), frag.index(1, 2)) == (2, 1)
    a = np.arange(256, dtype=np.float32).reshape(16, 16)
    for target in ("interp", "emu:sm_80"):
        b = np.zeros_like(a)
        tilecore.compile(prog, target=target)(a, b)
        np.testing.assert_array_equal(b, a, err_msg=target)


def _reverse_in_shared(threads: int = 64):
    @T.prim_func
    def k(A: T.Tensor((threads,), "float32"), B: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads):
            tx = T.thread_binding(0, threads, thread="threadIdx.x")
            S = T.alloc_shared((threads,), "float32")
            S[tx] = A[tx]
            T.sync_threads()
            B[tx] = S[threads - 1 - tx]

    return k


@pytest.mark.parametrize("target", target_params("cuda:sm_90a"))
def test_thread_binding_renders_as_threadidx_in_cuda_source(target):
    """Item 9's `T.thread_binding` in CUDA source (emu runs it in backends/emu/tests/
    test_thread_level.py; no nvcc or GPU here)."""
    import re

    src = tilecore.compile(_reverse_in_shared(), target=target).get_kernel_source()
    assert "__launch_bounds__(64)" in src and "__syncthreads()" in src
    # the bound index is threadIdx.x (possibly through a copy) and indexes the reversed read
    assert "const int tx = threadIdx.x;" in src
    assert re.search(r"B\[(\w+)\] = S\[[^\]]*63[^\]]*\b\1\b", src), src


def _transposed_layout(buf):
    """A plain Python helper returning a layout, TileLang's style (row 2e)."""
    return T.Layout(buf.shape, lambda i, j: [j, i ^ (j % 4)])


def _shared_layouts_kernel():
    @T.prim_func
    def f(A: T.Tensor((16, 32), "float16"), B: T.Tensor((16, 32), "float16")):
        with T.Kernel(1, threads=64):
            S1 = T.alloc_shared((16, 32), "float16")
            S2 = T.alloc_shared((16, 32), "float16")
            S3 = T.alloc_shared((16, 32), "float16")
            S4 = T.alloc_shared((16, 32), "float16")
            T.annotate_layout({S1: T.make_swizzled_layout(S1), S2: _transposed_layout(S2),
                               S3: T.make_padded_layout(S3), S4: T.make_row_major_layout(S4)})
            F = T.alloc_fragment((16, 32), "float16")
            T.annotate_layout({F: T.Fragment(F.shape, forward_thread_fn=lambda i, j: j % 8 * 8 + i % 8,
                                             forward_index_fn=lambda i, j: i // 8 * 4 + j // 8)})
            T.copy(A, S1)
            for i, j in T.Parallel(16, 32):
                S2[i, j] = S1[i, j] * 2
            for i, j in T.Parallel(16, 32):
                S3[i, j] = S2[i, j] + 1
            T.copy(S3, S4)
            T.copy(S4, F)
            T.copy(F, B)

    return f


@pytest.mark.parametrize("target", target_params("interp", "cpu", "emu:sm_80"))
def test_annotated_layouts_keep_values_on_every_target(target):
    """Rows 2b-2e: `make_swizzled_layout`, `make_padded_layout`, `make_row_major_layout` and a
    helper's `T.Layout` on shared buffers, a `T.Fragment` on a fragment. cpu has no shared-memory
    or register layout: it accepts them and computes the same result; on emu they are the
    buffers' layouts (backends/emu/tests/test_emu_index_layout.py and
    test_emu_fragment_layout.py check the addresses)."""
    prog = _shared_layouts_kernel()
    assert "# layout of F: T.Fragment((16, 32)" in prog.script()
    k = tilecore.compile(prog, out_idx=[1], target=target)
    a = np.arange(512, dtype=np.float16).reshape(16, 32) / 8
    np.testing.assert_array_equal(k(a), a * 2 + 1)
    if target.startswith("emu"):
        ir = k.get_ir("final")
        for lay in ("swizzled 16x32", "index_map 16x32 -> 32x16", "padded 16x32 +8", "row_major 16x32"):
            assert lay in ir, lay
