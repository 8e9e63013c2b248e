"""`T.reinterpret(value, dtype)`: the same bits read as another type of the same width.

tilecore has no bit-cast expression; the frontend writes the reinterpretation with operations
every target already has, exactly:

- integer <-> integer of one width (`uint8` -> `int8`): a conversion, which wraps modulo 2^bits;
- integer bits -> float (`uint16` -> `float16` / `bfloat16`, `uint32` -> `float32`): the IEEE
  fields are decoded (sign, exponent, mantissa) and the value rebuilt as
  `(2^M + m) * 2^(e - bias - M)` (subnormals `m * 2^(1 - bias - M)`, infinities, NaN), in
  float32 and rounded to the target type, which holds it exactly. On a target that flushes
  subnormals (fast math), a subnormal pattern may decode to zero.

- float -> integer bits (`float32` -> `uint32` / `int32`, `float16` / `bfloat16` -> `uint16` /
  `int16`): the fields are computed from the value in float32, exactly: the exponent is
  `floor(log2(|x|))` corrected by comparing `|x|` with the powers of two next to it, the
  mantissa `(|x| * 2^-e - 1) * 2^M` (the scaling split in two so no intermediate is subnormal);
  subnormals, zero and infinities get their patterns. Two values have no arithmetic identity:
  `-0.0` gives the pattern of `+0.0`, and every NaN the canonical quiet NaN (`0x7FC00000`,
  `0x7E00`, `0x7FC0`). It needs integer bit operations (interp, cpu, emu and the C renderers).
- `float4_e2m1fn` <-> an 8-bit integer (`T.reinterpret(T.cast(x, T.float4_e2m1fn), T.uint8)`,
  TileLang's FP4 encoding idiom; the widths differ, so this is the one exception to the
  one-width rule): the 4-bit code in the low nibble (high nibble 0), and back from the low
  nibble (the high one is ignored). Every FP4 value is `x2 / 2` for an integer `x2` in
  {0, 1, 2, 3, 4, 6, 8, 12}, so both directions are small integer formulas; `-0.0` encodes as
  code 0, like the float encodings above.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import TileTypeError
from ..ir.expr import Const, Expr, Var, as_expr, binop, cast, select, unary
from ..ir.stmt import LetStmt
from .builder import current

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


def _let(value: Expr, name: str) -> Expr:
    """`value` bound to a fresh kernel name (a LetStmt), so the encoding's intermediates are
    computed once instead of copied into every use (the expression would grow exponentially)."""
    if isinstance(value, Const):
        return value
    b = current()
    var = Var(b.unique_name(name), value.dtype)
    b.let_values[id(var)] = (var, value)
    b.emit(LetStmt(var, value, b.loc))
    return var


def _pow2(h: Expr) -> Expr:
    """2^h in float32 for an int32 `h` with |h| <= 64, exactly: a product of the constants
    2^(+-2^k) the bits of |h| select (a math library's exp2 need not be exact there)."""
    f32 = dt.float32
    h = _let(h, "pow2_h")
    mag = _let(select(binop("lt", h, as_expr(0)), unary("neg", h), h), "pow2_mag")
    neg = binop("lt", h, as_expr(0))
    out = as_expr(1.0, f32)
    for k in range(7):
        bit = binop("ne", binop("bitand", binop("shr", mag, as_expr(k)), as_expr(1)), as_expr(0))
        c = select(neg, as_expr(2.0 ** -(1 << k), f32), as_expr(2.0 ** (1 << k), f32))
        out = binop("mul", out, select(bit, c, as_expr(1.0, f32)))
    return _let(out, "pow2")


def _encode(x: Expr, s) -> Expr:
    """The unsigned integer whose IEEE bit pattern is the float `x` of type `s` (see the
    module docstring for -0.0 and NaN)."""
    e_bits, m_bits, bias = _FIELDS[s.name]
    u, f32, i32 = _uint(s.bits), dt.float32, dt.int32
    xf = _let(cast(x, f32), "bits_x")  # float16 / bfloat16 widen exactly
    a = _let(unary("abs", xf), "bits_abs")
    inf = as_expr(float("inf"), f32)
    nan = binop("ne", xf, xf)
    finite_nz = binop("and", binop("gt", a, as_expr(0.0, f32)), binop("lt", a, inf))
    finite_nz = _let(finite_nz, "bits_finite")
    safe = _let(select(finite_nz, a, as_expr(1.0, f32)), "bits_safe")
    e0 = _let(cast(unary("floor", unary("log2", safe)), i32), "bits_e0")
    # log2 may be off by one next to a power of two: compare with 2^e and 2^(e+1) exactly
    h0 = binop("div", e0, as_expr(2))
    p = _let(binop("mul", _pow2(h0), _pow2(binop("sub", e0, h0))), "bits_p")
    e = _let(binop("add", binop("sub", e0, cast(binop("gt", p, safe), i32)),
                   cast(binop("le", binop("mul", p, as_expr(2.0, f32)), safe), i32)), "bits_e")
    h1 = _let(binop("div", e, as_expr(2)), "bits_h")  # |h1|, |e - h1| <= 64: both scalings stay normal
    scaled = binop("mul", binop("mul", safe, _pow2(unary("neg", h1))), _pow2(binop("sub", h1, e)))
    m_norm = cast(binop("mul", binop("sub", scaled, as_expr(1.0, f32)),
                        as_expr(float(1 << m_bits), f32)), i32)
    sub_scale = m_bits + bias - 1  # a subnormal's mantissa is |x| * 2^(M + bias - 1)
    half = sub_scale // 2
    m_sub = cast(binop("mul", binop("mul", safe, as_expr(2.0 ** half, f32)),
                       as_expr(2.0 ** (sub_scale - half), f32)), i32)
    is_sub = binop("lt", binop("add", e, as_expr(bias)), as_expr(1))
    emax = (1 << e_bits) - 1
    big_e = select(finite_nz, select(is_sub, as_expr(0), binop("add", e, as_expr(bias))),
                   select(binop("eq", a, as_expr(0.0, f32)), as_expr(0), as_expr(emax)))
    mant = select(finite_nz, select(is_sub, m_sub, m_norm),
                  select(nan, as_expr(1 << (m_bits - 1)), as_expr(0)))
    sign = select(binop("lt", xf, as_expr(0.0, f32)), as_expr(1, u), as_expr(0, u))  # NaN: 0
    return binop("bitor", binop("bitor", binop("shl", sign, as_expr(s.bits - 1, u)),
                                binop("shl", cast(big_e, u), as_expr(m_bits, u))), cast(mant, u))


_FP4 = "float4_e2m1fn"


def _fp4_decode(code: Expr) -> Expr:
    """The float4_e2m1fn value of the code in the low nibble of 8-bit integer `code`."""
    i32 = dt.int32
    c = binop("bitand", cast(code, i32), as_expr(15))
    e = binop("bitand", binop("shr", c, as_expr(1)), as_expr(3))
    m = binop("bitand", c, as_expr(1))
    # twice the magnitude: m for e == 0 (subnormal), (2 + m) << (e - 1) otherwise
    x2 = select(binop("eq", e, as_expr(0)), m,
                binop("shl", binop("add", m, as_expr(2)), binop("max", binop("sub", e, as_expr(1)),
                                                                as_expr(0))))
    mag = binop("mul", cast(x2, dt.float32), as_expr(0.5, dt.float32))
    neg = binop("ne", binop("bitand", c, as_expr(8)), as_expr(0))
    return cast(select(neg, unary("neg", mag), mag), dt.as_dtype(_FP4))


def _fp4_encode(x: Expr, d) -> Expr:
    """The 4-bit code of float4_e2m1fn value `x` as 8-bit integer type `d` (high nibble 0)."""
    i32, f32 = dt.int32, dt.float32
    xf = cast(x, f32)
    x2 = cast(binop("mul", unary("abs", xf), as_expr(2.0, f32)), i32)  # 0,1,2,3,4,6,8,12
    mag = select(binop("lt", x2, as_expr(4)), x2,
                 select(binop("lt", x2, as_expr(8)),
                        binop("add", as_expr(4), binop("shr", binop("sub", x2, as_expr(4)), as_expr(1))),
                        binop("add", as_expr(6), binop("shr", binop("sub", x2, as_expr(8)), as_expr(2)))))
    sign = select(binop("lt", xf, as_expr(0.0, f32)), as_expr(8), as_expr(0))
    return cast(binop("bitor", mag, sign), d)


@dataclass(frozen=True)
class Handle:
    """`T.reinterpret(x, dtype="handle")`: TVM's opaque pointer made from an integer. Only
    `T.attr(..., "reduce_scope", handle)` takes one (tilecore.language.allreduce), where TVM
    reads nothing from it; any other use fails as a non-value."""

    value: Expr


def reinterpret(value, dtype) -> Expr:
    """`value`'s bits as `dtype` (TileLang's `T.reinterpret(value, dtype)`; see the module
    docstring). TVM's argument order (`tirx.reinterpret(dtype, value)`) is
    `tilecore.tvm.tirx.reinterpret`."""
    if isinstance(value, str) or (isinstance(dtype, Expr) and not isinstance(value, Expr)):
        value, dtype = dtype, value  # T.reinterpret("float16", x): the dtype came first
    if isinstance(dtype, str) and dtype == "handle":
        return Handle(as_expr(value))
    src = as_expr(value)
    d = dt.as_dtype(dtype)
    s = src.dtype
    if _FP4 in (s.name, d.name) and {s.name, d.name} <= {_FP4, "uint8", "int8"} and s != d:
        return _fp4_encode(src, d) if s.name == _FP4 else _fp4_decode(src)
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
    if s.name in _FIELDS and (d.is_int and not d.is_bool):
        return cast(_encode(src, s), d)
    raise TileTypeError(f"T.reinterpret from {s} to {d} is not provided (tilecore reads bits "
                        "between integers and float16/bfloat16/float32 of one width)",
                        hint="convert with T.cast to a type of that list first")
