"""The dtype table: the one place that knows every scalar type tilecore supports."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .errors import TileNameError


@dataclass(frozen=True, eq=False)
class DType(str):
    """A scalar type: `kind` is 'float', 'int', 'uint' or 'bool'; `bits` its storage width.

    A DType is also the `str` of its canonical name, as TileLang's dtypes (TVM's `DataType` is
    a str) are: TileLang code passes them where Python wants a string (`getattr(torch, dtype)`,
    `dtype.startswith("float")`, dict keys next to spellings)."""

    name: str
    kind: str
    bits: int

    def __new__(cls, name: str, kind: str, bits: int):
        """The str value is the canonical name (the dataclass __init__ then sets the fields)."""
        return str.__new__(cls, name)

    def __getnewargs__(self):
        """copy / pickle rebuild through __new__'s three fields, not str's one value."""
        return (self.name, self.kind, self.bits)

    @property
    def np(self) -> np.dtype:
        """The NumPy dtype storing this type (ml_dtypes for bfloat16 and float8)."""
        return _NUMPY[self.name]

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_narrow_float(self) -> bool:
        """Floats NumPy cannot compute in natively; the oracle computes them in float32."""
        return self.kind == "float" and self.bits < 32

    def __call__(self, value):
        """`T.float32(x)`: a cast (or a typed constant) inside a kernel."""
        from .ir.expr import cast

        return cast(value, self)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"T.{self.name}"

    def __eq__(self, other) -> bool:
        """A DType equals itself and its spellings: `T.float16 == "float16"` (TileLang's dtype
        objects compare with strings; `"half"` and torch.float16 are equal too)."""
        if self is other:  # dtypes are module singletons: the common case is one object
            return True
        if isinstance(other, DType):
            return self.name == other.name and self.kind == other.kind and self.bits == other.bits
        if isinstance(other, str) or type(other).__module__ in ("torch", "numpy"):
            try:
                return as_dtype(other).name == self.name
            except TileNameError:
                return False
        return NotImplemented

    def __ne__(self, other) -> bool:
        """The negation of __eq__ (str's own __ne__ would compare the raw names)."""
        if self is other:
            return False
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self.name)  # equal to the canonical name's hash, as equality allows

    def as_torch(self):
        """The torch dtype (TileLang's `T.dtype(x).as_torch()`)."""
        return torch_dtype(self)


float16 = DType("float16", "float", 16)
bfloat16 = DType("bfloat16", "float", 16)
float32 = DType("float32", "float", 32)
float64 = DType("float64", "float", 64)
float8_e4m3fn = DType("float8_e4m3fn", "float", 8)
float8_e5m2 = DType("float8_e5m2", "float", 8)
int8 = DType("int8", "int", 8)
int16 = DType("int16", "int", 16)
int32 = DType("int32", "int", 32)
int64 = DType("int64", "int", 64)
uint8 = DType("uint8", "uint", 8)
uint16 = DType("uint16", "uint", 16)
uint32 = DType("uint32", "uint", 32)
bool_ = DType("bool", "bool", 8)

# Sub-byte integers (TileLang's `T.int4`, and `uint4`: `T.dtype("uint4")`): one value per
# byte in a kernel's storage on the targets that run them, two per byte (low nibble first) in
# host tensors; see tilecore.subbyte. Not in ALL: ALL is the set every backend runs.
int4 = DType("int4", "int", 4)
uint4 = DType("uint4", "uint", 4)
# TileLang's `T.float4_e2m1fn` (OCP MX FP4: 1 sign, 2 exponent, 1 mantissa bits; finite only,
# +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}): a sub-byte type like int4 (the same storage rules). A
# conversion to it rounds to nearest even and saturates to +-6 (ml_dtypes; CUDA's satfinite).
float4_e2m1fn = DType("float4_e2m1fn", "float", 4)

# TileLang's `T.float4_e2m1_unpacked`: not a value type but a shared-memory storage tag, FP4
# values one per 8-bit slot (the layout Blackwell's f8f6f4 MMAs read), filled from a packed
# float4_e2m1fn global tensor. tilecore's kernels already store every sub-byte value one per
# byte, so a shared tile with the tag is a float4_e2m1fn tile (`shared_dtype`); anywhere else
# `as_dtype` refuses it, as TileLang does.
class StorageTag(str):
    """TileLang's FP4 shared-memory storage tag (`T.float4_e2m1_unpacked`): a shared tile of FP4
    values one per byte, filled by `T.copy` from a packed float4_e2m1fn tensor; tilecore stores
    it as a float4_e2m1fn tile. Only `T.alloc_shared` takes it."""


FLOAT4_UNPACKED = StorageTag("float4_e2m1_unpacked")
STORAGE_TAGS: dict[str, DType] = {FLOAT4_UNPACKED: float4_e2m1fn}

# TileLang's `T.uint64`: build-time constants (`T.uint64(0)`, the opaque handle TVM's
# `reduce_scope` attribute takes) and host tensors; a kernel value of it is refused when
# compiled (tilecore.ir.const_dtypes): integers compute as int64 here, which holds no uint64
# above 2**63 - 1. Not in ALL.
uint64 = DType("uint64", "uint", 64)
CONST_ONLY: tuple[DType, ...] = (uint64,)

