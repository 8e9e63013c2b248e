"""`tilecore.language.dtypes`: TileLang's `tilelang.language.dtypes` names over tilecore's one
dtype table (`tilecore.dtypes`); nothing here is a second table.

- the dtype names (`float16`, `int4`, `uint4`, ...), as in `tilecore.language`;
- `dtype(x)`: the DType of a spelling (str, torch or NumPy dtype, DType), as `T.dtype`;
- `get_tvm_dtype(x)`: the same (TileLang's name for it);
- `_TORCH_DTYPE_TO_STR` / `_STR_TO_TORCH_DTYPE`: torch dtype <-> canonical name, derived from
  the table (TileLang's example helpers read them); built on first access so that importing
  this module does not import torch.
"""

from __future__ import annotations

from .. import dtypes as _dt
from ..dtypes import (  # noqa: F401 - re-exported: TileLang's module has the dtype names
    ALL,
    DType,
    bfloat16,
    bool_,
    float4_e2m1fn,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    float64,
    int4,
    int8,
    int16,
    int32,
    int64,
    uint4,
    uint8,
    uint16,
    uint32,
    uint64,
)


def dtype(value) -> DType:
    """The DType of `value` (a DType, a name or alias, a torch or NumPy dtype)."""
    return _dt.as_dtype(value)


get_tvm_dtype = dtype


def _torch_table() -> dict:
    """torch dtype -> canonical name for every table dtype torch has."""
    import torch

    out = {}
    for d in ALL:
        t = getattr(torch, _dt.torch_name(d), None)
        if t is not None:
            out[t] = d.name
    return out


def __getattr__(name: str):
    """The torch tables, computed when first read (they need torch)."""
    if name == "_TORCH_DTYPE_TO_STR":
        return _torch_table()
    if name == "_STR_TO_TORCH_DTYPE":
        return {v: k for k, v in _torch_table().items()}
    raise AttributeError(f"module 'tilecore.language.dtypes' has no attribute {name!r}")
