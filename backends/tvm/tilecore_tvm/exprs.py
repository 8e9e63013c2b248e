"""tilecore scalar expressions -> TVM TIR PrimExprs, with `tilecore.semantics`' meaning.

Values are built in their compute form (`dtypes.compute`): narrow floats in float32, rounded
back after every operation (`round_to`); integers at C's compute width, 32-bit add / sub / mul /
neg / shl computed in int64 and truncated back so they wrap like C with `-fwrapv`
(`wrap_arith`). Index expressions (`index=True`: buffer indices, loop bounds, grid extents)
keep plain arithmetic so TVM's simplifier can reason about them: an in-bounds index never
overflows. Integer division and remainder truncate toward zero (TIR `truncdiv` / `truncmod`)
with the divisor guarded so that a zero divisor or INT_MIN / -1 cannot trap the process (the
oracle raises on a zero divisor; conformance generates none).
"""

from __future__ import annotations

import math

import numpy as np
from tvm import tirx as tir
from tvm.script.ir_builder import tirx as T

from tilecore import dtypes as dt
from tilecore import semantics as S
from tilecore.dtypes import DType
from tilecore.ir.expr import BinOp, Cast, Const, Load, Select, Unary, Var
from tilecore.ir.visit import walk

from .caps import Caps, Unsupported
from .dtypes import FP8, compute, storage

_CMP = {"lt": tir.LT, "le": tir.LE, "gt": tir.GT, "ge": tir.GE, "eq": tir.EQ, "ne": tir.NE}
_MIRROR = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}  # c op x -> x op' c
_FLOAT_UNARY = {
    "exp": tir.exp, "exp2": tir.exp2, "log": tir.log, "log2": tir.log2, "sqrt": tir.sqrt,
    "tanh": tir.tanh, "erf": tir.erf, "floor": tir.floor, "ceil": tir.ceil, "sin": tir.sin,
    "cos": tir.cos, "round": tir.nearbyint, "trunc": tir.trunc,
}
# (exponent bits, mantissa bits, bias, largest finite code, code an overflow becomes, NaN code)
_FP8 = {"float8_e4m3fn": (4, 3, 7, 0x7E, 0x7F, 0x7F), "float8_e5m2": (5, 2, 15, 0x7B, 0x7C, 0x7E)}


def c(value, dtype: str):
    """A TIR constant."""
    return tir.const(value, dtype)


def ty(x) -> str:
    """The TIR dtype name of PrimExpr `x` (TVM 0.27 spells it `x.ty`)."""
    return str(x.ty)


_LOAD = type(tir.BufferLoad(tir.decl_buffer((1,), "int32"), [tir.const(0, "int32")]))  # its class


def share(x, f):
    """`f(v)` with `v` a one-element local buffer holding `x`, stored here: formulas that use an
    operand several times (rounding, NaN-propagating min/max, guarded division) would otherwise
    copy it, and chains of them would grow exponentially. A variable binding is not enough:
    TVM's simplifier sees through bindings and then takes minutes on a few chained float8
    roundings (and TIR `Let` expressions, which TVM's unroller copies, clash in its analyzer);
    it does not see through memory, and LLVM keeps the cell in a register. Callers never share
    a value whose evaluation is conditional: `ExprLower` lowers a Select whose branches load
    memory as statements (`select`)."""
    if isinstance(x, (tir.Var, tir.IntImm, tir.FloatImm, _LOAD)):
        return f(x)
    cell = T.alloc_buffer([1], ty(x), scope="local")
    T.buffer_store(cell, x, [0])
    return f(tir.BufferLoad(cell, [0]))


def is_inf(x):
    """`x` is +-inf (TVM's own `isinf` compares with an infinity literal, which its WGSL
    printer spells `inff`; larger than the largest finite value says the same)."""
    big = float(np.finfo(np.float64 if ty(x) == "float64" else np.float32).max)
    return tir.abs(x) > c(big, ty(x))


