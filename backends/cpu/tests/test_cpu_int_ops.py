"""T.floordiv / T.floormod and the bit operations (`<<`, `>>`, `&`, `|`, `^`, `~`,
`T.shift_left`, `T.bitwise_*`) on cpu: exactly interp's values (the semantics of
`tilecore.semantics`: C's compute width, so int16 and uint8 shift and invert as promoted
ints, uint32 and int64 at their own width), and NumPy's where NumPy's dtype rules agree;
a shift count outside the width and a zero floor divisor are located TileRuntimeErrors.
Scalar parameters reach the serial and the prange launcher.

One kernel covers five dtypes (each numba compile costs seconds); Hypothesis varies the data
and the length (`T.dynamic`), the operands' extremes are always among the inputs."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.errors import TileRuntimeError

DTYPES = ("int16", "uint8", "int32", "uint32", "int64")
ROWS = 12
OUT_IDX = [4 * j + 3 for j in range(len(DTYPES))]


def _rows(A, B, S, C, k):
    """The operations on one dtype's operands (built into the kernel, once per dtype)."""
    C[k, 0] = T.floordiv(A[k], B[k])
    C[k, 1] = T.floormod(A[k], B[k])
    C[k, 2] = A[k] << S[k]
    C[k, 3] = A[k] >> S[k]
    C[k, 4] = (A[k] & B[k]) ^ (A[k] | 7)
    C[k, 5] = ~A[k]
    C[k, 6] = (A[k] * B[k]) >> S[k]  # the product wraps at the compute width before the shift
    C[k, 7] = T.shift_right(A[k] + B[k], 1) - T.shift_left(A[k], 3)
    C[k, 8] = T.if_then_else(T.bitwise_not(A[k]) < 0, 1, 0) + T.floordiv(A[k], 3) * 2
    C[k, 9] = T.floormod(A[k], 5) + T.bitwise_xor(T.bitwise_and(A[k], S[k]), T.bitwise_or(B[k], 1))
    C[k, 10] = (A[k] << 3) >> 2  # int16: no wrap at 16 bits between the shifts
    C[k, 11] = T.floordiv(A[k] * 3, B[k]) ^ T.floormod(A[k], B[k] | 1)


def _program():
    n = T.dynamic("n")
    d0, d1, d2, d3, d4 = DTYPES

    @T.prim_func
    def int_ops(A0: T.Tensor((n,), d0), B0: T.Tensor((n,), d0), S0: T.Tensor((n,), d0),
                C0: T.Tensor((n, ROWS), d0),
                A1: T.Tensor((n,), d1), B1: T.Tensor((n,), d1), S1: T.Tensor((n,), d1),
                C1: T.Tensor((n, ROWS), d1),
                A2: T.Tensor((n,), d2), B2: T.Tensor((n,), d2), S2: T.Tensor((n,), d2),
                C2: T.Tensor((n, ROWS), d2),
                A3: T.Tensor((n,), d3), B3: T.Tensor((n,), d3), S3: T.Tensor((n,), d3),
                C3: T.Tensor((n, ROWS), d3),
                A4: T.Tensor((n,), d4), B4: T.Tensor((n,), d4), S4: T.Tensor((n,), d4),
                C4: T.Tensor((n, ROWS), d4)):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                k = bx * 32 + i
                if k < n:
                    _rows(A0, B0, S0, C0, k)
                    _rows(A1, B1, S1, C1, k)
                    _rows(A2, B2, S2, C2, k)
                    _rows(A3, B3, S3, C3, k)
                    _rows(A4, B4, S4, C4, k)

    return int_ops


@functools.cache
def _kernels():
    """(cpu kernel, interp kernel), built once per test session."""
    f = _program()
    return (tilecore.jit(f, out_idx=OUT_IDX, target="cpu"),
            tilecore.jit(f, out_idx=OUT_IDX, target="interp"))


def _width(d: str) -> int:
    """The C compute width a shift count must stay below (semantics.int_compute_dtype)."""
    return 64 if d == "int64" else 32


def _edges(d: str):
    """(a, b) operand pairs at the dtype's extremes: MIN / -1, MAX / MIN, 0, 1, ..."""
    info = np.iinfo(d)
    a = [info.min, info.max, 0, 1, info.max - 1, info.min + 1, info.min, 7]
    b = [-1, -1, 1, info.max, info.min, 2, 3, -7] if info.min else [1, 3, 1, info.max, info.max, 2, 3, 7]
    return a, b


def _inputs(draw_values, n: int):
    """A, B, S for every dtype: the edge pairs first, then `draw_values(d, n)` values."""
    args = []
    for d in DTYPES:
        info = np.iinfo(d)
        ea, eb = _edges(d)
        a = np.array(ea + draw_values(d, n, info.min, info.max), dtype=d)
        b = np.array(eb + draw_values(d, n, info.min, info.max), dtype=d)
        b[b == 0] = 1
        s = np.array(draw_values(d, len(a), 0, _width(d) - 1), dtype=d)
        args += [a, b, s]
    return args


