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
from test_cstyle_semantics import _run_c, needs_cc

import tilecore
import tilecore.language as T
from tilecore import dtypes as dt
from tilecore import semantics as S
from tilecore.codegen.cstyle import CStyleRenderer
from tilecore.errors import TileRuntimeError
from tilecore.ir.expr import Var, binop

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


@needs_cc
@pytest.mark.parametrize("bits", [32, 64])
def test_the_c_renderer_divides_int_extremes_like_the_semantics(bits):
    """gcc runs the rendered `/`, `%`, T.floordiv and T.floormod (cuda, hip and metal share the
    renderer) on the extremes, INT_MIN / -1 included: once a SIGFPE on the host (and an
    unspecified value on GPUs); it wraps, as the semantics say."""
    d = dt.as_dtype(f"int{bits}")
    lo, hi = -(2**(bits - 1)), 2**(bits - 1) - 1
    edges = [lo, lo + 1, -3, -1, 1, 2, 3, hi]
    sfx = "LL" if bits == 64 else ""

    def lit(v: int) -> str:  # INT_MIN has no literal: `-2147483648` negates a wider constant
        return f"({v + 1}{sfx} - 1)" if v == lo else f"{v}{sfx}"
    r = CStyleRenderer()
    x, y = Var("opnd_x", d), Var("opnd_y", d)
    cases = [binop(op, x, y) for op in ("div", "mod", "floordiv", "floormod")]
    ctype = "int" if bits == 32 else "long long"
    decls, exprs, want = [], [], []
    for k, (u, v) in enumerate((u, v) for u in edges + [0] for v in edges):
        # through volatiles: gcc would fold constant operands, INT_MIN / -1 included
        decls.append(f"volatile {ctype} vx{k} = {lit(u)}, vy{k} = {lit(v)}; "
                     f"{ctype} x{k} = vx{k}, y{k} = vy{k};")
        for e, w in zip(cases, (c_div(u, v), c_mod(u, v), u // v, u % v)):
            text = r.expr(e).replace(r.name_of(x), f"x{k}").replace(r.name_of(y), f"y{k}")
            exprs.append((ctype, text))
            want.append(wrap(w, bits))
    assert [int(s) for s in _run_c(decls, exprs, prelude=tuple(r.prelude()))] == want


# --------------------------------------------------------------------------- negative constants

_U32 = np.array([0, 1, 2, 5, 7, 2**31 - 1, 2**31, 2**32 - 3, 2**32 - 2, 2**32 - 1] + [9] * 22,
                np.uint32)


def _negative_constants(dtype: str):
    """Negative Python literals against an unsigned operand, in arithmetic and comparisons."""
    @T.prim_func
    def negc(A: T.Tensor((32,), dtype), C: T.Tensor((9, 32), dtype), D: T.Tensor((2, 32), "bool")):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(32):
                C[0, i] = A[i] // -1
                C[1, i] = T.floordiv(A[i], -1)
                C[2, i] = A[i] % -3
                C[3, i] = T.floormod(A[i], -3)
                C[4, i] = T.min(A[i], -1)
                C[5, i] = T.max(A[i], -2)
                # `A[i] * 1`, an expression: with the element reference itself the select
                # is typed int32 (select() types the literal before it unwraps a reference)
                C[6, i] = T.if_then_else(A[i] > 5, A[i] * 1, -1) // 7
                C[7, i] = -2 // A[i] if A[i] != 0 else 3
                C[8, i] = A[i] + -1
                D[0, i] = A[i] <= -1  # comparisons compare values: never true on unsigned
                D[1, i] = A[i] > -3
    return negc


def _negative_reference(a: np.ndarray, bits: int):
    """C's meaning: uint32 arithmetic converts a negative literal to uint32 (`-1` is
    4294967295u); narrower unsigned ints compute in `int`, where it stays -1."""
    def k(v: int) -> int:  # the literal at the operation's C compute width
        return v % 2**32 if bits == 32 else v

    out, cmp = [], []
    for x in (int(v) for v in a):
        y = x if x > 5 else k(-1)
        row = [c_div(x, k(-1)), x // k(-1), c_mod(x, k(-3)), x % k(-3), min(x, k(-1)),
               max(x, k(-2)), c_div(y, 7), c_div(k(-2), x) if x else 3, x - 1]
        out.append([wrap(v, bits, signed=False) for v in row])
        cmp.append([False, True])
    return np.array(out, np.int64).T.astype(a.dtype), np.array(cmp).T


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["uint32", "uint8"])
def test_negative_constants_against_unsigned_operands(target, dtype):
    """`x // -1` on uint32 is C's `x / 4294967295u` on every target (interp once computed -x);
    on uint8 the operation computes in C's `int`, where -1 stays -1; comparisons compare values."""
    bits = int(dtype[4:])
    a = (_U32.astype(np.int64) % 2**bits).astype(dtype)
    c, d = tilecore.jit(_negative_constants(dtype), out_idx=[1, 2], target=target)(a)
    want_c, want_d = _negative_reference(a, bits)
    np.testing.assert_array_equal(c, want_c)
    np.testing.assert_array_equal(d, want_d)


@needs_cc
def test_the_c_renderer_converts_negative_uint32_literals_like_c():
    """The C renderers (cuda, hip, metal share it) compute what the IR means, checked by gcc."""
    r = CStyleRenderer()
    x = Var("opnd_x", dt.uint32)
    cases = [binop(op, x, c) for op in ("div", "mod", "floordiv", "floormod", "min", "max")
             for c in (-1, -3)]
    decls, exprs, want = [], [], []
    for k, v in enumerate([0, 1, 7, 2**31, 2**32 - 3, 2**32 - 1]):
        decls.append(f"unsigned int x{k} = {v}u;")
        for e in cases:
            exprs.append(("unsigned int", r.expr(e).replace(r.name_of(x), f"x{k}")))
            c = int(e.b.value) % 2**32
            want.append({"div": v // c, "mod": v % c, "floordiv": v // c, "floormod": v % c,
                         "min": min(v, c), "max": max(v, c)}[e.op])
    assert [int(s) for s in _run_c(decls, exprs, prelude=tuple(r.prelude()))] == want