def as_i32(x):
    """Index expression `x` as int32 (TIR buffer indices and loop bounds here are int32)."""
    return x if ty(x) == "int32" else tir.Cast("int32", x)


def _u32(x):
    return tir.Cast("uint32", x)


def fp8_decode(bits, name: str):
    """uint8 bits of a float8 value -> its float32 value (exact)."""
    return share(_u32(bits), lambda b: _fp8_decode(b, name))


def _fp8_decode(b, name: str):
    eb, mb, bias, _, _, _ = _FP8[name]
    s = tir.shift_right(b, c(7, "uint32"))
    e = tir.bitwise_and(tir.shift_right(b, c(mb, "uint32")), c((1 << eb) - 1, "uint32"))
    m = tir.bitwise_and(b, c((1 << mb) - 1, "uint32"))
    normal = tir.bitwise_or(
        tir.bitwise_or(tir.shift_left(s, c(31, "uint32")),
                       tir.shift_left(e + c(127 - bias, "uint32"), c(23, "uint32"))),
        tir.shift_left(m, c(23 - mb, "uint32")))
    mag = tir.Cast("float32", m) * c(2.0 ** (1 - bias - mb), "float32")
    sub = tir.Select(s == c(1, "uint32"), -mag, mag)
    value = tir.Select(e == c(0, "uint32"), sub, tir.reinterpret("float32", normal))
    if name == "float8_e4m3fn":
        special = tir.And(e == c(15, "uint32"), m == c(7, "uint32"))
        return tir.Select(special, c(math.nan, "float32"), value)
    inf = tir.Select(s == c(1, "uint32"), c(-math.inf, "float32"), c(math.inf, "float32"))
    return tir.Select(e == c(31, "uint32"), tir.Select(m == c(0, "uint32"), inf, c(math.nan, "float32")),
                      value)


def fp8_encode(x, name: str):
    """float32 -> uint8 bits of the nearest float8 value (ties to even), as ml_dtypes rounds:
    e4m3fn overflows to NaN, e5m2 to inf."""
    return share(tir.reinterpret("uint32", x), lambda bits: _fp8_encode(bits, name))


def _fp8_encode(bits, name: str):
    eb, mb, bias, top, over, nan = _FP8[name]
    s = tir.shift_right(bits, c(31, "uint32"))
    return share(tir.bitwise_and(bits, c(0x7FFFFFFF, "uint32")), lambda a: _fp8_round(a, s, name))


def _fp8_round(a, s, name: str):
    eb, mb, bias, top, over, nan = _FP8[name]
    shift = 23 - mb
    half = c((1 << (shift - 1)) - 1, "uint32")
    r = tir.shift_right(a + half + tir.bitwise_and(tir.shift_right(a, c(shift, "uint32")), c(1, "uint32")),
                        c(shift, "uint32"))
    normal = r - c((127 - bias) << mb, "uint32")
    # below the smallest normal: the multiple of the smallest subnormal, rounded half to even
    # (a multiplication by a power of two is exact)
    scaled = tir.reinterpret("float32", a) * c(2.0 ** (bias - 1 + mb), "float32")
    sub = tir.Cast("uint32", tir.nearbyint(scaled))
    is_normal = a >= c((127 + 1 - bias) << 23, "uint32")
    code = share(tir.Select(is_normal, normal, sub),
                 lambda k: tir.Select(k > c(top, "uint32"), c(over, "uint32"), k))
    code = tir.Select(a > c(0x7F800000, "uint32"), c(nan, "uint32"), code)
    return tir.Cast("uint8", tir.bitwise_or(code, tir.shift_left(s, c(7, "uint32"))))


def round_to(x, d: DType):
    """A float32 compute value rounded to narrow float `d` (identity for wide floats)."""
    if d.name in FP8:
        return fp8_decode(fp8_encode(x, d.name), d.name)
    if d.is_narrow_float:
        return tir.Cast("float32", tir.Cast(d.name, x))
    return x


