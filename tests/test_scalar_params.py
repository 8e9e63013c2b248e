"""Scalar kernel parameters (`n: T.int32` in the signature), passed as Python ints at call time:
bound like symbolic dimensions, so they may size the grid; out_idx counts them, as TileLang's."""

import numpy as np
import pytest
from optional_backends import needs_interp  # noqa: E402

import tilecore
import tilecore.language as T
from tilecore.errors import TileCallError, TileTypeError


def _masked_scale():
    @T.prim_func
    def masked(A: T.Tensor((256,), "int32"), limit: T.int32, shift: T.int16,
               B: T.Tensor((256,), "int32")):
        """B[i] = A[i] + shift for i < limit (the grid covers only `limit`), else untouched."""
        with T.Kernel(T.ceildiv(limit, 64), threads=32) as bx:
            for i in T.Parallel(64):
                k = bx * 64 + i
                if k < limit:
                    B[k] = A[k] + shift

    return masked


@pytest.mark.parametrize("target", [pytest.param("interp", marks=needs_interp), "toy:w4"])
def test_scalar_parameters_are_python_ints_at_call_time(target):
    kernel = tilecore.jit(_masked_scale(), out_idx=[-1], target=target)  # -1: B, after 2 scalars
    a = np.arange(256, dtype=np.int32)
    for limit, shift in [(256, 3), (100, -7), (1, 0)]:
        out = kernel(a, limit, np.int16(shift) if limit == 1 else shift)
        want = np.zeros(256, np.int32)
        want[:limit] = a[:limit] + shift
        np.testing.assert_array_equal(out, want)


@needs_interp
def test_out_idx_counts_scalars_and_cannot_name_one():
    f = _masked_scale()
    k = tilecore.jit(f, out_idx=[3], target="interp")
    assert k(np.ones(256, np.int32), 2, 1)[:3].tolist() == [2, 2, 0]
    with pytest.raises(TileCallError, match="scalar parameter limit"):
        tilecore.jit(f, out_idx=[1], target="interp")


@needs_interp
def test_scalar_argument_mistakes_are_located():
    kernel = tilecore.jit(_masked_scale(), out_idx=[-1], target="interp")
    a = np.ones(256, np.int32)
    with pytest.raises(TileCallError, match=r"limit\) is a float") as e:
        kernel(a, 2.5, 1)
    assert e.value.loc.file == __file__
    with pytest.raises(TileCallError, match="does not fit in int16"):
        kernel(a, 3, 40000)
    with pytest.raises(TileCallError, match="takes 3 input"):
        kernel(a, 3)


def test_a_float_scalar_or_a_bad_annotation_has_the_right_hint():
    with pytest.raises(TileTypeError, match="scalar parameters are integers"):
        @T.prim_func
        def f(A: T.Tensor((4,), "float32"), alpha: T.float32):
            with T.Kernel(1, threads=32) as _:
                pass
    with pytest.raises(TileTypeError) as e:
        @T.prim_func
        def g(A: T.Tensor((4,), "float32"), n: int):
            with T.Kernel(1, threads=32) as _:
                pass
    assert "T.int32` for a scalar" in str(e.value)


@needs_interp
def test_printed_source_with_scalars_and_int_ops_reparses(tmp_path):
    """The printer spells scalar parameters and the new integer operations as valid source."""
    import importlib.util

    @T.prim_func
    def k(A: T.Tensor((64,), "int32"), n: T.int32, B: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(64):
                if i < n:
                    B[i] = T.floordiv(A[i], 3) + (T.floormod(A[i], -5) << 2) ^ ~(A[i] >> 1) | (A[i] & 7)

    path = tmp_path / "reprinted_scalars.py"
    path.write_text("import tilecore.language as T\n\n" + k.script())
    spec = importlib.util.spec_from_file_location("reprinted_scalars", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.k.script() == k.script()
    a = np.arange(-32, 32, dtype=np.int32) * 7
    want = tilecore.jit(k, out_idx=[-1], target="interp")(a, 50)
    np.testing.assert_array_equal(tilecore.jit(mod.k, out_idx=[-1], target="interp")(a, 50), want)
    ref = (np.floor_divide(a, 3) + (np.mod(a, -5) << 2)) ^ ~(a >> 1) | (a & 7)
    ref[50:] = 0
    np.testing.assert_array_equal(want, ref)
