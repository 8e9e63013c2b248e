"""User mistakes raise TileError subclasses that name this file and the offending line."""

import inspect

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import (
    TileBindingError,
    TileCallError,
    TileError,
    TileNameError,
    TileRuntimeError,
    TileShapeError,
    TileSyntaxError,
    TileTargetError,
    TileTypeError,
)

THIS = __file__


def marked_line(fn, marker="# <- here"):
    """The file line number of the line in `fn` carrying `marker`."""
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if marker in line:
            return start + i
    raise AssertionError("marker missing")


def check(excinfo, fn, cls):
    err = excinfo.value
    assert isinstance(err, cls), type(err)
    assert err.loc is not None, str(err)
    assert err.loc.file == THIS
    assert err.loc.line == marked_line(fn), str(err)
    text = str(err)
    assert f"test_errors.py:{marked_line(fn)}" in text


def test_copy_extent_mismatch():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((32, 32), "float32")
                f = T.alloc_fragment((16, 32), "float32")
                T.copy(A[0, 0], s)
                T.copy(s, f)  # <- here
        return k

    with pytest.raises(TileShapeError) as e:
        build()
    check(e, build, TileShapeError)
    assert "extents do not match" in str(e.value)


def test_gemm_k_mismatch():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_shared((64, 32), "float16")
                b = T.alloc_shared((16, 64), "float16")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm(a, b, c)  # <- here
        return k

    with pytest.raises(TileShapeError) as e:
        build()
    check(e, build, TileShapeError)
    assert "K mismatch" in str(e.value)


def test_gemm_dtype_mismatch():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_shared((64, 32), "float16")
                b = T.alloc_shared((32, 64), "bfloat16")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm(a, b, c)  # <- here
        return k

    with pytest.raises(TileTypeError) as e:
        build()
    check(e, build, TileTypeError)


def test_gemm_accumulator_dtype():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "int8")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_shared((64, 32), "int8")
                b = T.alloc_shared((32, 64), "int8")
                c = T.alloc_fragment((64, 64), "float16")
                T.gemm(a, b, c)  # <- here
        return k

    with pytest.raises(TileTypeError) as e:
        build()
    check(e, build, TileTypeError)


def test_non_constant_tile_shape():
    n = T.dynamic("n")

    def build():
        @T.prim_func
        def k(A: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((n,), "float32")  # <- here
        return k

    with pytest.raises(TileShapeError) as e:
        build()
    check(e, build, TileShapeError)
    assert "compile-time constant" in str(e.value)


def test_unknown_dtype():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((64,), "float17")  # <- here
        return k

    with pytest.raises(TileNameError) as e:
        build()
    check(e, build, TileNameError)
    assert "float16" in str(e.value)  # the hint lists valid names


def test_unknown_T_name():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shraed((64,), "float32")  # <- here
        return k

    with pytest.raises(TileNameError) as e:
        build()
    check(e, build, TileNameError)
    assert "alloc_shared" in str(e.value)


def test_kernel_binding_count():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(2, 2, threads=128) as (bx, by, bz):  # <- here
                A[0] = 1.0
        return k

    with pytest.raises(TileBindingError) as e:
        build()
    check(e, build, TileBindingError)


def test_while_unsupported():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                while True:  # <- here
                    A[0] = 1.0
        return k

    with pytest.raises(TileSyntaxError) as e:
        build()
    check(e, build, TileSyntaxError)


def helper(x):
    return x + 1


def failing_helper(n):
    raise ValueError(f"no tile size for {n}")


def test_python_helper_calls():
    # a helper runs at build time (TileLang's semantics); one that fails names the kernel line
    @T.prim_func
    def ok(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(64):
                A[i] = helper(A[i])

    assert ok.name == "ok"

    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(failing_helper(64)):  # <- here
                    A[i] = 0.0
        return k

    with pytest.raises(TileSyntaxError) as e:
        build()
    check(e, build, TileSyntaxError)
    assert "failing_helper" in str(e.value) and "no tile size for 64" in str(e.value)
    assert "T.macro" in str(e.value)


def test_tile_op_inside_parallel():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((64,), "float32")
                for i in T.Parallel(64):
                    T.copy(A[0], s)  # <- here
        return k

    with pytest.raises(TileSyntaxError) as e:
        build()
    check(e, build, TileSyntaxError)


def test_reassigning_immutable_name_in_loop():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                acc = A[0] * 2.0
                for i in T.serial(64):
                    acc = acc + A[i]  # <- here
                A[0] = acc
        return k

    with pytest.raises(TileBindingError) as e:
        build()
    check(e, build, TileBindingError)
    assert "alloc_var" in str(e.value)


def _add_kernel():
    @T.prim_func
    def add(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(16):
                B[i] = A[i] + 1.0

    return tilecore.jit(add, out_idx=[-1], target="toy:w4")


def test_call_wrong_argument_count():
    k = _add_kernel()
    with pytest.raises(TileCallError) as e:
        k(np.zeros(16, np.float32), np.zeros(16, np.float32))  # <- here
    assert e.value.loc.file == THIS
    assert e.value.loc.line == marked_line(test_call_wrong_argument_count)
    assert "takes 1 input" in str(e.value)


def test_call_wrong_shape():
    k = _add_kernel()
    with pytest.raises(TileCallError) as e:
        k(np.zeros(17, np.float32))  # <- here
    assert e.value.loc.line == marked_line(test_call_wrong_shape)
    assert "(17,)" in str(e.value)


def test_call_wrong_dtype():
    k = _add_kernel()
    with pytest.raises(TileCallError) as e:
        k(np.zeros(16, np.float64))  # <- here
    assert e.value.loc.line == marked_line(test_call_wrong_dtype)
    assert "float64" in str(e.value) and "float32" in str(e.value)


def test_out_idx_out_of_range():
    @T.prim_func
    def add(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(16):
                B[i] = A[i]

    with pytest.raises(TileCallError) as e:
        tilecore.jit(add, out_idx=[2], target="toy:w4")  # <- here
    assert e.value.loc.line == marked_line(test_out_idx_out_of_range)


def test_unknown_target_lists_installed():
    @T.prim_func
    def add(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            A[0] = 1.0

    with pytest.raises(TileTargetError) as e:
        tilecore.jit(add, target="tpu")
    assert "toy" in str(e.value) and "tpu" in str(e.value)


def test_out_of_bounds_global_access_at_runtime():
    def build():
        @T.prim_func
        def k(A: T.Tensor((10,), "float32"), B: T.Tensor((10,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(16):
                    B[i] = A[i]  # <- here
        return k

    kernel = tilecore.jit(build(), out_idx=[-1], target="toy:w4")
    with pytest.raises(TileRuntimeError) as e:
        kernel(np.zeros(10, np.float32))
    check(e, build, TileRuntimeError)
    assert "out-of-bounds" in str(e.value)


def test_missing_annotation():
    def build():
        @T.prim_func
        def k(A):  # <- here
            with T.Kernel(1, threads=32) as bx:
                A[0] = 1.0
        return k

    with pytest.raises(TileTypeError) as e:
        build()
    check(e, build, TileTypeError)


def test_every_error_is_a_tile_error():
    for cls in (TileShapeError, TileTypeError, TileNameError, TileSyntaxError, TileBindingError,
                TileCallError, TileRuntimeError, TileTargetError):
        assert issubclass(cls, TileError)