def odd_f32(x):
    """float64 -> float32 rounded to odd (`semantics._round_to_odd_f32`): rounding that again
    to a narrow float gives the single-rounding result."""
    return share(x, _odd_f32)


def _odd_f32(x):
    f = tir.Cast("float32", x)
    back = tir.Cast("float64", f)
    inexact = tir.And(back != x, tir.Not(tir.Or(tir.isnan(x), is_inf(x))))
    over = tir.And(inexact, tir.abs(back) > tir.abs(x))
    b = tir.reinterpret("uint32", f)
    b = tir.Select(over, b - c(1, "uint32"), b)
    b = tir.Select(inexact, tir.bitwise_or(b, c(1, "uint32")), b)
    return tir.reinterpret("float32", b)


def nan_max(a, b):
    """np.maximum: NaN if either operand is NaN."""
    return share(a, lambda x: share(b, lambda y: tir.Select(tir.Or(x >= y, tir.isnan(x)), x, y)))


def nan_min(a, b):
    """np.minimum: NaN if either operand is NaN."""
    return share(a, lambda x: share(b, lambda y: tir.Select(tir.Or(x <= y, tir.isnan(x)), x, y)))


def constant_outside(e: BinOp):
    """The result of comparison `e` when one operand is an integer constant outside the other's
    compute range (`x <= -1` on uint32), which holds for every value of that operand: comparisons
    compare values (tilecore.semantics), while TIR cannot even build the constant (`uint32(-1)`
    is an InternalError). None for every other comparison."""
    t = e.a.dtype
    if not t.is_int:
        return None
    if isinstance(e.b, Const) and not isinstance(e.a, Const):
        v, op = int(e.b.value), e.op
    elif isinstance(e.a, Const) and not isinstance(e.b, Const):
        v, op = int(e.a.value), _MIRROR[e.op]
    else:
        return None
    ct = S.int_compute_dtype(t)
    if dt.min_value(ct) <= v <= dt.max_value(ct):
        return None
    below = v < dt.min_value(ct)  # then x > v for every x, else x < v
    held = {"lt": not below, "le": not below, "gt": below, "ge": below, "eq": False, "ne": True}
    return tir.const(held[op], "bool")


def wrap_arith(op: str, a, b, tdt: str, wide: bool):
    """`a op b` (add, sub, mul, shl) on integers of TIR dtype `tdt`, wrapping like C.

    With 64-bit integers (`wide`), 32-bit operations run in int64 (uint64 for a uint32 product),
    where they cannot overflow, and are truncated back: TVM's simplifier assumes neither signed
    nor unsigned arithmetic wraps (it folds `uint64(0) - uint64(x)` to 0), so wrapping
    arithmetic cannot be written in the narrow type. int64 operations stay int64 (an overflow
    there is not defined); WGSL's i32 / u32 arithmetic wraps by definition."""
    f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "shl": tir.shift_left}[op]
    if not wide or tdt not in ("int32", "uint32"):
        return f(a, b)
    w = "uint64" if (tdt == "uint32" and op in ("mul", "shl")) else "int64"
    if w == "int64" and op in ("add", "sub"):
        # A sum of sums stays in int64 and is truncated once: `(int32)((int64)(int32)(x + y) + z)`
        # nested once per term made TVM's simplifier take 18 s on an 8-term int32 sum; the
        # truncation commutes with + and - as long as the int64 sum cannot overflow (_bound64).
        return tir.Cast(tdt, f(_widen(a, tdt), _widen(b, tdt)))
    return tir.Cast(tdt, f(tir.Cast(w, a), tir.Cast(w, b)))


def _bound64(x) -> int | None:
    """A bound on |x| for an int64 sum built by `wrap_arith` of widened 32-bit values, else None."""
    if isinstance(x, tir.Cast) and ty(x) == "int64" and ty(x.value) in ("int32", "uint32"):
        return 2**32
    if isinstance(x, tir.IntImm) and ty(x) == "int64":
        return abs(int(x.value))
    if isinstance(x, (tir.Add, tir.Sub)) and ty(x) == "int64":
        ba = _bound64(x.a)
        bb = _bound64(x.b) if ba is not None else None
        return None if bb is None else ba + bb
    return None


