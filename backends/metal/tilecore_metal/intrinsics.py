"""Metal's simdgroup matrix operations as data: `simdgroup_matrix<T, 8, 8>` lane maps.

Apple does not document which elements of an 8x8 `simdgroup_matrix` each of the 32 SIMD lanes
holds (`thread_elements()` exposes them). Results of `simdgroup_load` / `simdgroup_multiply_
accumulate` / `simdgroup_store` do not depend on that layout, and the generated code reads or
writes `thread_elements()` only to move a lane's own registers in and out, so any bijection works
as long as the lowering, the emulator and the CPU shim use the same one. We declare the layout
that public Metal kernels (e.g. MLX's) rely on, with `q = lane // 4`:

    row = (q & 4) + (lane // 2) % 4,     col = 2 * (q & 2) + 2 * (lane % 2) + e     (e = 0, 1)

It is linear in the lane's bits, so the lowering derives index formulas. The shim header
(`shim/metal_stdlib`, `tilecore_shim::mat_row/mat_col`) implements exactly this table; a test
checks the two agree cell by cell. It has not been checked against Apple hardware.
"""

from __future__ import annotations

from functools import cache

from tilecore import dtypes as dt
from tilecore.dtypes import DType
from tilecore.ir.intrinsic import Intrinsic, LaneMap, Operand

SIMD_WIDTH = 32
MATRIX = 8  # simdgroup_matrix<T, 8, 8>
_MSL_TYPE = {"float16": "half", "bfloat16": "bfloat", "float32": "float"}


def matrix_coord(lane: int, e: int) -> tuple[int, int]:
    """(row, col) of element `e` (0 or 1) of `lane` in a simdgroup_matrix (see module docstring)."""
    q = lane // 4
    return (q & 4) + (lane // 2) % 4, 2 * (q & 2) + 2 * (lane % 2) + e


MATRIX_MAP = LaneMap.from_fn(MATRIX, MATRIX, SIMD_WIDTH, 2, matrix_coord)
MATRIX_MAP_T = LaneMap.from_fn(MATRIX, MATRIX, SIMD_WIDTH, 2, lambda lane, e: matrix_coord(lane, e)[::-1])


def msl_type(d: DType) -> str:
    """The MSL element type of a simdgroup matrix of dtype `d`."""
    return _MSL_TYPE[d.name]


@cache
def simdgroup_mma(in_dtype: DType, acc_dtype: DType = dt.float32, a_map: LaneMap = MATRIX_MAP,
                  b_map: LaneMap = MATRIX_MAP, c_map: LaneMap = MATRIX_MAP) -> Intrinsic:
    """`simdgroup_multiply_accumulate(D, A, B, C)` on 8x8 matrices as data (maps overridable for
    mutation tests). Every operand is a register operand: 2 elements per lane, in the order of
    `thread_elements()`."""
    return Intrinsic(
        name=f"simdgroup_multiply_accumulate.{msl_type(in_dtype)}.{msl_type(acc_dtype)}",
        kind="mma",
        shape=(MATRIX, MATRIX, MATRIX),
        operands=(
            Operand("D", "out", acc_dtype, "reg", c_map),
            Operand("A", "in", in_dtype, "reg", a_map),
            Operand("B", "in", in_dtype, "reg", b_map),
            Operand("C", "in", acc_dtype, "reg", c_map),
        ),
        lanes=SIMD_WIDTH,
    )


@cache
def simdgroup_load(dtype: DType, transpose: bool) -> Intrinsic:
    """`simdgroup_load(m, origin, stride, 0, transpose)` from threadgroup memory, as an intrinsic
    of kind "ldmatrix" (one 8x8 matrix): lane l addresses memory row l % 8 (the renderer
    recovers the origin and the row stride from those addresses); element e of lane l receives
    memory (row, col) = the matrix map's (row, col), exchanged when transposed."""
    dst = MATRIX_MAP_T if transpose else MATRIX_MAP
    src = LaneMap.from_fn(MATRIX, MATRIX, SIMD_WIDTH, 1, lambda lane, _e: (lane % MATRIX, 0))
    return Intrinsic(
        name=f"simdgroup_load.{msl_type(dtype)}{'.transpose' if transpose else ''}",
        kind="ldmatrix",
        shape=(1, MATRIX, MATRIX),
        operands=(Operand("dst", "out", dtype, "reg", dst), Operand("src", "in", dtype, "shared", src)),
        lanes=SIMD_WIDTH,
    )
