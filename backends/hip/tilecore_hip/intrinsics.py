"""AMD matrix instructions as data: the lane maps of MFMA (CDNA, wave64) and WMMA (RDNA3, wave32).

Written once here; the lowering derives index expressions from these tables, the renderer
packs registers in their element order, and `emu:hip:<arch>` executes the instructions from the
same tables, so none of the three can disagree.

Layouts (AMD CDNA3 ISA "Matrix fused-multiply-add" operand layouts, as tabulated by AMD's
matrix instruction calculator; `l` is the lane, `e` the element within the lane's registers):

- `v_mfma_f32_32x32x8f16` / `..._32x32x8bf16_1k` (one block, A 32x8, B 8x32, D 32x32): each lane
  holds 4 consecutive k of one row of A and of one column of B:
  A: row = l % 32, k = 4 * (l // 32) + e;  B: k = 4 * (l // 32) + e, col = l % 32;
  D (16 floats): row = 8 * (e // 4) + 4 * (l // 32) + e % 4, col = l % 32.
- `v_mfma_f32_16x16x16f16` / `..._16x16x16bf16_1k` (A 16x16, B 16x16, D 16x16):
  A: row = l % 16, k = 4 * (l // 16) + e;  B: k = 4 * (l // 16) + e, col = l % 16;
  D (4 floats): row = 4 * (l // 16) + e, col = l % 16.
- `v_wmma_f32_16x16x16_{f16,bf16}` wave32 (RDNA3 ISA "WMMA"): A and B are replicated across
  the two half-waves: A: row = l % 16, k = e (16 halves); B: k = e, col = l % 16;
  D (8 floats): row = 2 * e + l // 16, col = l % 16.

`Intrinsic.name` is the gfx90a / gfx11 mnemonic; the clang builtin is `builtin_name(intr)`
(gfx942 prints some MFMA mnemonics with an underscore, `v_mfma_f32_32x32x8_f16`: same opcode).
"""

from __future__ import annotations

from functools import cache

from tilecore import dtypes as dt
from tilecore.dtypes import DType
from tilecore.ir.intrinsic import Intrinsic, LaneMap, Operand

WAVE64, WAVE32 = 64, 32
# (m, n, k) -> the lane maps of A, B and D (as `fn(lane, elem) -> (row, col)`), elements per lane.
_MFMA_MAPS = {
    (32, 32, 8): (lambda l, e: (l % 32, 4 * (l // 32) + e),
                  lambda l, e: (4 * (l // 32) + e, l % 32),
                  lambda l, e: (8 * (e // 4) + 4 * (l // 32) + e % 4, l % 32), 4, 16),
    (16, 16, 16): (lambda l, e: (l % 16, 4 * (l // 16) + e),
                   lambda l, e: (4 * (l // 16) + e, l % 16),
                   lambda l, e: (4 * (l // 16) + e, l % 16), 4, 4),
}
MFMA_SHAPES = tuple(_MFMA_MAPS)
WMMA_SHAPE = (16, 16, 16)
_SUFFIX = {"float16": "f16", "bfloat16": "bf16"}


def mfma_maps(shape: tuple) -> dict[str, LaneMap]:
    """The A, B and C/D lane maps of the wave64 MFMA of `shape` (m, n, k)."""
    fa, fb, fd, ab_elems, d_elems = _MFMA_MAPS[shape]
    m, n, k = shape
    return {"A": LaneMap.from_fn(m, k, WAVE64, ab_elems, fa),
            "B": LaneMap.from_fn(k, n, WAVE64, ab_elems, fb),
            "C": LaneMap.from_fn(m, n, WAVE64, d_elems, fd)}


def wmma_maps() -> dict[str, LaneMap]:
    """The A, B and C/D lane maps of the wave32 gfx11 WMMA 16x16x16 (A and B replicated)."""
    return {"A": LaneMap.from_fn(16, 16, WAVE32, 16, lambda l, e: (l % 16, e)),
            "B": LaneMap.from_fn(16, 16, WAVE32, 16, lambda l, e: (e, l % 16)),
            "C": LaneMap.from_fn(16, 16, WAVE32, 8, lambda l, e: (2 * e + l // 16, l % 16))}


def _mma(name: str, shape: tuple, in_dtype: DType, maps: dict, lanes: int) -> Intrinsic:
    return Intrinsic(
        name=name, kind="mma", shape=shape, lanes=lanes,
        operands=(Operand("D", "out", dt.float32, "reg", maps["C"]),
                  Operand("A", "in", in_dtype, "reg", maps["A"]),
                  Operand("B", "in", in_dtype, "reg", maps["B"]),
                  Operand("C", "in", dt.float32, "reg", maps["C"])))


def mfma(shape: tuple, in_dtype: DType, maps: dict | None = None) -> Intrinsic:
    """`v_mfma_f32_<m>x<n>x<k>f16` or `..bf16_1k` (f32 accumulate) as data; `maps` overrides
    operand lane maps (mutation tests)."""
    m, n, k = shape
    suffix = "f16" if in_dtype.name == "float16" else "bf16_1k"
    return _mma(f"v_mfma_f32_{m}x{n}x{k}{suffix}", shape, in_dtype,
                {**mfma_maps(shape), **(maps or {})}, WAVE64)


def wmma(in_dtype: DType, maps: dict | None = None) -> Intrinsic:
    """`v_wmma_f32_16x16x16_{f16,bf16}` in wave32 mode (gfx11) as data."""
    return _mma(f"v_wmma_f32_16x16x16_{_SUFFIX[in_dtype.name]}", WMMA_SHAPE, in_dtype,
                {**wmma_maps(), **(maps or {})}, WAVE32)


mfma_cached = cache(mfma)
wmma_cached = cache(wmma)


def builtin_name(intr: Intrinsic) -> str:
    """The clang builtin computing `intr` (`__builtin_amdgcn_mfma_f32_32x32x8f16`, ..._w32)."""
    base = "__builtin_amdgcn_" + intr.name.removeprefix("v_")
    return base + "_w32" if intr.name.startswith("v_wmma") else base


def builtin_tail(intr: Intrinsic) -> str:
    """Trailing immediate arguments of the builtin: MFMA's cbsz, abid, blgp (no broadcast)."""
    return ", 0, 0, 0" if intr.name.startswith("v_mfma") else ""