def _widen(a, tdt: str):
    """`a` (of 32-bit `tdt`) as int64: the untruncated int64 sum when `a` truncates one whose
    magnitude stays far below 2**63, so chained additions are truncated once."""
    if isinstance(a, tir.Cast) and ty(a) == tdt and ty(a.value) == "int64":
        bound = _bound64(a.value)
        if bound is not None and bound < 2**61:
            return a.value
    return tir.Cast("int64", a)


def convert(x, src: DType, dst: DType, caps: Caps):
    """`semantics.cast_value`: compute value `x` of `src` as a compute value of `dst`."""
    if src == dst:
        return x
    if dst.is_bool:
        return x != c(0, compute(src)) if not src.is_bool else x
    if dst.is_float:
        if not src.is_float:
            if src.is_bool:
                x = tir.Cast("int32", x)
            if caps.has_64bit:
                x = tir.Cast("float64", x)  # the oracle converts integers through float64
                src = dt.float64
            else:  # no float64 (WGSL): exact below 2**24, where conformance's values lie
                x = tir.Cast("float32", x)
                src = dt.float32
        if dst.name == "float64":
            return tir.Cast("float64", x)
        if src.name == "float64":
            return round_to(odd_f32(x), dst) if dst.is_narrow_float else tir.Cast("float32", x)
        return round_to(tir.Cast("float32", x), dst)
    ct = compute(dst)
    if src.is_float:
        wide = "float64" if caps.has_64bit else "float32"
        return share(tir.trunc(tir.Cast(wide, x)), lambda t: _float_to_int(t, dst, caps))
    if src.is_bool:
        return tir.Cast(ct, x)
    return tir.Cast(ct, tir.Cast(storage(dst), x))


def _float_to_int(t, dst: DType, caps: Caps):
    """A truncated float `t` -> integer `dst`: NaN and inf give 0, finite values saturate to
    int64's range and wrap to the destination (`semantics.cast_value`)."""
    ct, wide = compute(dst), ty(t)
    bad = tir.Or(tir.isnan(t), is_inf(t))
    if caps.has_64bit:
        i = tir.Cast("int64", tir.max(tir.min(t, c(2.0**63 - 1024, wide)), c(-(2.0**63), wide)))
    else:
        i = tir.Cast(ct, t)
    i = tir.Select(bad, c(0, ty(i)), i)
    return tir.Cast(ct, tir.Cast(storage(dst), i))


def to_storage(x, d: DType):
    """A compute value of `d` (already rounded to `d`) as a stored element."""
    if d.name in FP8:
        return fp8_encode(x, d.name)
    if d.is_bool:
        return tir.Cast("uint8", x)
    return tir.Cast(storage(d), x) if compute(d) != storage(d) else x


def from_storage(v, d: DType):
    """A stored element of `d` in compute form."""
    if d.name in FP8:
        return fp8_decode(v, d.name)
    if d.is_bool:
        return v != c(0, "uint8")
    return tir.Cast(compute(d), v) if compute(d) != storage(d) else v


