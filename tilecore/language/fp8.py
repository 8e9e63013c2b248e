"""`tilecore.language.fp8`: the platform's 8-bit float types (TileLang's `language.fp8` names).

tilecore has the OCP formats only (float8_e4m3fn, float8_e5m2), which every target it builds
for uses; AMD's FNUZ variants are not provided, so the answer does not depend on the device."""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileTypeError

_FORMATS = {"e4m3": dt.float8_e4m3fn, "e5m2": dt.float8_e5m2}


def determine_fp8_type(fp8_format: str = "e4m3") -> dt.DType:
    """The float8 DType of `fp8_format` ("e4m3" or "e5m2")."""
    if fp8_format not in _FORMATS:
        raise TileTypeError(f"unsupported FP8 format {fp8_format!r}", hint="use 'e4m3' or 'e5m2'")
    return _FORMATS[fp8_format]


def determine_torch_fp8_type(fp8_format: str = "e4m3"):
    """The torch dtype of `determine_fp8_type(fp8_format)`."""
    return dt.torch_dtype(determine_fp8_type(fp8_format))


__all__ = ["determine_fp8_type", "determine_torch_fp8_type"]
