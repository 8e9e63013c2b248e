"""The dtype mapping between tilecore and TVM TIR, and what each TVM target can hold.

Pure data (no `tvm` import), so the plugin can answer `tile_unsupported` cheaply.

Each tilecore dtype has a *storage* TIR dtype (what buffers hold) and a *compute* TIR dtype
(what expressions hold; `tilecore.semantics`' compute representation):

- float16 and bfloat16 are stored as TVM's own ``float16`` / ``bfloat16`` (TVM's casts from
  float32 round to nearest even, bit-exact with ml_dtypes including NaN, inf and -0: tested);
- the float8 types are stored as their bits in ``uint8`` and converted by tilecore's own codec
  (`exprs.fp8_encode` / `fp8_decode`): TVM 0.27's float8 casts turn NaN, inf and overflowing
  values into finite numbers and lose -0 (measured against ml_dtypes), which the oracle does not;
- narrow floats compute in float32 and are rounded back after every operation; float32 and
  float64 compute natively;
- integers compute at C's compute width (`semantics.int_compute_dtype`): int32 for the ints
  under 32 bits, the dtype itself for int32, uint32 and int64; bool is stored as ``uint8``
  (NumPy's one-byte bools viewed as bytes) and computes as TIR ``bool``.
"""

from __future__ import annotations

from tilecore import semantics as S
from tilecore.dtypes import DType

FP8 = {"float8_e4m3fn", "float8_e5m2"}


def storage(d: DType) -> str:
    """The TIR dtype of buffers holding `d`."""
    if d.name in FP8 or d.is_bool:
        return "uint8"
    return d.name


def compute(d: DType) -> str:
    """The TIR dtype expressions of `d` compute in."""
    if d.is_bool:
        return "bool"
    if d.is_int:
        return S.int_compute_dtype(d).name
    if d.is_narrow_float:
        return "float32"
    return d.name


# What each TVM target kind can hold in buffers and compute in. WGSL has f32, f16 (with the
# shader-f16 feature), i32, u32 and bool; no 64-bit types, no 8/16-bit integers in storage.
WGSL_DTYPES = frozenset({"float32", "float16", "int32", "uint32"})


def target_dtypes(kind: str) -> frozenset | None:
    """The tilecore dtype names a TVM target supports (None: every dtype)."""
    if kind == "webgpu":
        return WGSL_DTYPES
    return None
