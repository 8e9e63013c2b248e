"""Fixed programs for drifts found once, run on every target against interp like generated cases.

The generator keeps values small, so some semantics it never reaches: these cases feed values
far from zero (Param.offset) to the operations that must not narrow them. Each is a Case, so
`runner.check_case` judges it and a failure prints the same way.
"""

from __future__ import annotations

from .case import Case, Param

ROWS, COLS = 4, 256  # 256 values per row near 2**30 exceed int32 when summed


def _source(kind: str, src_dtype: str, dst_dtype: str, via_shared: bool, op: str = "reduce") -> str:
    stage = "T.alloc_shared" if via_shared else "T.alloc_fragment"
    if op == "cumsum":
        body = (f"        c = T.alloc_fragment(({ROWS}, {COLS}), {dst_dtype!r})\n"
                f"        T.cumsum(a, c, dim=1)\n"
                f"        T.copy(c, Out[0, 0])\n")
        out = f"({ROWS}, {COLS})"
    else:
        body = (f"        r = T.alloc_fragment(({ROWS},), {dst_dtype!r})\n"
                f"        T.reduce_{kind}(a, r, dim=1)\n"
                f"        T.copy(r, Out[0])\n")
        out = f"({ROWS},)"
    return ('"""A regression program of tilecore-conformance."""\nimport tilecore.language as T\n\n\n'
            "@T.prim_func\n"
            f"def main(A: T.Tensor(({ROWS}, {COLS}), {src_dtype!r}), Out: T.Tensor({out}, {dst_dtype!r})):\n"
            "    with T.Kernel(1, threads=128) as bx:\n"
            f"        a = {stage}(({ROWS}, {COLS}), {src_dtype!r})\n"
            "        T.copy(A[0, 0], a)\n" + body)


def _case(kind: str, src: str, dst: str, bound: float, offset: float, via_shared: bool = False,
          op: str = "reduce") -> Case:
    out_shape = (ROWS, COLS) if op == "cumsum" else (ROWS,)
    params = (Param("A", (ROWS, COLS), src, bound, 0, offset=offset),
              Param("Out", out_shape, dst, 0.0, 0, is_output=True))
    return Case(_source(kind, src, dst, via_shared, op), params, (f"regression_{op}_{kind}",))


_NEAR_2_30 = dict(bound=1000.0, offset=2.0**30)  # int32 values whose row sums need 39 bits
_HIGH_U32 = dict(bound=2.0**31 - 1, offset=2.0**31)  # uint32 values >= 2**31 (negative as int32)


def _compare_source(dtype: str, body: list[str]) -> str:
    """A 4x64 program setting int32 `o[i, j]` from `a[i, j]` (of `dtype`) by `body`'s lines."""
    return ('"""A regression program of tilecore-conformance."""\nimport tilecore.language as T\n\n\n'
            "@T.prim_func\n"
            f"def main(A: T.Tensor((4, 64), {dtype!r}), Out: T.Tensor((4, 64), 'int32')):\n"
            "    with T.Kernel(1, threads=64) as bx:\n"
            f"        a = T.alloc_fragment((4, 64), {dtype!r})\n"
            "        T.copy(A[0, 0], a)\n"
            "        o = T.alloc_fragment((4, 64), 'int32')\n"
            "        for i, j in T.Parallel(4, 64):\n"
            + "".join(f"            {ln}\n" for ln in body)
            + "        T.copy(o, Out[0, 0])\n")


def _negative_bound_case(dtype: str) -> Case:
    """`x <= -1` / `x > -3` on an unsigned tile: values compare as values (the C renderers once
    wrote the constant as `-1u`, an unsigned comparison that always held; on uint32 cpu wrapped
    the constant to 2**32 - 1 and tvm could not build it)."""
    src = _compare_source(dtype, ["if not (a[i, j] <= -1):",
                                  "    o[i, j] = 1 + (a[i, j] > -3)",
                                  "else:",
                                  "    o[i, j] = 5"])
    params = (Param("A", (4, 64), dtype, 200.0, 0),
              Param("Out", (4, 64), "int32", 0.0, 0, is_output=True))
    return Case(src, params, (f"regression_negative_bound_{dtype}",))


# Constants outside the compared value's range, on both sides and with every comparison; the
# NumPy reference in backends/emu/tests/test_emu_semantics.py (`compare_constants`) spells the
# same sum. Unsigned values sit at the top of their range, where their bit patterns are those of
# the negative constants (2**32 - 1 is `-1` as int32): a bit-pattern comparison would hold there.
COMPARE_CONSTANTS = ("(a[i, j] < -1) * 1 + (a[i, j] >= -2) * 2 + (a[i, j] == -1) * 4 "
                     "+ (-1 < a[i, j]) * 8 + (a[i, j] != -2) * 16 + (a[i, j] <= 4294967295) * 32 "
                     "+ (a[i, j] > -2147483649) * 64 + (a[i, j] == 4294967295) * 128")


def _compare_constants_case(dtype: str) -> Case:
    """`COMPARE_CONSTANTS` on a tile of `dtype`: unsigned values at the top of their range."""
    top = {"uint16": 2**16 - 1, "uint32": 2**32 - 1}.get(dtype)
    offset = float(top - 200) if top is not None else 0.0
    src = _compare_source(dtype, [f"o[i, j] = {COMPARE_CONSTANTS}"])
    params = (Param("A", (4, 64), dtype, 200.0, 0, offset=offset),
              Param("Out", (4, 64), "int32", 0.0, 0, is_output=True))
    return Case(src, params, (f"regression_compare_constants_{dtype}",))


REGRESSIONS: dict[str, Case] = {
    # a negative constant against an unsigned value (found by the H200 conformance run, session 8)
    "negative_bound_uint8": _negative_bound_case("uint8"),
    "negative_bound_uint16": _negative_bound_case("uint16"),
    # issue 16: cpu wrapped the -1 to 2**32 - 1, tvm raised InternalError on `uint32(-1)`
    "negative_bound_uint32": _negative_bound_case("uint32"),
    "compare_constants_uint16": _compare_constants_case("uint16"),
    "compare_constants_uint32": _compare_constants_case("uint32"),
    "compare_constants_int32": _compare_constants_case("int32"),
    # issue 19: the thread lowering summed int32 rows in int32 where the oracle uses int64
    "sum_int32_to_int64": _case("sum", "int32", "int64", **_NEAR_2_30),
    "sum_int32_to_int64_shared": _case("sum", "int32", "int64", via_shared=True, **_NEAR_2_30),
    "abssum_int32_to_int64": _case("abssum", "int32", "int64", bound=1000.0, offset=-(2.0**30)),
    "sum_uint32_to_int64": _case("sum", "uint32", "int64", **_HIGH_U32),
    "sum_uint32_wraps": _case("sum", "uint32", "uint32", **_HIGH_U32),
    "max_uint32": _case("max", "uint32", "uint32", **_HIGH_U32),
    "min_uint32": _case("min", "uint32", "uint32", **_HIGH_U32),
    "absmax_uint32": _case("absmax", "uint32", "uint32", **_HIGH_U32),
    "max_uint32_shared": _case("max", "uint32", "uint32", via_shared=True, **_HIGH_U32),
    "cumsum_uint32_to_int64": _case("sum", "uint32", "int64", op="cumsum", **_HIGH_U32),
    "cumsum_int32_to_int64": _case("sum", "int32", "int64", op="cumsum", **_NEAR_2_30),
}
