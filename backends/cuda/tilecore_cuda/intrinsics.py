"""NVIDIA tensor-core instructions as data: the lane maps of `mma.sync` m16n8k16, `ldmatrix` and
Hopper's asynchronous `wgmma.mma_async` (m64nNk16, m64nNk32 for fp8; bottom of the module).

The tables follow the PTX ISA's "Matrix Fragments for mma.m16n8k16" (f16/bf16 inputs, f32
accumulators) and "ldmatrix" sections. With `group = lane // 4` and `tig = lane % 4`:

- A (16x16, 8 halves per lane): row = group (+8 for elements 2,3,6,7),
  col = 2*tig + (e & 1) (+8 for elements 4..7);
- B (16x8, 4 halves): row (k) = 2*tig + (e & 1) (+8 for elements 2,3), col (n) = group;
- C and D (16x8, 4 floats): row = group (+8 for elements 2,3), col = 2*tig + (e & 1);
- ldmatrix .m8n8 .b16, xN: lane l addresses row l % 8 of matrix l // 8; element e of lane l is
  matrix e // 2, row l // 4, col 2*(l % 4) + (e & 1) (with .trans: row and col exchanged).

These tables are the only place the layouts are written down: the lowering derives index
expressions from them and the `emu` backend executes the instructions from them.
"""

from __future__ import annotations

from functools import cache

from tilecore import dtypes as dt
from tilecore.dtypes import DType
from tilecore.ir.intrinsic import Intrinsic, LaneMap, Operand


def _a(lane: int, e: int) -> tuple[int, int]:
    g, t = lane // 4, lane % 4
    return g + 8 * ((e >> 1) & 1), 2 * t + (e & 1) + 8 * (e >> 2)


def _b(lane: int, e: int) -> tuple[int, int]:
    g, t = lane // 4, lane % 4
    return 2 * t + (e & 1) + 8 * (e >> 1), g


def _c(lane: int, e: int) -> tuple[int, int]:
    g, t = lane // 4, lane % 4
    return g + 8 * (e >> 1), 2 * t + (e & 1)


MMA_A = LaneMap.from_fn(16, 16, 32, 8, _a)
MMA_B = LaneMap.from_fn(16, 8, 32, 4, _b)
MMA_C = LaneMap.from_fn(16, 8, 32, 4, _c)

_PTX_TYPE = {"float16": "f16", "bfloat16": "bf16"}


@cache
def mma_m16n8k16(in_dtype: DType, acc_dtype: DType = dt.float32, c_map: LaneMap = MMA_C,
                 a_map: LaneMap = MMA_A, b_map: LaneMap = MMA_B) -> Intrinsic:
    """`mma.sync.aligned.m16n8k16.row.col.f32.<in>.<in>.f32` as data (maps overridable for tests)."""
    t = _PTX_TYPE[in_dtype.name]
    return Intrinsic(
        name=f"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32",
        kind="mma",
        shape=(16, 8, 16),
        operands=(
            Operand("D", "out", acc_dtype, "reg", c_map),
            Operand("A", "in", in_dtype, "reg", a_map),
            Operand("B", "in", in_dtype, "reg", b_map),
            Operand("C", "in", acc_dtype, "reg", c_map),
        ),
    )


@cache
def ldmatrix(count: int, trans: bool, dtype: DType) -> Intrinsic:
    """`ldmatrix.sync.aligned.m8n8.x<count>[.trans].shared.b16` as data."""
    if count not in (1, 2, 4):
        raise ValueError("ldmatrix loads 1, 2 or 4 matrices")

    def dst(lane: int, e: int) -> tuple[int, int]:
        m, r, c = e // 2, lane // 4, 2 * (lane % 4) + (e & 1)
        if trans:
            r, c = c, r
        return 8 * m + r, c

    def src(lane: int, e: int) -> tuple[int, int]:
        # lanes beyond the 8 * count addressed rows repeat (their addresses are ignored)
        return (lane % (8 * count)), 0

    return Intrinsic(
        name=f"ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16",
        kind="ldmatrix",
        shape=(count, 8, 8),
        operands=(
            Operand("dst", "out", dtype, "reg", LaneMap.from_fn(8 * count, 8, 32, 2 * count, dst)),
            Operand("src", "in", dtype, "shared", LaneMap.from_fn(8 * count, 8, 32, 1, src)),
        ),
    )


