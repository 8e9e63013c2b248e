"""`T.reinterpret(value, dtype)`: the same bits read as another type of the same width.

tilecore has no bit-cast expression; the frontend writes the reinterpretation with operations
every target already has, exactly:

- integer <-> integer of one width (`uint8` -> `int8`): a conversion, which wraps modulo 2^bits;
- integer bits -> float (`uint16` -> `float16` / `bfloat16`, `uint32` -> `float32`): the IEEE
  fields are decoded (sign, exponent, mantissa) and the value rebuilt as
  `(2^M + m) * 2^(e - bias - M)` (subnormals `m * 2^(1 - bias - M)`, infinities, NaN), in
  float32 and rounded to the target type, which holds it exactly. On a target that flushes
  subnormals (fast math), a subnormal pattern may decode to zero.

Reading a float's bits as an integer (`float32` -> `uint32`) is refused with a TileTypeError.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileTypeError
from ..ir.expr import Expr, as_expr, binop, cast, select, unary

# float type -> (exponent bits, mantissa bits, bias)
_FIELDS = {"float16": (5, 10, 15), "bfloat16": (8, 7, 127), "float32": (8, 23, 127)}


def _uint(bits: int):
    return dt.as_dtype(f"uint{bits}")


def _decode(bits: Expr, d) -> Expr:
    """The float of type `d` whose IEEE bit pattern is the unsigned integer `bits`."""
    e_bits, m_bits, bias = _FIELDS[d.name]
    u = bits.dtype
    sign = binop("bitand", binop("shr", bits, as_expr(d.bits - 1, u)), as_expr(1, u))
    e = cast(binop("bitand", binop("shr", bits, as_expr(m_bits, u)), as_expr((1 << e_bits) - 1, u)),
             "int32")
    m = cast(binop("bitand", bits, as_expr((1 << m_bits) - 1, u)), "int32")
    f32 = dt.float32
    mf = cast(m, f32)
    normal = binop("mul", binop("add", mf, as_expr(float(1 << m_bits), f32)),
                   unary("exp2", cast(binop("sub", e, as_expr(bias + m_bits)), f32)))
    sub = binop("mul", mf, as_expr(2.0 ** (1 - bias - m_bits), f32))
    special = select(binop("eq", m, as_expr(0)), as_expr(float("inf"), f32),
                     as_expr(float("nan"), f32))
    emax = (1 << e_bits) - 1
    mag = select(binop("eq", e, as_expr(0)), sub,
                 select(binop("eq", e, as_expr(emax)), special, normal))
    val = select(binop("ne", sign, as_expr(0, u)), unary("neg", mag), mag)
    return cast(val, d)


def reinterpret(value, dtype) -> Expr:
    """`value`'s bits as `dtype` (TileLang's `T.reinterpret(value, dtype)`; see the module
    docstring). TVM's argument order (`tirx.reinterpret(dtype, value)`) is
    `tilecore.tvm.tirx.reinterpret`."""
    if isinstance(value, str) or (isinstance(dtype, Expr) and not isinstance(value, Expr)):
        value, dtype = dtype, value  # T.reinterpret("float16", x): the dtype came first
    src = as_expr(value)
    d = dt.as_dtype(dtype)
    s = src.dtype
    if s.bits != d.bits:
        raise TileTypeError(f"T.reinterpret from {s} ({s.bits} bits) to {d} ({d.bits} bits): the "
                            "widths differ", hint="reinterpret between types of one width; "
                            "convert with T.cast first")
    if s == d:
        return src
    if (s.is_int or s.is_bool) and (d.is_int or d.is_bool) and not (s.is_bool or d.is_bool):
        return cast(src, d)
    if s.is_int and d.name in _FIELDS:
        return _decode(cast(src, _uint(s.bits)), d)
    raise TileTypeError(f"T.reinterpret from {s} to {d} is not provided (tilecore reads integer "
                        "bits as an integer or a float16/bfloat16/float32, not a float's bits)",
                        hint="compute the field you need arithmetically (e.g. the exponent with "
                             "T.floor(T.log2(x))), or keep the value as an integer")
