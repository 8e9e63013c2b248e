"""Call-time checks of a kernel's arguments that depend on the program: each value bound to a
symbolic dimension or scalar fits its dtype, and every grid dimension that depends on them is
at least 1. Apart from `static_checks` (the compile-time checks) so that loading and calling a
kernel from the compile cache does not import those."""

from __future__ import annotations

from .expr import const_int
from .module import PrimFunc
from .visit import walk


def check_call(func: PrimFunc, dyn: dict, where) -> None:
    """Call-time checks of the values bound to symbolic dimensions and scalar parameters
    (`dyn`: name -> int): each fits its variable's dtype (the width the generated code indexes
    and passes it with), and every grid dimension that depends on them is >= 1. `where()` gives
    the caller's location, computed only when an error is raised."""
    from .. import dtypes as dt
    from ..codegen.spec import host_int
    from ..errors import TileCallError, TileInternalError
    from .printer import print_node
    from .stmt import KernelLaunch as _Launch

    for v in func.dyn_vars:
        x = dyn.get(v.name)
        if x is not None and not dt.min_value(v.dtype) <= x <= dt.max_value(v.dtype):
            raise TileCallError(
                f"{v.name} = {x} does not fit in {v.dtype}, the dtype of T.dynamic({v.name!r})",
                where(), hint=f"declare it wider: T.dynamic({v.name!r}, 'int64')")
    launch = next((n for n in walk(func.body) if isinstance(n, _Launch)), None)
    if launch is None:
        return
    for i, g in enumerate(launch.grid):
        if const_int(g) is not None:
            continue  # constants were checked at compile time
        try:
            n = host_int(g, dyn)
        except TileInternalError:
            continue
        if n <= 0:
            shown = ", ".join(f"{k}={x}" for k, x in dyn.items())
            raise TileCallError(
                f"grid dimension {i} of {func.name} is {print_node(g)} = {n} for {shown}; the kernel "
                "would run no block and leave its outputs untouched", where(),
                hint="check the arguments' shapes, or clamp the grid: T.max(1, ...)")