# ----------------------------------------------------------------------------- wgmma (sm_90a)
# PTX ISA "Register Fragments" for wgmma.mma_async.m64nNk16 / k32: the warpgroup's 128 threads
# are four warps; warp w owns rows 16w..16w+15 and, inside it, lane l = 4 * group + tig holds
# what mma.sync's m16n8 fragments hold. With w = l // 32, g = l % 32 // 4, t = l % 4:
# - D (64 x N, f32, N/2 per thread): element e is n block j = e // 4, q = e % 4:
#   row 16w + g + 8 * (q // 2), col 8j + 2t + q % 2;
# - A in registers, k16 (8 halves): row 16w + g + 8 * (e >> 1 & 1), col 2t + (e & 1) + 8 * (e >> 2);
# - A in registers, k32 fp8 (16 bytes): row 16w + g + 8 * (e >> 2 & 1), col 4t + (e & 3) + 16 * (e >> 3).

WGMMA_LANES = 128
WGMMA_M = 64
# n sizes the instruction accepts (multiples of 8 up to 256), the widest first
WGMMA_NS = tuple(range(256, 7, -8))
_WGMMA_TYPE = {"float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}


def wgmma_k(dtype: DType) -> int:
    """The instruction's K for an input dtype: 16 for 16-bit types, 32 for fp8."""
    return 32 if dtype.itemsize == 1 else 16


def _wg_d(n: int):
    def fn(lane: int, e: int) -> tuple[int, int]:
        w, g, t = lane // 32, lane % 32 // 4, lane % 4
        j, q = e // 4, e % 4
        return 16 * w + g + 8 * (q // 2), 8 * j + 2 * t + q % 2
    return LaneMap.from_fn(WGMMA_M, n, WGMMA_LANES, n // 2, fn)


def _wg_a(k: int) -> LaneMap:
    def fn16(lane: int, e: int) -> tuple[int, int]:
        w, g, t = lane // 32, lane % 32 // 4, lane % 4
        return 16 * w + g + 8 * ((e >> 1) & 1), 2 * t + (e & 1) + 8 * (e >> 2)

    def fn8(lane: int, e: int) -> tuple[int, int]:
        w, g, t = lane // 32, lane % 32 // 4, lane % 4
        return 16 * w + g + 8 * ((e >> 2) & 1), 4 * t + (e & 3) + 16 * (e >> 3)

    return LaneMap.from_fn(WGMMA_M, k, WGMMA_LANES, k // 2, fn16 if k == 16 else fn8)


@cache
def wgmma(n: int, in_dtype: DType, a_in_regs: bool = False, d_map: LaneMap | None = None) -> Intrinsic:
    """`wgmma.mma_async.sync.aligned.m64n<n>k<16|32>.f32.<in>.<in>` as data: A through a
    descriptor (or, for 16-bit types, from registers), B through a descriptor; the descriptors'
    fields are filled in by the lowering from the operands' shared layouts (`with_descs`)."""
    t = _WGMMA_TYPE[in_dtype.name]
    k = wgmma_k(in_dtype)
    dmap = d_map or _wg_d(n)
    a = (Operand("A", "in", in_dtype, "reg", _wg_a(k)) if a_in_regs
         else Operand("A", "in", in_dtype, "desc", None, shape=(WGMMA_M, k)))
    return Intrinsic(
        name=f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{t}.{t}",
        kind="wgmma",
        shape=(WGMMA_M, n, k),
        operands=(
            Operand("D", "out", dt.float32, "reg", dmap),
            a,
            Operand("B", "in", in_dtype, "desc", None, shape=(k, n)),
            Operand("C", "in", dt.float32, "reg", dmap),
        ),
        lanes=WGMMA_LANES,
    )
