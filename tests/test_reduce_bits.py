"""T.reduce_bitand / reduce_bitor / reduce_bitxor and TileLang's generic `T.reduce(buffer, out,
kind, dim, clear)` (issue 14 item 10): exact against NumPy's bitwise reductions over integer and
bool tiles, along either dim, with clear=False combining into the destination, on interp, cpu
and the emulator (the thread lowering's shuffles and cross-warp scratch); `batch=` and
`nan_propagate=` are accepted as TileLang spells them; misuse is a located error."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileConfigWarning, TileTypeError

pytestmark = pytest.mark.usefixtures("isolated_cache")

R, C = 8, 64
UFUNC = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}


def _kernel(dtype: str):
    """Row reductions (dim 1) of every kind into fresh outputs, column reductions (dim 0) with
    clear=False into outputs that start as the kernel's `Init` row, through both spellings."""

    @T.prim_func
    def k(A: T.Tensor((R, C), dtype), Init: T.Tensor((3, C), dtype), Rows: T.Tensor((3, R), dtype),
          Cols: T.Tensor((3, C), dtype)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((R, C), dtype)
            r_and = T.alloc_fragment((R,), dtype)
            r_or = T.alloc_fragment((R,), dtype)
            r_xor = T.alloc_fragment((R,), dtype)
            c_and = T.alloc_fragment((C,), dtype)
            c_or = T.alloc_fragment((C,), dtype)
            c_xor = T.alloc_fragment((C,), dtype)
            T.copy(A, a)
            T.reduce_bitand(a, r_and, dim=1)
            T.reduce_bitor(a, r_or, dim=-1, batch=2)
            getattr(T, "reduce_" + "bitxor")(a, r_xor, 1)
            T.copy(Init[0, :], c_and)
            T.copy(Init[1, :], c_or)
            T.copy(Init[2, :], c_xor)
            T.reduce(a, c_and, "bitand", 0, False)
            T.reduce(a, c_or, "bitor", dim=0, clear=False)
            T.reduce_bitxor(a, c_xor, dim=0, clear=False)
            T.copy(r_and, Rows[0, :])
            T.copy(r_or, Rows[1, :])
            T.copy(r_xor, Rows[2, :])
            T.copy(c_and, Cols[0, :])
            T.copy(c_or, Cols[1, :])
            T.copy(c_xor, Cols[2, :])

    return k


def _values(dtype: str, shape, rng) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.8  # mostly set: `and` along a row is not always False
    info = np.iinfo(dtype)
    # many set bits so that `and` keeps some: or-ing two draws
    return (rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
            | rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True))


@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool"])
@pytest.mark.parametrize("target", target_params("interp", "emu:sm_80", "emu:sm_90a", "tvm:llvm"))
def test_bit_reductions_match_numpy(target, dtype):
    _check(target, dtype)


@pytest.mark.parametrize("target", target_params("cpu"))
def test_bit_reductions_match_numpy_on_cpu(target):
    _check(target, "int16")  # one dtype: a cpu compile costs ~1 s


def _check(target, dtype):
    rng = np.random.default_rng(7)
    a, init = _values(dtype, (R, C), rng), _values(dtype, (3, C), rng)
    rows, cols = np.zeros((3, R), dtype), np.zeros((3, C), dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TileConfigWarning)  # batch=2: asserted below
        k = tilecore.compile(_kernel(dtype), target=target)
    k(a, init, rows, cols)
    for i, kind in enumerate(("bitand", "bitor", "bitxor")):
        f = UFUNC[kind]
        np.testing.assert_array_equal(rows[i], f.reduce(a, axis=1), err_msg=f"{kind} rows")
        np.testing.assert_array_equal(cols[i], f(init[i], f.reduce(a, axis=0)), err_msg=f"{kind} cols")


def _one(body):
    @T.prim_func
    def k(A: T.Tensor((4, 32), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_fragment((4, 32), "float32")
            b = T.alloc_fragment((4,), "float32")
            T.copy(A, a)
            body(a, b)
            T.copy(b, B)

    return k


def test_bit_reduction_of_floats_is_a_located_type_error():
    with pytest.raises(TileTypeError, match=r"reduce_bitor needs integer or bool tiles.*float32") as e:
        _one(lambda a, b: T.reduce_bitor(a, b, dim=1))
    assert "test_reduce_bits.py" in str(e.value)


def test_reduce_options_are_checked_or_warned():
    with pytest.raises(TileTypeError, match="unknown reduce_type 'mean'"):
        _one(lambda a, b: T.reduce(a, b, "mean", 1, True))
    with pytest.raises(TileTypeError, match="batch must be a positive int"):
        _one(lambda a, b: T.reduce_max(a, b, dim=1, batch=0))
    with pytest.raises(TileTypeError, match="reduce_sum has no nan_propagate"):
        _one(lambda a, b: T.reduce(a, b, "sum", 1, True, nan_propagate=True))
    with pytest.warns(TileConfigWarning, match=r"nan_propagate=False\) is accepted but not applied"):
        _one(lambda a, b: T.reduce_max(a, b, dim=1, nan_propagate=False))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nan_propagate=True is tilecore's semantics: no warning
        _one(lambda a, b: T.reduce_min(a, b, dim=1, nan_propagate=True))


def test_generic_reduce_and_nan_propagate_true_match_the_named_forms_on_interp():
    """T.reduce(..., "max", ...) with nan_propagate=True gives NaN where a row holds one, as
    reduce_max does (tilecore's float max propagates NaN on every target)."""
    a = np.arange(128, dtype=np.float32).reshape(4, 32)
    a[2, 5] = np.nan
    out = np.zeros(4, np.float32)
    prog = _one(lambda x, y: T.reduce(x, y, "max", 1, True, nan_propagate=True))
    k = tilecore.compile(prog, target="interp")
    k(a, out)
    np.testing.assert_array_equal(out, [31, 63, np.nan, 127])