ALL: tuple[DType, ...] = (
    float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2,
    int8, int16, int32, int64, uint8, uint16, uint32, bool_,
)
SUB_BYTE: tuple[DType, ...] = (int4, uint4, float4_e2m1fn)
BY_NAME: dict[str, DType] = {d.name: d for d in ALL + SUB_BYTE + CONST_ONLY}

_NUMPY: dict[str, np.dtype] = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
    "int4": np.dtype(ml_dtypes.int4),
    "uint4": np.dtype(ml_dtypes.uint4),
    "float4_e2m1fn": np.dtype(ml_dtypes.float4_e2m1fn),
}

# Spellings accepted besides the canonical names (TileLang / TVM habits).
ALIASES: dict[str, DType] = {
    "float": float32, "half": float16, "double": float64, "fp16": float16, "fp32": float32,
    "bf16": bfloat16, "fp64": float64, "int": int32, "float8_e4m3": float8_e4m3fn,
    "e4m3_float8": float8_e4m3fn, "e5m2_float8": float8_e5m2, "fp8_e4m3": float8_e4m3fn,
    "fp8_e5m2": float8_e5m2, "float4_e2m1": float4_e2m1fn, "fp4_e2m1": float4_e2m1fn,
    "bool_": bool_, "uint": uint32, "long": int64, "short": int16,
    # TileLang's TF32 (`T.tfloat32`, the string "tfloat32"): float32 storage. tilecore computes
    # gemms on it at float32 precision, not TF32's 10 mantissa bits (docs/tilelang.md)
    "tfloat32": float32, "tf32": float32,
}

_TORCH_NAMES = {
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "int8": "int8",
    "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8", "uint16": "uint16",
    "uint32": "uint32", "uint64": "uint64", "bool": "bool",
    "int4": "int8",  # TileLang's as_torch(): int8 storage of packed pairs
    "uint4": "uint8",  # packed pairs as uint8 (TileLang's as_torch() raises for uint4)
    "float4_e2m1fn": "float4_e2m1fn_x2",  # TileLang's as_torch(): torch's packed pair type
}


def as_dtype(value) -> DType:
    """Turn a user's dtype spelling (DType, str, NumPy or torch dtype) into a DType.

    Raises TileNameError listing the valid names for anything else.
    """
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        if value in BY_NAME:
            return BY_NAME[value]
        if value in ALIASES:
            return ALIASES[value]
    else:
        try:
            npd = np.dtype(value)
        except TypeError:
            npd = None
        if npd is not None:
            for d in ALL + SUB_BYTE + CONST_ONLY:
                if _NUMPY[d.name] == npd:
                    return d
        tname = str(value)
        if tname.startswith("torch."):
            short = tname[len("torch."):]
            for name, tn in _TORCH_NAMES.items():
                if tn == short:
                    return BY_NAME[name]
    if isinstance(value, str) and value in STORAGE_TAGS:
        raise TileNameError(
            f"{value} is TileLang's shared-memory storage tag for FP4 (one value per byte), not a "
            "dtype of tensors, fragments, locals or values",
            hint=f"allocate it with T.alloc_shared(shape, T.{value}) and fill it with T.copy from a "
                 f"{STORAGE_TAGS[value].name} tensor; use T.{STORAGE_TAGS[value].name} everywhere else")
    raise TileNameError(
        f"unknown dtype {value!r}",
        hint="use one of " + ", ".join(d.name for d in ALL),
    )


def shared_dtype(value) -> DType:
    """The dtype of a shared allocation spelled `value`: `as_dtype`, and TileLang's storage tags
    (`STORAGE_TAGS`) as the type they store."""
    if isinstance(value, str) and not isinstance(value, DType) and value in STORAGE_TAGS:
        return STORAGE_TAGS[value]
    return as_dtype(value)


def from_numpy(npd: np.dtype) -> DType:
    """The DType stored as NumPy dtype `npd`."""
    return as_dtype(npd)


def torch_name(d: DType) -> str:
    """The attribute of `torch` naming `d`'s torch dtype (no torch import)."""
    return _TORCH_NAMES[d.name]


def torch_dtype(d: DType):
    """The torch dtype for `d` (imports torch: call only when a tensor is at hand)."""
    import torch

    return getattr(torch, _TORCH_NAMES[d.name])


def promote(a: DType, b: DType) -> DType:
    """The result type of a binary operation (TVM's rules: float beats int, wider beats narrower)."""
    if a == b:
        return a
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    if a.is_float:
        return float32  # bfloat16 with float16: neither holds the other
    return a if a.kind == "int" else b


@functools.cache
def _limits(d: DType) -> tuple:
    """(min, max) finite values of `d`; cached because constant folding asks for them on every
    folded integer (building an `iinfo` each time was measurable)."""
    if d.is_float:
        info = ml_dtypes.finfo(d.np)
        return float(info.min), float(info.max)
    if d.is_bool:
        return False, True
    info = ml_dtypes.iinfo(d.np)
    return int(info.min), int(info.max)


def max_value(d: DType):
    """The largest finite value of `d` as a Python number."""
    return _limits(d)[1]


def min_value(d: DType):
    """The most negative finite value of `d` as a Python number."""
    return _limits(d)[0]


def has_infinity(d: DType) -> bool:
    """float8_e4m3fn and float4_e2m1fn have no infinity; every other float does."""
    return d.is_float and d.name not in ("float8_e4m3fn", "float4_e2m1fn")
