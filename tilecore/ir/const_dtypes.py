"""Dtypes that are build-time constants only (`tilecore.dtypes.CONST_ONLY`: TileLang's
`T.uint64`): a kernel whose IR holds a value, buffer or parameter of one is refused when it is
compiled, at the statement that holds it. Integers compute as int64 on every target's oracle
(tilecore.semantics), which cannot hold a uint64 above 2**63 - 1: comparisons, division, `>>`
and conversions of such values would be wrong, so none is provided."""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileTypeError
from .visit import walk


def check(func) -> None:
    """Raise a TileTypeError naming the first CONST_ONLY-typed parameter, buffer or value."""
    for p in func.params:
        if getattr(p, "dtype", None) in dt.CONST_ONLY:
            raise _error(getattr(p, "name", "a parameter"), p.dtype, func.loc)
    loc = func.loc
    for n in walk(func.body):
        loc = getattr(n, "loc", None) or loc  # the nearest statement before `n` (pre-order)
        d = getattr(n, "dtype", None)
        if isinstance(d, dt.DType) and d in dt.CONST_ONLY:
            raise _error(getattr(n, "name", None) or "a value", d, loc)


def _error(what: str, d, loc) -> TileTypeError:
    return TileTypeError(f"{what} is {d} in a kernel: {d} is a build-time constant type in "
                         "tilecore (integers compute as int64, which holds no uint64 above "
                         "2**63 - 1)", loc,
                         hint="use int64 (or uint32) kernel values; T.uint64(c) is fine as a "
                              "T.attr value or in build-time Python")