class ExprLower:
    """Lowers expressions given the TIR variables (`vars`, by id of the tilecore Var) and
    buffers (`bufs`, by id of the tilecore Buffer) in scope."""

    def __init__(self, caps: Caps):
        self.caps = caps
        self.vars: dict[int, object] = {}
        self.bufs: dict[int, object] = {}
        # per-thread fragments (GPU mapping, `private.py`): id -> TIR local buffer, indexed by
        # `it`, the current split statement's iteration number
        self.private: dict[int, object] = {}
        self.it = None

    def buffer(self, b):
        """The TIR buffer of tilecore buffer `b`."""
        try:
            return self.bufs[id(b)]
        except KeyError:
            raise Unsupported(f"buffer {b.name} is used outside the scope that allocates it") from None

    def indices(self, idx) -> list:
        """Buffer indices as int32 TIR expressions."""
        out = []
        for e in idx:
            v = self(e, index=True)
            out.append(as_i32(v))
        return out

    def load(self, buf, idx):
        """`buf[idx]` in compute form."""
        if id(buf) in self.private:
            return from_storage(tir.BufferLoad(self.private[id(buf)], [self.it]), buf.dtype)
        return from_storage(tir.BufferLoad(self.buffer(buf), self.indices(idx)), buf.dtype)

    def __call__(self, e, index: bool = False):
        """`e` in compute form; `index` for index arithmetic (no wrap-around guards)."""
        if isinstance(e, Const):
            return self.const(e)
        if isinstance(e, Var):
            try:
                return self.vars[id(e)]
            except KeyError:
                raise Unsupported(f"variable {e.name} is not bound here") from None
        if isinstance(e, Load):
            return self.load(e.buffer, e.indices)
        if isinstance(e, Cast):
            self._check(e.dtype)
            return convert(self(e.value, index), e.value.dtype, e.dtype, self.caps)
        if isinstance(e, Select):
            return self.select(e, index)
        if isinstance(e, BinOp):
            return self.binop(e, index)
        if isinstance(e, Unary):
            return self.unary(e, index)
        raise Unsupported(f"the tvm backend cannot lower {type(e).__name__}")

    def select(self, e: Select, index: bool):
        """`T.if_then_else`: only the chosen operand is evaluated. When an operand reads memory
        (which the condition may guard) the choice is an `if` statement assigning a one-element
        local buffer, so bindings made while lowering the operand stay inside its branch."""
        cond = self(e.cond)
        if not any(isinstance(n, Load) for x in (e.true_value, e.false_value) for n in walk(x)):
            return tir.if_then_else(cond, self(e.true_value, index), self(e.false_value, index))
        cell = T.alloc_buffer([1], compute(e.dtype) if not e.dtype.is_bool else "bool", scope="local")
        with T.If(cond):
            with T.Then():
                T.buffer_store(cell, self(e.true_value, index), [0])
            with T.Else():
                T.buffer_store(cell, self(e.false_value, index), [0])
        return tir.BufferLoad(cell, [0])

    def _check(self, d: DType) -> None:
        if not self.caps.has_64bit and d.bits == 64:
            raise Unsupported(f"tvm:{self.caps.kind} has no 64-bit types ({d.name} value)")

    def const(self, e: Const):
        d = e.dtype
        self._check(d)
        if d.is_bool:
            return tir.const(bool(e.value), "bool")
        if d.is_int:
            return c(int(e.value), compute(d))
        v = float(e.value)
        if d.is_narrow_float and math.isfinite(v):
            v = float(np.array(v, dtype=np.float32).astype(d.np).astype(np.float32))
        if not math.isfinite(v) and self.caps.gpu:
            # TVM's WGSL printer spells infinity `inff` (not WGSL): build it from its bits
            bits = np.array(v, dtype=compute(d)).view(np.uint64 if d.bits == 64 else np.uint32)
            return tir.reinterpret(compute(d), c(int(bits), "uint64" if d.bits == 64 else "uint32"))
        return c(v, compute(d))

    def binop(self, e: BinOp, index: bool):
        op, t = e.op, e.a.dtype
        self._check(t)
        if op in _CMP and (held := constant_outside(e)) is not None:
            return held
        a, b = self(e.a, index), self(e.b, index)
        if op in _CMP:
            return _CMP[op](a, b)
        if op == "and":
            return tir.And(a, b)
        if op == "or":
            return tir.Or(a, b)
        if t.is_bool:  # arithmetic on bools (the IR promotes them): as int32
            a, b, t = tir.Cast("int32", a), tir.Cast("int32", b), dt.int32
        if t.is_int:
            return self.int_binop(op, a, b, compute(t), index)
        if op in ("add", "sub", "mul", "div"):
            r = {"add": a + b, "sub": a - b, "mul": a * b, "div": tir.Div(a, b)}[op]
        elif op == "max":
            r = nan_max(a, b)
        elif op == "min":
            r = nan_min(a, b)
        elif op == "mod":
            r = tir.fmod(a, b)
        elif op == "pow":
            r = tir.power(a, b)
        else:
            raise Unsupported(f"no float {op} in the tvm backend")
        return round_to(r, t)

    def wrap(self, op: str, a, b, tdt: str):
        """Wrapping integer `a op b` (`wrap_arith`) on this target."""
        return wrap_arith(op, a, b, tdt, self.caps.has_64bit)

    def divide(self, op: str, a, b, tdt: str):
        """C (or floor) division / remainder with the divisor guarded: x86's idiv traps on 0 and
        on INT_MIN / -1, whose C result with -fwrapv is INT_MIN, remainder 0 (given here)."""
        signed = tdt.startswith("int")
        safe = tir.Select(b == c(0, tdt), c(1, tdt), b)
        if signed:
            safe = tir.Select(b == c(-1, tdt), c(1, tdt), safe)
        f = {"div": tir.truncdiv, "mod": tir.truncmod, "floordiv": tir.floordiv,
             "floormod": tir.floormod}[op]
        r = f(a, safe)
        if signed:
            neg = self.wrap("sub", c(0, tdt), a, tdt)
            r = tir.Select(b == c(-1, tdt), neg if op in ("div", "floordiv") else c(0, tdt), r)
        return r

    def int_binop(self, op: str, a, b, tdt: str, index: bool):
        if op in ("add", "sub", "mul"):
            if index:
                return {"add": a + b, "sub": a - b, "mul": a * b}[op]
            return self.wrap(op, a, b, tdt)
        if op in ("div", "mod", "floordiv", "floormod"):
            f = {"div": tir.truncdiv, "mod": tir.truncmod, "floordiv": tir.floordiv,
                 "floormod": tir.floormod}[op]
            if index:  # index arithmetic (grid extents, indices): a zero divisor is a program bug
                return f(a, b)
            return share(a, lambda x: share(b, lambda y: self.divide(op, x, y, tdt)))
        if op == "min":
            return tir.min(a, b)
        if op == "max":
            return tir.max(a, b)
        if op == "shl":
            return self.wrap("shl", a, b, tdt)
        if op == "shr":
            return tir.shift_right(a, b)
        if op == "bitand":
            return tir.bitwise_and(a, b)
        if op == "bitor":
            return tir.bitwise_or(a, b)
        if op == "bitxor":
            return tir.bitwise_xor(a, b)
        raise Unsupported(f"integer {op} is not implemented by the tvm backend (use interp)")

    def unary(self, e: Unary, index: bool):
        op, t = e.op, e.dtype
        self._check(t)
        a = self(e.a, index)
        if op == "not":
            return tir.Not(a)
        if t.is_int:
            tdt = compute(t)
            if op == "neg":
                return a * c(-1, tdt) if index else self.wrap("sub", c(0, tdt), a, tdt)
            if op == "abs":
                return share(a, lambda x: tir.Select(x < c(0, tdt), self.wrap("sub", c(0, tdt), x, tdt), x))
            if op == "bitnot":
                return tir.bitwise_not(a)
            raise Unsupported(f"integer {op} is not implemented by the tvm backend")
        ct = ty(a)
        one = c(1.0, ct)
        if op == "neg":
            r = -a
        elif op == "abs":
            r = tir.abs(a)
        elif op == "rsqrt":
            r = tir.Div(one, tir.sqrt(a))
        elif op == "sigmoid":
            r = tir.Div(one, one + tir.exp(-a))
        elif op in _FLOAT_UNARY:
            r = _FLOAT_UNARY[op](a)
        else:
            raise Unsupported(f"no {op} in the tvm backend")
        return round_to(r, t)


def as_prim(x):
    """`x` (a Python int or a PrimExpr) as a PrimExpr."""
    return tir.const(x, "int32") if isinstance(x, int) else x


