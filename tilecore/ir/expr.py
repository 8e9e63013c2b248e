"""Scalar expressions of both IR levels: constants, variables, arithmetic, casts, selects, loads.

Nodes are frozen dataclasses validated on construction. `Var` and `Buffer` compare by identity
(two loops may both call their variable `i`); every other node compares structurally.
Python operators on expressions build nodes, with Python scalars converted to the other
operand's dtype (TVM's convention), so `by * 128 + 3` works inside and outside kernels.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Union

from .. import dtypes as dt
from .. import semantics as S
from ..dtypes import DType
from ..errors import TileTypeError

ARITH_OPS = ("add", "sub", "mul", "div", "mod", "min", "max", "pow")
CMP_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC_OPS = ("and", "or")
# Integer-only operations (semantics in tilecore.semantics): floor division and remainder, and
# the bit operations; each is spelled as its T.* function by the printer (INT_OP_FUNCS).
INT_OPS = ("floordiv", "floormod", "shl", "shr", "bitand", "bitor", "bitxor")
INT_OP_FUNCS = {"floordiv": "floordiv", "floormod": "floormod", "shl": "shift_left",
                "shr": "shift_right", "bitand": "bitwise_and", "bitor": "bitwise_or",
                "bitxor": "bitwise_xor", "bitnot": "bitwise_not"}
BIN_OPS = ARITH_OPS + CMP_OPS + LOGIC_OPS + INT_OPS
# Unary functions: name -> whether the argument must be a float.
UNARY_FUNCS = {
    "neg": False, "not": False, "abs": False, "exp": True, "exp2": True, "log": True, "log2": True,
    "sqrt": True, "rsqrt": True, "tanh": True, "sigmoid": True, "erf": True, "floor": True,
    "ceil": True, "sin": True, "cos": True, "round": True, "trunc": True, "bitnot": False,
}
OP_SYMBOLS = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%", "lt": "<", "le": "<=", "gt": ">",
    "ge": ">=", "eq": "==", "ne": "!=", "and": "and", "or": "or",
}


class Expr:
    """Base class of scalar expressions; every subclass has a `dtype` field."""

    dtype: DType

    def astype(self, dtype) -> Expr:
        """TVM's `expr.astype(dtype)`, which TileLang kernels use: `T.cast(self, dtype)`."""
        return cast(self, dtype)

    def __add__(self, o):
        return binop("add", self, o)

    def __radd__(self, o):
        return binop("add", o, self)

    def __sub__(self, o):
        return binop("sub", self, o)

    def __rsub__(self, o):
        return binop("sub", o, self)

    def __mul__(self, o):
        return binop("mul", self, o)

    def __rmul__(self, o):
        return binop("mul", o, self)

    def __truediv__(self, o):
        return binop("div", self, o)

    def __rtruediv__(self, o):
        return binop("div", o, self)

    def __floordiv__(self, o):
        return binop("div", self, o) if _is_intlike(self, o) else unary("floor", binop("div", self, o))

    def __rfloordiv__(self, o):
        return binop("div", o, self) if _is_intlike(o, self) else unary("floor", binop("div", o, self))

    def __mod__(self, o):
        return binop("mod", self, o)

    def __rmod__(self, o):
        return binop("mod", o, self)

    def __neg__(self):
        return unary("neg", self)

    def __and__(self, o):
        return bitwise("bitand", self, o)

    def __rand__(self, o):
        return bitwise("bitand", o, self)

    def __or__(self, o):
        return bitwise("bitor", self, o)

    def __ror__(self, o):
        return bitwise("bitor", o, self)

    def __xor__(self, o):
        return bitwise("bitxor", self, o)

    def __rxor__(self, o):
        return bitwise("bitxor", o, self)

    def __lshift__(self, o):
        return bitwise("shl", self, o)

    def __rlshift__(self, o):
        return bitwise("shl", o, self)

    def __rshift__(self, o):
        return bitwise("shr", self, o)

    def __rrshift__(self, o):
        return bitwise("shr", o, self)

    def __invert__(self):
        return bitnot(self)

    # `<` `<=` `>` `>=` build comparisons only while a T.Layout / T.Fragment map runs on index
    # variables (`index_map_scope`): kernel code compares through the parser, and elsewhere a
    # comparison of expressions stays the TypeError it always was. (`==` is structural equality,
    # which dict keys need; index_layout checks maps on integers to catch `==` on an index.)
    def __lt__(self, o):
        return binop("lt", self, o) if _IN_INDEX_MAP.get() else NotImplemented

    def __le__(self, o):
        return binop("le", self, o) if _IN_INDEX_MAP.get() else NotImplemented

    def __gt__(self, o):
        return binop("gt", self, o) if _IN_INDEX_MAP.get() else NotImplemented

    def __ge__(self, o):
        return binop("ge", self, o) if _IN_INDEX_MAP.get() else NotImplemented

    def __bool__(self):
        raise TileTypeError(
            NO_TRUTH_VALUE,
            hint="compare inside the kernel body (the frontend turns `if` on kernel values into "
            "IR), or use T.if_then_else",
        )