def _numpy_rows(a, b, s):
    """Rows 0-5 by NumPy's own operators on the dtype (they agree with C's promoted-int
    arithmetic once stored back to the dtype)."""
    with np.errstate(over="ignore"):
        return np.stack([np.floor_divide(a, b), np.mod(a, b), a << s, a >> s, (a & b) ^ (a | 7), ~a],
                        axis=1)


@settings(max_examples=8)
@given(st.data(), st.integers(0, 60))
def test_int_ops_are_interps_and_numpys(data, n):
    def values(d, count, lo, hi):
        return data.draw(st.lists(st.integers(lo, hi), min_size=count, max_size=count))

    args = _inputs(values, n)
    cpu, oracle = _kernels()
    got, want = cpu(*args), oracle(*args)
    for j, d in enumerate(DTYPES):
        a, b, s = args[3 * j: 3 * j + 3]
        assert got[j].dtype == np.dtype(d)
        np.testing.assert_array_equal(got[j], want[j], err_msg=d)
        ok = ~((a == np.iinfo(d).min) & (b == -1)) if np.iinfo(d).min else slice(None)
        # NumPy's MIN // -1 is its own (a warning); the semantics wrap, interp agrees above
        np.testing.assert_array_equal(got[j][ok, :6], _numpy_rows(a, b, s)[ok], err_msg=d)


def _fixed_inputs():
    rng = np.random.default_rng(3)
    return _inputs(lambda d, count, lo, hi: rng.integers(lo, hi, count, endpoint=True).tolist(), 8)


@pytest.mark.parametrize("j,count", [(2, 40), (4, -1), (0, 32), (3, 32)], ids=["int32_40", "int64_-1",
                                                                              "int16_32", "uint32_32"])
def test_a_shift_count_outside_the_width_is_reported_at_its_line(j, count):
    """interp's message: the count, the width and the operation (a shift of int16 computes in
    int32, so 16..31 are valid counts there, 32 is not)."""
    args = _fixed_inputs()
    args[3 * j + 2][5] = count
    d = DTYPES[j]
    msg = rf"shift count {count} is outside \[0, {_width(d)}\) in `shl` on {d}"
    for kernel in _kernels():
        with pytest.raises(TileRuntimeError, match=msg) as e:
            kernel(*args)
        assert e.value.loc.file == __file__ and "A[k] << S[k]" in str(e.value)


def test_a_zero_floor_divisor_is_reported_at_its_line():
    args = _fixed_inputs()
    args[3 * 2 + 1][4] = 0  # an int32 divisor
    with pytest.raises(TileRuntimeError, match="integer division by zero") as e:
        _kernels()[0](*args)
    assert "T.floordiv(A[k], B[k])" in str(e.value)


def test_the_compile_cache_entry_keeps_the_shift_fault():
    """A kernel loaded from its cache entry reports the same located shift error."""
    from tilecore_cpu.artifact import CpuArtifact

    cpu = _kernels()[0]
    meta, blobs = cpu.artifact.cache_entry()
    loaded = CpuArtifact.from_cache_entry(json.loads(json.dumps(meta)), blobs)
    args = _fixed_inputs()
    outs = [np.zeros((len(args[0]), ROWS), d) for d in DTYPES]
    full = [x for j in range(len(DTYPES)) for x in (*args[3 * j: 3 * j + 3], outs[j])]
    loaded.run(full, {"n": len(args[0])})
    for got, want in zip(outs, cpu(*args)):
        np.testing.assert_array_equal(got, want)
    full[2][1] = 33  # int16's count
    with pytest.raises(TileRuntimeError, match=r"shift count 33 is outside \[0, 32\) in `shl` on int16"):
        loaded.run(full, {"n": len(args[0])})


def _scalar_shift():
    n = T.dynamic("n")

    @T.prim_func
    def scalar_shift(A: T.Tensor((n,), "int32"), s: T.int32, lo: T.int16, B: T.Tensor((n,), "int32")):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                k = bx * 32 + i
                if k < n and k >= lo:
                    B[k] = (A[k] >> s) ^ lo

    return scalar_shift


@pytest.mark.parametrize("parallel", ["never", "always"])
def test_scalar_parameters_reach_both_launchers(parallel, monkeypatch):
    """Scalars as a shift count (checked: its range is its dtype's) and a bound, through the
    serial launcher and the prange one (whose blocks take them as arguments)."""
    from tilecore_cpu import artifact

    monkeypatch.setattr(artifact, "PARALLEL", parallel)
    kernel = tilecore.jit(_scalar_shift(), out_idx=[-1], target="cpu")
    a = np.arange(-50, 50, dtype=np.int32) * 999
    for s, lo in [(0, 0), (31, -3), (4, 70)]:
        want = np.where(np.arange(100) >= lo, (a >> s) ^ lo, 0).astype(np.int32)
        np.testing.assert_array_equal(kernel(a, s, lo), want)
    if parallel == "always":  # the prange launcher was compiled and ran
        assert kernel.artifact.launch.signatures
    with pytest.raises(TileRuntimeError, match=r"shift count 32 is outside \[0, 32\) in `shr` on int32"):
        kernel(a, 32, 0)
