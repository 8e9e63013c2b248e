"""`T.floordiv`, `T.floormod` and the bit operations (`T.shift_left`, `T.bitwise_and`, ...).

Their meaning is defined once, in `tilecore.semantics` (floor division and remainder; bit
operations at the C compute width, shift counts in [0, width)). On Python ints they compute now;
on kernel values they build the IR's integer operations (`tilecore.ir.expr.INT_OPS`). Floor
division of floats is `floor(a / b)` and its remainder `a - floor(a / b) * b`, as in TIR.
"""

from __future__ import annotations

from .. import dtypes as dt
from .. import semantics as S
from ..errors import TileRuntimeError, TileTypeError
from ..ir.expr import Expr, as_expr, binop, bitnot, bitwise, unary
from .builder import builtin


def _value(x):
    """A Ref (buffer element) as its Load; everything else unchanged."""
    return x.as_expr() if hasattr(x, "as_expr") and not isinstance(x, Expr) else x


def _py(*xs) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) for x in xs)


def _pair(a, b):
    a, b = _value(a), _value(b)
    ea = as_expr(a, b.dtype if isinstance(b, Expr) else None)
    eb = as_expr(b, ea.dtype)
    return ea, eb


def _nonzero(b: int) -> None:
    if b == 0:
        raise TileRuntimeError("division by a constant zero", hint="the divisor must not be 0")


@builtin
def floordiv(a, b):
    """`a / b` rounded toward negative infinity (TIR's floordiv; tilecore's `//` truncates like C)."""
    a, b = _value(a), _value(b)
    if _py(a, b):
        _nonzero(b)
        return S.floor_div(a, b)
    ea, eb = _pair(a, b)
    if ea.dtype.is_float or eb.dtype.is_float:
        return unary("floor", binop("div", ea, eb))
    return binop("floordiv", ea, eb)


@builtin
def floormod(a, b):
    """The remainder of `floordiv`: it has the divisor's sign (tilecore's `%` is C's)."""
    a, b = _value(a), _value(b)
    if _py(a, b):
        _nonzero(b)
        return S.floor_mod(a, b)
    ea, eb = _pair(a, b)
    if ea.dtype.is_float or eb.dtype.is_float:
        q = unary("floor", binop("div", ea, eb))
        return binop("sub", ea, binop("mul", q, eb))
    return binop("floormod", ea, eb)


def _bit(op: str, doc: str):
    def fn(a, b):
        a, b = _value(a), _value(b)
        if _py(a, b):
            return py_bit(op, a, b)
        return bitwise(op, a, b)

    fn.__name__ = {"bitand": "bitwise_and", "bitor": "bitwise_or", "bitxor": "bitwise_xor",
                   "shl": "shift_left", "shr": "shift_right"}[op]
    fn.__doc__ = doc
    return builtin(fn)


def py_bit(op: str, a: int, b: int) -> int:
    """The operation on two Python ints, at the width of a kernel's int literal (int32 unless
    the value needs int64), so it means the same whether or not its operands are constants."""
    d = dt.int32 if -(2**31) <= a < 2**31 and -(2**31) <= b < 2**31 else dt.int64
    try:
        return S.int_binop(op, a, b, d)
    except S.ShiftCountError as e:
        raise TileRuntimeError(f"{e} (a {d} shift)", hint="shift by 0 up to the width - 1") from None


shift_left = _bit("shl", "`a << s`: shifted at the C compute width; s must be in [0, width).")
shift_right = _bit("shr", "`a >> s`: arithmetic for signed, logical for unsigned; s in [0, width).")
bitwise_and = _bit("bitand", "`a & b` on integers (two conditions: logical and).")
bitwise_or = _bit("bitor", "`a | b` on integers (two conditions: logical or).")
bitwise_xor = _bit("bitxor", "`a ^ b` on integers (two conditions: not equal).")


@builtin
def bitwise_not(a):
    """`~a` on an integer: two's complement at its C compute width."""
    a = _value(a)
    if isinstance(a, bool):
        raise TileTypeError("T.bitwise_not needs an integer", hint="for a condition, write `not c`")
    if isinstance(a, int):
        return ~a
    return bitnot(a)


__all__ = ["floordiv", "floormod", "shift_left", "shift_right", "bitwise_and", "bitwise_or",
           "bitwise_xor", "bitwise_not"]