# Expr.__bool__'s message: callers that run user code on expressions (index maps) recognise it
NO_TRUTH_VALUE = "a kernel value has no Python truth value"
_IN_INDEX_MAP: ContextVar[bool] = ContextVar("tilecore_index_map", default=False)


@contextmanager
def index_map_scope():
    """While a user's index map runs on index variables: `<` `<=` `>` `>=` on expressions build
    comparisons (TileLang's PrimExpr operators), as the parser's do in kernel code."""
    token = _IN_INDEX_MAP.set(True)
    try:
        yield
    finally:
        _IN_INDEX_MAP.reset(token)


Scalar = Union[int, float, bool]
ExprLike = Union[Expr, int, float, bool]


def _is_intlike(a, b) -> bool:
    def isint(x):
        return isinstance(x, int) or (isinstance(x, Expr) and x.dtype.is_int)

    return isint(a) and isint(b)


@dataclass(frozen=True, eq=True)
class Const(Expr):
    """A typed literal."""

    value: Scalar
    dtype: DType

    def __post_init__(self):
        if not isinstance(self.dtype, DType):
            raise TypeError("Const.dtype must be a DType")
        if isinstance(self.value, bool) or self.dtype.is_bool:
            object.__setattr__(self, "value", bool(self.value))
        elif self.dtype.is_int:
            object.__setattr__(self, "value", int(self.value))
        else:
            object.__setattr__(self, "value", float(self.value))


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A scalar variable: loop index, block index, let binding or symbolic shape dimension."""

    name: str
    dtype: DType = dt.int32

    def __repr__(self) -> str:
        return f"Var({self.name})"


@dataclass(frozen=True)
class BinOp(Expr):
    """`a op b`; arithmetic on ints is C-style (division and remainder truncate toward zero)."""

    op: str
    a: Expr
    b: Expr
    dtype: DType

    def __post_init__(self):
        if self.op not in BIN_OPS:
            raise TypeError(f"unknown binary op {self.op}")


@dataclass(frozen=True)
class Unary(Expr):
    """A one-argument function: negation, logical not, abs, exp, exp2, log, ..."""

    op: str
    a: Expr
    dtype: DType

    def __post_init__(self):
        if self.op not in UNARY_FUNCS:
            raise TypeError(f"unknown unary function {self.op}")


@dataclass(frozen=True)
class Cast(Expr):
    """Conversion of `value` to `dtype` (round to nearest even for floats, C conversion for ints)."""

    value: Expr
    dtype: DType


@dataclass(frozen=True)
class Select(Expr):
    """`T.if_then_else(cond, a, b)`: only the chosen operand is evaluated (loads stay safe)."""

    cond: Expr
    true_value: Expr
    false_value: Expr
    dtype: DType


@dataclass(frozen=True)
class Load(Expr):
    """An element read `buffer[indices]`."""

    buffer: object  # ir.buffer.Buffer (kept untyped here to avoid an import cycle)
    indices: tuple
    dtype: DType = field(default=None)  # type: ignore[assignment]

    def __post_init__(self):
        if self.dtype is None:
            object.__setattr__(self, "dtype", self.buffer.dtype)
        if len(self.indices) != len(self.buffer.shape):
            raise TypeError(
                f"{self.buffer.name} has rank {len(self.buffer.shape)}, indexed with {len(self.indices)}"
            )


def _cache_hash(cls: type) -> type:
    """Make `cls`'s dataclass hash computed once per node. Expressions are immutable trees used
    as dict keys over and over (linear forms, memo tables of the lowering passes); the generated
    hash walks the whole tree each time, which made hashing a tenth of a cold GEMM's lowering.
    The cached value is dropped from copies and pickles: `str` hashes differ between processes."""
    tree_hash = cls.__hash__

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = tree_hash(self)
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_hash", None)
        state.pop("_linear", None)  # `linear`'s cached answer: recomputed on demand
        return state

    cls.__hash__ = __hash__  # type: ignore[method-assign]
    cls.__getstate__ = __getstate__  # type: ignore[attr-defined]
    return cls


_COMPOSITE = (BinOp, Unary, Cast, Select)
for _composite in _COMPOSITE:
    _cache_hash(_composite)
# `type(e) in COMPOSITE`: the exact classes, no subclass (ir.visit's `known` memo keys these)
COMPOSITE = _COMPOSITE = frozenset(_COMPOSITE)


# --------------------------------------------------------------------------- construction helpers


_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _check_int64(value: Scalar, dtype: DType | None = None) -> None:
    """An integer constant of a kernel must be an int64 (every integer computes in int64 at most),
    or a value of its own dtype when that is given (`T.uint64(2**64 - 1)`): a larger one was a
    different number on each target, or crashed one. (A float operand's constant is a float:
    `x < 2**64` on float32 is fine.)"""
    # bounds written out: const() runs for every constant lowering builds
    if type(value) is not bool and isinstance(value, int) and not _I64_MIN <= value <= _I64_MAX \
            and not (dtype is not None and _fits(value, dtype)):
        raise TileTypeError(f"the integer constant {value} does not fit int64, the widest "
                            "integer a kernel computes with",
                            hint="use a constant between -2**63 and 2**63 - 1 (a comparison "
                                 "with a larger bound is decided in Python, before the kernel)")


def const(value: Scalar, dtype: DType | None = None) -> Const:
    """A Const from a Python scalar; dtype defaults to int32/int64, float32 or bool."""
    if dtype is None or dtype.is_int:
        _check_int64(value, dtype)
    if dtype is None:
        if isinstance(value, bool):
            dtype = dt.bool_
        elif isinstance(value, int):
            dtype = dt.int32 if -(2**31) <= value < 2**31 else dt.int64
        elif isinstance(value, float):
            dtype = dt.float32
        else:
            raise TileTypeError(f"cannot use {value!r} ({type(value).__name__}) as a kernel value",
                                hint="a constant must be a Python int, float or bool")
    return Const(value, dtype)


def as_expr(value: ExprLike, like: DType | None = None) -> Expr:
    """An Expr from `value`; Python scalars take dtype `like` when given (TVM's convention)."""
    if isinstance(value, Expr):
        return value
    if hasattr(value, "as_expr"):
        return value.as_expr()
    if isinstance(value, (bool, int, float)) and not isinstance(value, Expr):
        if like is not None and not isinstance(value, bool):
            if like.is_int and isinstance(value, float):
                return const(value)
            if like.is_bool:
                return const(value)
            if like.is_int:
                _check_int64(value, like)
            return Const(value, like)
        return const(value)
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return Const(value.item(), dt.from_numpy(value.dtype))
    except Exception:  # pragma: no cover - numpy always present
        pass
    raise TileTypeError(f"cannot use {value!r} ({type(value).__name__}) as a kernel value",
                        hint="kernel values are numbers, elements like A[i] and names bound to them")


def as_operand(e: Expr, t: DType) -> Expr:
    """`e` as an operand of arithmetic on dtype `t`: a negative constant of uint32 (a Python
    literal against a uint32 value: `x // -1`) takes its uint32 value, 4294967295, as C's usual
    arithmetic conversions give it (`x / -1` is `x / 4294967295u`), so the oracle, cpu and the
    C renderers compute one thing (TIR cannot build `uint32(-1)` at all). Narrower unsigned
    ints compute in C's `int`, where -1 stays -1; comparisons keep the value (they compare
    values: `x <= -1` never holds on an unsigned `x`)."""
    if type(e) is Const and e.value < 0 and t.kind == "uint" and t.bits == 32:
        return Const(S.wrap_int(e.value, t), t)
    return e


def _fits(v: int, dtype: DType) -> bool:
    return dt.min_value(dtype) <= v <= dt.max_value(dtype)


def _fold(op: str, a: Scalar, b: Scalar, dtype: DType):
    """`a op b` on integer constants by `tilecore.semantics`, or None where folding would change
    what the program means: a zero divisor (a runtime error) or a result outside `dtype`'s
    range (a narrow int wraps only when stored, so its Const could not hold the value)."""
    if (op not in S.INT_BINARY and op not in S.SHIFT_OPS) or op == "pow":
        return None
    try:
        r = S.int_binop(op, a, b, dtype)
    except ArithmeticError:  # a zero divisor or a shift count out of range: a runtime error
        return None
    return r if _fits(r, dtype) else None


def binop(op: str, a: ExprLike, b: ExprLike) -> Expr:
    """Build `a op b`, converting Python scalars and promoting dtypes; folds integer constants."""
    if not isinstance(a, Expr) and hasattr(a, "as_expr"):
        a = a.as_expr()
    if not isinstance(b, Expr) and hasattr(b, "as_expr"):
        b = b.as_expr()
    if isinstance(a, Expr) and not isinstance(b, Expr):
        b = as_expr(b, a.dtype)
    elif isinstance(b, Expr) and not isinstance(a, Expr):
        a = as_expr(a, b.dtype)
    else:
        a, b = as_expr(a), as_expr(b)
    if op in LOGIC_OPS:
        a, b = _to_bool(a), _to_bool(b)
        return BinOp(op, a, b, dt.bool_)
    t = dt.promote(a.dtype, b.dtype)
    if a.dtype != t:
        a = cast(a, t)
    if b.dtype != t:
        b = cast(b, t)
    if op in INT_OPS and not t.is_int:
        raise TileTypeError(f"T.{INT_OP_FUNCS[op]} needs integer operands, got {t}",
                            hint="cast the operands with T.cast(x, 'int32')")
    if op not in CMP_OPS:
        a, b = as_operand(a, t), as_operand(b, t)
    if isinstance(a, Const) and isinstance(b, Const) and t.is_int:
        r = _fold(op, a.value, b.value, t)
        if r is not None:
            return Const(r, t)
    if t.is_int and op in ("add", "sub", "mul"):
        simplified = _simplify_identity(op, a, b)
        if simplified is not None:
            return simplified
    out = dt.bool_ if op in CMP_OPS else t
    return BinOp(op, a, b, out)


def bitwise(op: str, a: ExprLike, b: ExprLike) -> Expr:
    """Python's `&`, `|`, `^`, `<<`, `>>` on kernel values: the bit operation on integers, the
    logical one on two conditions (`&` is and, `|` or, `^` not-equal); floats are a TileTypeError."""
    ea = as_expr(a, b.dtype if isinstance(b, Expr) else None) if not isinstance(a, Expr) else a
    eb = as_expr(b, ea.dtype) if not isinstance(b, Expr) else b
    if ea.dtype.is_bool and eb.dtype.is_bool and op in ("bitand", "bitor", "bitxor"):
        return binop({"bitand": "and", "bitor": "or", "bitxor": "ne"}[op], ea, eb)
    for x in (ea, eb):
        if not x.dtype.is_int:
            sym = {"bitand": "&", "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>"}[op]
            raise TileTypeError(f"`{sym}` needs integer operands (or two conditions), got {x.dtype}",
                                hint="cast the operands with T.cast(x, 'int32')")
    if op in ("shl", "shr") and eb.dtype != ea.dtype:
        # a shift has the shifted value's type (C), whatever the count's: a valid count
        # (below the compute width) is representable in any integer dtype
        eb = cast(eb, ea.dtype)
    return binop(op, ea, eb)


def bitnot(a: ExprLike) -> Expr:
    """`~a` on an integer kernel value (two's complement at its C compute width)."""
    a = as_expr(a)
    if not a.dtype.is_int:
        raise TileTypeError(f"`~` needs an integer operand, got {a.dtype}",
                            hint="for a condition, write `not c`")
    if isinstance(a, Const):
        r = S.int_unary("bitnot", a.value, a.dtype)
        if _fits(r, a.dtype):
            return Const(r, a.dtype)
    return Unary("bitnot", a, a.dtype)


def _simplify_identity(op: str, a: Expr, b: Expr) -> Expr | None:
    """x+0, 0+x, x-0, x*1, 1*x, x*0: keeps index arithmetic readable in printed IR."""
    def is_c(e, v):
        return isinstance(e, Const) and e.value == v

    if op == "add":
        if is_c(b, 0):
            return a
        if is_c(a, 0):
            return b
    elif op == "sub":
        if is_c(b, 0):
            return a
    elif op == "mul":
        if is_c(b, 1):
            return a
        if is_c(a, 1):
            return b
        if is_c(a, 0) or is_c(b, 0):
            return Const(0, a.dtype)
    return None


def _to_bool(e: Expr) -> Expr:
    return e if e.dtype.is_bool else binop("ne", e, 0)


def unary(op: str, a: ExprLike) -> Expr:
    """Build a unary function application; float functions on ints compute in float32."""
    a = as_expr(a)
    if op == "not":
        return Unary("not", _to_bool(a), dt.bool_)
    if UNARY_FUNCS.get(op) and not a.dtype.is_float:
        a = cast(a, dt.float32)
    if op not in UNARY_FUNCS:
        raise TileTypeError(f"unknown function {op}", hint="see docs/language.md for the math functions")
    if isinstance(a, Const) and op == "neg" and a.dtype.is_int:
        r = S.int_unary("neg", a.value, a.dtype)
        if _fits(r, a.dtype):
            return Const(r, a.dtype)
    return Unary(op, a, a.dtype)


def cast(value: ExprLike, dtype) -> Expr:
    """`T.cast(value, dtype)`; a Python scalar becomes a typed constant."""
    dtype = dt.as_dtype(dtype)
    if not isinstance(value, Expr) and not hasattr(value, "as_expr"):
        if dtype.is_bool:
            return Const(bool(value), dtype)
        if dtype.is_int:
            return Const(S.wrap_int(int(value), dtype), dtype)
        return Const(float(value), dtype)
    value = as_expr(value)
    if value.dtype == dtype:
        return value
    if isinstance(value, Const) and dtype.is_int and value.dtype.is_int:
        return Const(S.wrap_int(value.value, dtype), dtype)
    return Cast(value, dtype)


def select(cond: ExprLike, a: ExprLike, b: ExprLike) -> Expr:
    """`T.if_then_else`: operands promoted to a common dtype."""
    cond = _to_bool(as_expr(cond))
    if isinstance(a, Expr) and not isinstance(b, Expr):
        b = as_expr(b, a.dtype)
    elif isinstance(b, Expr) and not isinstance(a, Expr):
        a = as_expr(a, b.dtype)
    a, b = as_expr(a), as_expr(b)
    t = dt.promote(a.dtype, b.dtype)
    return Select(cond, as_operand(cast(a, t), t), as_operand(cast(b, t), t), t)


def const_int(e) -> int | None:
    """The value of `e` when it is a compile-time integer, else None."""
    if isinstance(e, bool):
        return None
    if isinstance(e, int):
        return e
    if type(e).__module__ == "numpy" and hasattr(e, "dtype") and e.dtype.kind in "iu":
        # a NumPy integer scalar (np.int64(16), a size read from an array's shape) is as
        # constant as a Python int (issue 16 item 12); checked by module so numpy stays optional
        return int(e)
    if isinstance(e, Const) and e.dtype.is_int:
        return int(e.value)
    lin = linear(e)
    if lin is not None and not lin[0]:
        return lin[1]
    return None


# what `linear` keeps on a composite node: None means "not computed yet", so these mark a node
# with no linear form and a node that is its own atom ({node: 1}, 0) (kept as a marker: the
# node inside its own attribute would be a reference cycle, garbage the collector must find)
_NO_LINEAR = ("no linear form",)
_ATOM = ("its own atom",)


def linear(e) -> tuple[dict, int] | None:
    """`e` as ({atom: coeff}, constant) when it is an integer-affine form, else None.

    Atoms are variables and any non-affine subexpression; used to prove extents constant
    (`(b+1)*64 - b*64 == 64`) and offsets contiguous. The answer for a composite node is
    computed once and kept on the (immutable) node: the simplifier asks for the linear form of
    every affine node it visits, and of the same subtrees again from each enclosing node, so
    uncached this was quadratic in an index expression's depth. The returned dict is shared:
    never modify it.
    """
    if type(e) in _COMPOSITE:
        got = e.__dict__.get("_linear")
        if got is None:
            got = _linear(e)
            if got is None:
                mark = _NO_LINEAR
            elif got[1] == 0 and len(got[0]) == 1 and next(iter(got[0])) is e:
                mark = _ATOM
            else:
                mark = got
            object.__setattr__(e, "_linear", mark)
            return got
        if got is _NO_LINEAR:
            return None
        return ({e: 1}, 0) if got is _ATOM else got
    return _linear(e)


def _linear(e) -> tuple[dict, int] | None:
    if isinstance(e, int) and not isinstance(e, bool):
        return {}, e
    if not isinstance(e, Expr) or not e.dtype.is_int:
        return None
    if isinstance(e, Const):
        return {}, int(e.value)
    if isinstance(e, BinOp) and e.op in ("add", "sub", "mul"):
        la, lb = linear(e.a), linear(e.b)
        if la is None or lb is None:
            return {e: 1}, 0
        if e.op == "mul":
            if not la[0]:
                k = la[1]
                return {a: c * k for a, c in lb[0].items() if c * k}, lb[1] * k
            if not lb[0]:
                k = lb[1]
                return {a: c * k for a, c in la[0].items() if c * k}, la[1] * k
            return {e: 1}, 0
        sign = 1 if e.op == "add" else -1
        terms = dict(la[0])
        for a, c in lb[0].items():
            terms[a] = terms.get(a, 0) + sign * c
            if terms[a] == 0:
                del terms[a]
        return terms, la[1] + sign * lb[1]
    if isinstance(e, Unary) and e.op == "neg":
        la = linear(e.a)
        if la is None:
            return None
        return {a: -c for a, c in la[0].items()}, -la[1]
    if isinstance(e, Cast) and e.value.dtype.is_int:
        return linear(e.value)
    return {e: 1}, 0
