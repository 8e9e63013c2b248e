"""The names of TileLang's bundled TVM that TileLang programs use, over tilecore's IR.

TileLang ships a TVM fork, and kernels reach into it (`from tilelang import tvm`,
`from tvm import tirx`, `from tvm import DataType`) for dtype facts and a few expression
builders. tilecore has no TVM inside (its `tvm` *backend* uses Apache TVM as a target); this
module is the port's replacement, so the import swap is `tvm` -> `tilecore.tvm`:

- `DataType(dtype)`: `.bits`, `.lanes` (1), `.dtype`, comparisons with spellings;
- `tirx.const(value, dtype)`, `tirx.Cast(dtype, value)`, `tirx.Select(cond, a, b)` /
  `tirx.if_then_else`, `tirx.reinterpret(dtype, value)` (TVM's argument order; see
  `tilecore.language.bitcast`), `tirx.max_value` / `min_value`, and `tirx.PrimExpr` (the
  expression class, for annotations and `isinstance`).

Anything else of TVM raises AttributeError naming this module.
"""

from __future__ import annotations

import types

from . import dtypes as dt
from .ir.expr import Expr, cast, select


class DataType:
    """TVM's `DataType(str)`: a scalar type's facts (tilecore's dtypes are scalars: lanes 1)."""

    def __init__(self, dtype):
        self.dtype = dt.as_dtype(str(dtype) if not isinstance(dtype, dt.DType) else dtype)
        self.bits = self.dtype.bits
        self.lanes = 1

    def __str__(self) -> str:
        return self.dtype.name

    def __repr__(self) -> str:
        return f"DataType({self.dtype.name!r})"

    def __eq__(self, other) -> bool:
        other = other.dtype if isinstance(other, DataType) else other
        return self.dtype == other

    def __hash__(self) -> int:
        return hash(self.dtype)


def _const(value, dtype="int32"):
    """`tirx.const(value, dtype)`: a typed constant."""
    return cast(value, dtype)


def _cast(dtype, value):
    """`tirx.Cast(dtype, value)` (TVM's argument order)."""
    return cast(value, dtype)


def _reinterpret(dtype, value):
    """`tirx.reinterpret(dtype, value)` (TVM's argument order)."""
    from .language.bitcast import reinterpret

    return reinterpret(value, dtype)


def _max_value(dtype):
    from .language.ops import max_value

    return max_value(dtype)


def _min_value(dtype):
    from .language.ops import min_value

    return min_value(dtype)


tirx = types.SimpleNamespace(
    PrimExpr=Expr, const=_const, Cast=_cast, Select=select, if_then_else=select,
    reinterpret=_reinterpret, max_value=_max_value, min_value=_min_value)
tirx.__doc__ = "TVM's `tirx` names a TileLang kernel uses (see tilecore.tvm)."
tir = tirx  # the older spelling


def __getattr__(name: str):
    raise AttributeError(f"tilecore.tvm (TileLang's bundled TVM names) has no {name!r}: it "
                         "provides DataType and tirx.const/Cast/Select/reinterpret/PrimExpr")


__all__ = ["DataType", "tirx", "tir"]
