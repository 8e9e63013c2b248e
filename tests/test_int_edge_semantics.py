"""Integer edge cases where targets once disagreed with the oracle (tilecore.semantics):
divisions (and shifts) in lanes an `if` masks off, int64 division by INT64_MIN, and negative
constants against unsigned operands. The references are exact Python integer arithmetic,
written out here, not the semantics module itself; every case runs on interp, cpu and emu."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from optional_backends import target_params

import tilecore
import tilecore.language as T
from tilecore.errors import TileRuntimeError

TARGETS = target_params("interp", "cpu", "emu:sm_80")


def c_div(a: int, b: int) -> int:
    """C's quotient (truncated toward zero), exact."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a: int, b: int) -> int:
    """C's remainder (the dividend's sign), exact."""
    return a - c_div(a, b) * b


def wrap(v: int, bits: int, signed: bool = True) -> int:
    """`v` wrapped to a `bits`-bit two's complement (or unsigned) integer."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


# --------------------------------------------------------------------------- masked lanes

def _masked_kernel(bound):
    """Division, remainder and a shift under `if k < bound` (bound: a constant or the scalar
    parameter `n`), plus a division guarded by T.if_then_else; masked-off lanes write -5."""
    @T.prim_func
    def masked(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32"),
               Sh: T.Tensor((64,), "int32"), n: T.int32, C: T.Tensor((6, 64), "int32")):
        with T.Kernel(1, threads=32) as _:
            for k in T.Parallel(64):
                if k < (n if bound is None else bound):
                    C[0, k] = A[k] // B[k]
                    C[1, k] = T.floordiv(A[k], B[k])
                    C[2, k] = A[k] % B[k]
                    C[3, k] = T.floormod(A[k], B[k])
                    C[4, k] = A[k] << Sh[k]
                else:
                    for r in T.serial(5):
                        C[r, k] = -5
                C[5, k] = T.if_then_else(B[k] != 0, A[k] // B[k], 7)
    return masked


def _masked_reference(a, b, sh, n):
    out = np.full((6, 64), -5, np.int64)
    for k in range(64):
        x, y = int(a[k]), int(b[k])
        if k < n:
            out[:5, k] = [c_div(x, y), x // y, c_mod(x, y), x % y, wrap(x << int(sh[k]), 32)]
        out[5, k] = c_div(x, y) if y != 0 else 7
    return out.astype(np.int32)


@pytest.mark.parametrize("target", TARGETS)
def test_a_zero_divisor_in_a_masked_lane_does_not_fault(target):
    """Lanes k >= 60 divide by zero and shift by 40, but `if k < 60` masks them off: no target
    may fault there (interp once raised "integer division by zero")."""
    a = np.arange(-32, 32, dtype=np.int32) * 7
    b = np.arange(64, dtype=np.int32) % 5 - 2
    b[b == 0] = 3
    b[60:] = 0
    sh = np.arange(64, dtype=np.int32) % 31
    sh[60:] = 40
    out = tilecore.jit(_masked_kernel(60), out_idx=[-1], target=target)(a, b, sh, 0)
    np.testing.assert_array_equal(out, _masked_reference(a, b, sh, 60))


_MASKED = {}


def _masked_jit(target):
    """One compiled kernel per target for every Hypothesis example (cpu compiles slowly)."""
    if target not in _MASKED:
        _MASKED[target] = tilecore.jit(_masked_kernel(None), out_idx=[-1], target=target)
    return _MASKED[target]


@pytest.mark.parametrize("target", TARGETS)
@settings(max_examples=12)
@given(data=st.data())
def test_only_active_lanes_divide(target, data):
    """Random dividends, a random active prefix `k < n`; zero divisors and bad shift counts
    anywhere in the inactive lanes; an active zero divisor is a located TileRuntimeError."""
    n = data.draw(st.integers(0, 64), label="n")
    ints = st.integers(-(2**31), 2**31 - 1)
    a = np.array(data.draw(st.lists(ints, min_size=64, max_size=64)), np.int32)
    b = np.array(data.draw(st.lists(ints.filter(lambda v: v != 0), min_size=64, max_size=64)),
                 np.int32)
    b[(a == -(2**31)) & (b == -1)] = 1  # INT_MIN / -1: its own test below
    sh = np.array(data.draw(st.lists(st.integers(0, 31), min_size=64, max_size=64)), np.int32)
    off = np.arange(64) >= n
    zeros = np.array(data.draw(st.lists(st.booleans(), min_size=64, max_size=64)))
    b[off & zeros] = 0
    sh[off & zeros] = 32
    f = _masked_jit(target)
    np.testing.assert_array_equal(f(a, b, sh, n), _masked_reference(a, b, sh, n))
    if n > 0:
        b[data.draw(st.integers(0, n - 1), label="zero lane")] = 0
        with pytest.raises(TileRuntimeError, match="division by zero"):
            f(a, b, sh, n)


# --------------------------------------------------------------------------- int64 extremes

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
_EDGES64 = [I64_MIN, I64_MIN + 1, -(2**62), -3, -2, -1, 1, 2, 3, 2**62, I64_MAX - 1, I64_MAX]


def _exact64(x: int, y: int) -> list[int]:
    """C division, C remainder, floor division, floor remainder of int64s, wrapped like C's
    `-fwrapv` arithmetic (INT64_MIN / -1 is INT64_MIN)."""
    return [wrap(v, 64) for v in (c_div(x, y), c_mod(x, y), x // y, x % y)]


def test_the_semantics_divide_int64_extremes_exactly():
    """Array and scalar paths of c_div / c_mod / floor_div / floor_mod on every pair of int64
    edge values (the array path once took abs(INT64_MIN), which overflows:
    (2**63 - 2) // -2**63 was 1, INT64_MIN // 2 was +2**62)."""
    from tilecore import dtypes as dt
    from tilecore import semantics as S

    pairs = [(x, y) for x in _EDGES64 + [0] for y in _EDGES64]
    a = np.array([x for x, _ in pairs], np.int64)
    b = np.array([y for _, y in pairs], np.int64)
    want = np.array([_exact64(x, y) for x, y in pairs], np.int64).T
    with np.errstate(all="raise"):  # no NumPy overflow on the way either
        for row, op in enumerate(("div", "mod", "floordiv", "floormod")):
            np.testing.assert_array_equal(S.int_binop(op, a, b, dt.int64), want[row], err_msg=op)
            got = [S.int_binop(op, x, y, dt.int64) for x, y in pairs]
            assert got == want[row].tolist(), op


@pytest.mark.parametrize("target", TARGETS)
def test_int64_division_by_extremes_on_every_target(target):
    @T.prim_func
    def div64(A: T.Tensor((len(_EDGES64) + 1, len(_EDGES64)), "int64"),
              B: T.Tensor((len(_EDGES64) + 1, len(_EDGES64)), "int64"),
              C: T.Tensor((4, len(_EDGES64) + 1, len(_EDGES64)), "int64")):
        with T.Kernel(1, threads=32) as _:
            for i, j in T.Parallel(len(_EDGES64) + 1, len(_EDGES64)):
                C[0, i, j] = A[i, j] // B[i, j]
                C[1, i, j] = A[i, j] % B[i, j]
                C[2, i, j] = T.floordiv(A[i, j], B[i, j])
                C[3, i, j] = T.floormod(A[i, j], B[i, j])

    xs = _EDGES64 + [0]
    a = np.array([[x] * len(_EDGES64) for x in xs], np.int64)
    b = np.array([_EDGES64] * len(xs), np.int64)
    want = np.array([[_exact64(x, y) for y in _EDGES64] for x in xs], np.int64).transpose(2, 0, 1)
    out = tilecore.jit(div64, out_idx=[-1], target=target)(a, b)
    np.testing.assert_array_equal(out, want)
