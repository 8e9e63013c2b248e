"""Small T.* names of TileLang's long tail, each defined by tilecore's existing operations.

- `T.dtype(x)`: a dtype object (compares with strings, `.as_torch()`);
- `T.clamp(x, lo, hi)`: min(max(x, lo), hi);
- `T.truncdiv` / `T.truncmod`: C-style integer division and remainder (what `//` and `%` mean
  on kernel integers in tilecore; `T.floordiv` / `T.floormod` are the flooring ones);
- `T.Cast(dtype, x)`: TVM's argument order for a cast;
- `T.Ramp(base, 1, lanes)` as a subscript: the slice `base:base + lanes` (TVM's vector index),
  so `B[T.Ramp(i, 1, 4)] = A[T.Ramp(j, 1, 4)]` is a copy of four elements;
- `T.annotate_safe_value({buf: v})`: the value TileLang's safe-memory pass gives loads outside
  a global tensor. tilecore's `T.copy` zero-fills outside a tensor and an element load outside
  one reads 0 (tilecore.passes.safe_memory), so v == 0 is what tilecore does already; any other
  value raises.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileTypeError
from ..ir.expr import Expr, as_expr, binop, cast
from .builder import builtin


def _value(x):
    return x.as_expr() if hasattr(x, "as_expr") and not isinstance(x, Expr) else x


@builtin
def dtype(x) -> dt.DType:
    """`T.dtype("float16")`: the DType of a spelling (string, torch or NumPy dtype)."""
    return dt.as_dtype(x)


@builtin
def clamp(x, lo, hi):
    """x limited to [lo, hi] (lo <= hi); on Python numbers it computes now."""
    x, lo, hi = _value(x), _value(lo), _value(hi)
    if not any(isinstance(v, Expr) for v in (x, lo, hi)):
        return min(max(x, lo), hi)
    ex = as_expr(x)
    return binop("min", binop("max", ex, lo), hi)


def _ints(a, b, what: str):
    a, b = _value(a), _value(b)
    ea = as_expr(a, b.dtype if isinstance(b, Expr) else None)
    eb = as_expr(b, ea.dtype)
    if not (ea.dtype.is_int and eb.dtype.is_int):
        raise TileTypeError(f"T.{what} takes integers, got {ea.dtype} and {eb.dtype}",
                            hint="use / for floats")
    return a, b


@builtin
def truncdiv(a, b):
    """Integer division rounding toward zero (C's `/`)."""
    a, b = _ints(a, b, "truncdiv")
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return binop("div", a, b)


@builtin
def truncmod(a, b):
    """The remainder of `T.truncdiv` (sign of the dividend, C's `%`)."""
    a, b = _ints(a, b, "truncmod")
    if isinstance(a, int) and isinstance(b, int):
        return a - truncdiv(a, b) * b
    return binop("mod", a, b)


@builtin
def alloc_global(shape, dtype):
    """`T.alloc_global(shape, dtype)` before the kernels of a function: global scratch that its
    kernels share (split-KV partial results). It becomes a hidden parameter the call allocates
    (zeroed) and does not return (PrimFunc attr `scratch`)."""
    from ..errors import TileSyntaxError
    from ..ir.buffer import Buffer
    from .builder import current
    from .ops import _shape

    b = current()
    if b.kernel is not None:
        raise TileSyntaxError("T.alloc_global must come before `with T.Kernel(...)`, at the top "
                              "of the function", b.loc, hint="allocate shared or fragment "
                              "buffers inside a kernel with T.alloc_shared / T.alloc_fragment")
    name = b.unique_name(b.pending_name() or "global_scratch")
    buf = Buffer(name, _shape(shape, f"T.alloc_global {name}"), dt.as_dtype(dtype), "global")
    b.names.add(name)
    b.scratch.append(buf)
    return buf


def with_scratch(params: tuple, signature: tuple, attrs: tuple, scratch: list):
    """(params, attrs) of a PrimFunc with `scratch` appended as hidden parameters: `signature`
    (what a call passes and returns) is recorded so the Kernel leaves them out."""
    if not scratch:
        return params, attrs
    attrs = tuple((k, v) for k, v in attrs if k != "signature")
    return (tuple(params) + tuple(scratch),
            attrs + (("signature", tuple(signature)), ("scratch", tuple(scratch))))


@builtin
def Cast(dtype, value):  # noqa: N802 - TVM's spelling
    """`T.Cast(dtype, x)`: x converted to dtype."""
    return cast(_value(value), dt.as_dtype(dtype))


__all__ = ["dtype", "clamp", "truncdiv", "truncmod", "Cast", "alloc_global", "with_scratch"]


_SCOPES = {"global": "global", "shared": "shared", "shared.dyn": "shared",
           "local.fragment": "fragment", "local": "local"}


@builtin
def alloc_buffer(shape, dtype, scope="global"):
    """TVM's `T.alloc_buffer(shape, dtype, scope=...)`: "global" (the default) is
    `T.alloc_global` (before the kernels), "shared" / "shared.dyn" `T.alloc_shared`,
    "local.fragment" `T.alloc_fragment`, "local" `T.alloc_local`."""
    from ..errors import TileTypeError
    from . import ops

    kind = _SCOPES.get(scope)
    if kind is None:
        raise TileTypeError(f"T.alloc_buffer scope {scope!r} is not one of {sorted(_SCOPES)}",
                            hint='use scope="global" (before the kernel), "shared", '
                                 '"local.fragment" or "local"')
    if kind == "global":
        return alloc_global(shape, dtype)
    return {"shared": ops.alloc_shared, "fragment": ops.alloc_fragment,
            "local": ops.alloc_local}[kind](shape, dtype)


@builtin
def Ramp(base, stride, lanes):  # noqa: N802 - TVM's spelling
    """TVM's vector index `base, base + stride, ...` (`lanes` of them) used as a subscript:
    with stride 1 it is the slice `base:base + lanes` (a region: copies, fills, tile ops)."""
    from ..errors import TileShapeError
    from ..ir.expr import const_int
    from .builder import current
    from .refs import SliceItem

    n = const_int(as_expr(lanes)) if not isinstance(lanes, int) else lanes
    if n is None or n < 1:
        raise TileShapeError(f"T.Ramp lanes must be a positive compile-time int, got {lanes!r}",
                             current().loc, hint="give the vector width as a constant")
    if (stride if isinstance(stride, int) else const_int(as_expr(stride))) != 1:
        raise TileShapeError(f"T.Ramp with stride {stride!r} is not provided (only stride 1, a slice)",
                             current().loc, hint="index the elements in a T.Parallel loop")
    return SliceItem(base, binop("add", as_expr(base), n))


@builtin
def annotate_safe_value(safe_value_map: dict) -> None:
    """TileLang's `{buffer: value}` for out-of-bounds loads (module docstring): 0 is accepted
    (tilecore's zero-filled edges), any other value is a located TileTypeError."""
    from ..errors import TileShapeError
    from ..ir.buffer import Buffer
    from ..ir.expr import Const
    from .builder import current

    if not isinstance(safe_value_map, dict):
        raise TileTypeError("T.annotate_safe_value takes a dict {buffer: value}", current().loc,
                            hint="write T.annotate_safe_value({A: 0})")
    for buf, value in safe_value_map.items():
        if not isinstance(buf, Buffer):
            raise TileTypeError(f"T.annotate_safe_value key {buf!r} is not a buffer", current().loc,
                                hint="key the dict by the kernel's tensors")
        v = as_expr(value)
        if not (isinstance(v, Const) and v.value == 0):
            raise TileShapeError(
                f"T.annotate_safe_value({buf.name}: {value!r}) is not provided: tilecore's T.copy "
                "fills elements outside a tensor with 0 (and an element load outside one reads 0)",
                current().loc, hint="pass 0, or replace the edge values after the copy "
                "(T.if_then_else on the index) to get another one")
