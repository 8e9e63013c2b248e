"""The C-expression layer of the renderer: names, types and scalar expressions in C spelling.

The renderer is layered (see docs/architecture.md, "Code generation"): this module renders
scalar expressions; `cstyle.py` adds statements, memory and the kernel driver; `gpu.py` adds
what every GPU dialect shares; a dialect (CUDA, HIP, Metal) is a small subclass of the GPU
layer that overrides spelling hooks. Rendering dispatches on the node's class name
(`expr_<Class>` / `stmt_<Class>`), so a new node kind needs one method, not a visitor.

Semantics follow the `interp` oracle exactly where C allows:
- narrow floats (fp16, bf16, fp8) are stored narrow but every operation computes in float32 and
  rounds back to the narrow type after each operation;
- integer division and remainder are C's (truncating), which is what the IR means;
- ints narrower than 32 bits compute as C's promoted `int` and wrap to their width only when
  stored (a memory write or a cast), as the oracle computes ints wide and wraps on store; let
  bindings of such ints are therefore declared `int`.
"""

from __future__ import annotations

import math
import re

import numpy as np

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import TileInternalError
from ..ir.expr import INT_OPS, BinOp, Cast, Const, Select, Unary, Var

# The one table of C spellings of tilecore dtypes; languages override the entries they spell
# differently (CUDA's __half, Metal's bfloat) through `type_overrides`.
C_TYPES: dict[str, str] = {
    "float32": "float", "float64": "double", "int8": "signed char", "int16": "short",
    "int32": "int", "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
    "uint32": "unsigned int", "bool": "bool",
}

_C_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%", "lt": "<", "le": "<=",
          "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&&", "or": "||"}
_CMP = ("lt", "le", "gt", "ge", "eq", "ne")

# Float functions by name: (float32 spelling, float64 spelling); `{}` is the argument.
FLOAT_FUNCS: dict[str, tuple[str, str]] = {
    "exp": ("expf({})", "exp({})"), "exp2": ("exp2f({})", "exp2({})"),
    "log": ("logf({})", "log({})"), "log2": ("log2f({})", "log2({})"),
    "sqrt": ("sqrtf({})", "sqrt({})"), "rsqrt": ("(1.0f / sqrtf({}))", "(1.0 / sqrt({}))"),
    "tanh": ("tanhf({})", "tanh({})"), "erf": ("erff({})", "erf({})"),
    "sigmoid": ("(1.0f / (1.0f + expf(-({}))))", "(1.0 / (1.0 + exp(-({}))))"),
    "floor": ("floorf({})", "floor({})"), "ceil": ("ceilf({})", "ceil({})"),
    "sin": ("sinf({})", "sin({})"), "cos": ("cosf({})", "cos({})"),
    # NumPy's rint: round half to even, as the oracle does.
    "round": ("rintf({})", "rint({})"), "trunc": ("truncf({})", "trunc({})"),
    "abs": ("fabsf({})", "fabs({})"),
}
# Float binary functions: (float32, float64). min and max are helper functions (MINMAX_HELPER):
# they propagate NaN as the semantics (np.minimum / np.maximum) do, which C's fminf / fmaxf do
# not (they return the other operand); a function evaluates each operand once, where an inline
# `?:` would repeat them (softmax's row max nests 32 deep).
FLOAT_BIN_FUNCS: dict[str, tuple[str, str]] = {
    "min": ("tilecore_minf({}, {})", "tilecore_min({}, {})"),
    "max": ("tilecore_maxf({}, {})", "tilecore_max({}, {})"),
    "pow": ("powf({}, {})", "pow({}, {})"), "mod": ("fmodf({}, {})", "fmod({}, {})"),
}
# The body of the min / max helpers: a NaN `a` fails `a < b` but not `a != a`; a NaN `b` fails
# both and gives `b`. Format fields: t (the C type), op (min / max), cmp (< / >).
MINMAX_HELPER = "{t} {name}({t} a, {t} b) {{ return (a {cmp} b || a != a) ? a : b; }}"


# Identifiers a kernel's own names must not take: C/C++ keywords and names the generated code
# uses (types, math functions); languages add theirs in `reserved_words`.
C_RESERVED = frozenset("""
alignas alignof asm auto bool break case catch char class const constexpr continue decltype default
delete do double else enum explicit extern false float for friend goto if inline int long main
mutable namespace new noexcept nullptr operator private protected public register reinterpret_cast
return short signed sizeof static static_cast struct switch template this throw true try typedef
typename union unsigned using virtual void volatile while
""".split()) | frozenset(re.findall(r"(?<![\w.])[A-Za-z_]\w*", " ".join(
    t for pair in (*FLOAT_FUNCS.values(), *FLOAT_BIN_FUNCS.values()) for t in pair)))


class CExprRenderer:
    """Renders scalar expressions as C; subclasses override the spelling hooks.

    Subclass attributes: `type_overrides` (dtype name -> C type), `reserved_words`.
    Hooks: `to_float` / `from_float` / `from_double` (narrow-float conversion),
    `float_literal_special` (inf / nan), `math_call` / `math_bin_call` (function spelling),
    `address_space` / `pointer_cast` / `bit_view` / `bit_cast` (reinterpreting memory, which C++
    spells with `reinterpret_cast` but Metal with address-space-qualified C casts or `as_type`),
    and `fast_divide` (float32 division when `fast_math` allows an approximation).
    """

    type_overrides: dict[str, str] = {}
    reserved_words: frozenset = frozenset()
    indent_unit = "  "

    def __init__(self, fast_math: bool = False):
        # fast_math: float32 division by a non-constant may use `fast_divide` (see expr_BinOp)
        self.fast_math = fast_math
        self.types = {**C_TYPES, **self.type_overrides}
        self.names: dict[int, str] = {}
        self._used_names: set[str] = set(C_RESERVED | self.reserved_words | set(self.types.values()))
        self.used_types: set[str] = set()  # dtype names rendered (decides the headers needed)
        self.helpers: dict[str, str] = {}  # helper functions the kernel needs, by name

    # ------------------------------------------------------------------ names and types
    def type_name(self, d: DType) -> str:
        """The C spelling of dtype `d`."""
        try:
            name = self.types[d.name]
            self.used_types.add(d.name)
            return name
        except KeyError:
            raise TileInternalError(f"{type(self).__name__} has no C type for {d}") from None

    def name_of(self, obj) -> str:
        """A unique C identifier for a Var or Buffer (compared by identity in the IR)."""
        key = id(obj)
        got = self.names.get(key)
        if got is not None:
            return got
        base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in obj.name) or "v"
        if base[0].isdigit():
            base = "_" + base
        name, n = base, 1
        while name in self._used_names:
            name = f"{base}_{n}"
            n += 1
        self._used_names.add(name)
        self.names[key] = name
        return name

    def reserve(self, *names: str) -> None:
        """Keep generated identifiers (kernel name, helper names) from being reused."""
        self._used_names.update(names)

    # ------------------------------------------------------------------ narrow floats
    def to_float(self, d: DType, s: str) -> str:
        """Convert a value stored as narrow float `d` to float32 (subclasses spell it)."""
        return f"((float)({s}))"

    def from_float(self, d: DType, s: str) -> str:
        """Round a float32 value to narrow float `d`, nearest even (subclasses spell it)."""
        return f"(({self.type_name(d)})({s}))"

    def from_double(self, d: DType, s: str) -> str:
        """Round a double value to narrow float `d` once (subclasses spell it)."""
        return f"(({self.type_name(d)})({s}))"

    def compute(self, e) -> str:
        """`e` rendered in its compute type: float32 for narrow floats, itself otherwise."""
        s = self.expr(e)
        return self.to_float(e.dtype, s) if e.dtype.is_narrow_float else s

    # ------------------------------------------------------------------ memory views
    def address_space(self, scope: str) -> str:
        """The qualifier (with a trailing space) of a pointer into `scope` ("global", "shared",
        "local"): none in C, CUDA and HIP; Metal's `device ` / `threadgroup ` / `thread `."""
        return ""

    def pointer_cast(self, ctype: str, scope: str, ptr: str) -> str:
        """`ptr` (a pointer or address) as a pointer to `ctype` in `scope`; a C-style cast, which
        every dialect accepts (C++ dialects may spell it `reinterpret_cast`)."""
        return f"(({self.address_space(scope)}{ctype}*)({ptr}))"

    def bit_view(self, ctype: str, lvalue: str, scope: str, const: bool = False) -> str:
        """An lvalue of type `ctype` over the bytes of `lvalue` (which lives in `scope`)."""
        return "*" + self.pointer_cast(("const " if const else "") + ctype, scope, "&" + lvalue)

    def bit_cast(self, ctype: str, lvalue: str) -> str:
        """The bits of local `lvalue` read as a `ctype` value (Metal: `as_type<T>(x)`)."""
        return self.bit_view(ctype, lvalue, "local", const=True)

    # ------------------------------------------------------------------ math spelling
    def math_call(self, name: str, d: DType) -> str:
        """Format string (one `{}`) of float function `name` computing in `d` (float32 or
        float64); the FLOAT_FUNCS table by default (Metal: `metal::exp`, HIP: `__ocml_*`)."""
        return FLOAT_FUNCS[name][d.name == "float64"]

    def math_bin_call(self, name: str, d: DType) -> str:
        """Format string (two `{}`) of binary float function `name` (min, max, pow, mod) in `d`;
        min and max define their helper function (`minmax_helper`) on first use."""
        text = FLOAT_BIN_FUNCS[name][d.name == "float64"]
        if name in ("min", "max"):
            fn = text.split("(")[0]
            if fn not in self.helpers:
                self.helpers[fn] = f"{self.helper_prefix()} {self.minmax_helper(fn, name, d)}"
        return text

    def minmax_helper(self, fn: str, name: str, d: DType) -> str:
        """The definition (after `helper_prefix`) of NaN-propagating `name` ("min" / "max") on
        float32 or float64, called `fn` (CUDA: PTX's `max.NaN.f32` for float32)."""
        return MINMAX_HELPER.format(t=self.type_name(d), name=fn, cmp="<" if name == "min" else ">")

    def helper_prefix(self) -> str:
        """The qualifiers of a helper function (CUDA: `__device__ __forceinline__`)."""
        return "static inline"

    def fast_divide(self, a: str, b: str) -> str | None:
        """An approximate float32 `a / b` for `fast_math`, or None when the dialect has none
        (the IEEE division is kept)."""
        return None

    # ------------------------------------------------------------------ expressions
    def expr(self, e) -> str:
        """C text of expression `e`, dispatched on its class name."""
        if isinstance(e, BinOp) and e.op in INT_OPS or isinstance(e, Unary) and e.op == "bitnot":
            return self.int_op(e)
        fn = getattr(self, f"expr_{type(e).__name__}", None)
        if fn is None:
            raise TileInternalError(f"{type(self).__name__} cannot render expression {type(e).__name__}")
        return fn(e)

    def float_literal_special(self, value: float, d: DType) -> str:
        """inf / -inf / nan as a float32 (or double) expression."""
        one = "1.0" if d.name == "float64" else "1.0f"
        zero = "0.0" if d.name == "float64" else "0.0f"
        if math.isnan(value):
            return f"({zero} / {zero})"
        return f"({'-' if value < 0 else ''}{one} / {zero})"

    def float_literal(self, value: float, d: DType) -> str:
        """A float constant of dtype `d` (narrow floats as float32 literals, then rounded)."""
        cd = dt.float64 if d.name == "float64" else dt.float32
        if math.isinf(value) or math.isnan(value):
            text = self.float_literal_special(value, cd)
        elif cd is dt.float64:
            text = repr(float(value))
        else:
            text = repr(float(np.float32(value))) + "f"
        if d.is_narrow_float:
            return self.from_float(d, text)
        return text

    def expr_Const(self, e: Const) -> str:
        """A literal: bools, ints with their width's suffix or cast, floats via `float_literal`."""
        d = e.dtype
        if d.is_bool:
            return "true" if e.value else "false"
        if d.is_int:
            v = int(e.value)
            # the most negative value is not a literal: `-2147483648` negates a constant too
            # large for its type (int64's arrives through unsigned, with a warning)
            if d.name in ("int64",):
                if self.type_name(d) != "long long":  # e.g. MSL's `long`: it has no `long long`
                    return f"(({self.type_name(d)})({v}L))" if v != -(2**63) else \
                        f"(({self.type_name(d)})(-9223372036854775807L - 1))"
                return "(-9223372036854775807LL - 1)" if v == -(2**63) else f"{v}LL"
            if d.kind == "uint":
                # A negative constant of a narrow unsigned type computes in C's promoted `int`,
                # as the scalar semantics do (`int_compute_dtype`): `-1u` would turn `x <= -1`
                # into an unsigned comparison that is always true.
                return str(v) if v < 0 and d.bits < 32 else f"{v}u"
            if v == -(2**31):
                return "(-2147483647 - 1)"
            return str(v) if d.name == "int32" else f"(({self.type_name(d)}){v})"
        return self.float_literal(float(e.value), d)

    def expr_Var(self, e: Var) -> str:
        """A variable by its unique C name."""
        return self.name_of(e)

    def compute_type(self, d: DType) -> str:
        """The C type values of `d` compute in: C's promoted `int` for ints under 32 bits (they
        wrap to `d` only when stored), `float` for narrow floats, `d`'s own type otherwise."""
        if d.is_int and d.bits < 32:
            return "int"
        if d.is_narrow_float:
            return "float"
        return self.type_name(d)

    def _cmp_operand(self, e) -> str:
        """An operand of a comparison: a negative 32-bit unsigned constant compares as the
        signed 64-bit value it is (the scalar semantics compare values, not bit patterns;
        `x <= 4294967295u` would always hold), anything else in its compute type."""
        if isinstance(e, Const) and e.dtype.kind == "uint" and e.dtype.bits == 32 and int(e.value) < 0:
            return f"(({self.type_name(dt.int64)})({int(e.value)}))"
        return self.compute(e)

    def expr_BinOp(self, e: BinOp) -> str:
        """Arithmetic, comparison or logic; floats through float32 for narrow types, C ints otherwise."""
        t = e.a.dtype
        if e.op in ("and", "or"):
            return f"({self.expr(e.a)} {_C_OPS[e.op]} {self.expr(e.b)})"
        if e.op in _CMP:
            return f"({self._cmp_operand(e.a)} {_C_OPS[e.op]} {self._cmp_operand(e.b)})"
        if t.is_float:
            a, b = self.compute(e.a), self.compute(e.b)
            cd = dt.float64 if t.name == "float64" else dt.float32
            fast = (self.fast_divide(a, b) if e.op == "div" and self.fast_math and cd is dt.float32
                    and not isinstance(e.b, Const) else None)
            if fast is not None:
                # a constant divisor keeps IEEE division: powers of two stay exact multiplies
                text = fast
            elif e.op in FLOAT_BIN_FUNCS:
                text = self.math_bin_call(e.op, cd).format(a, b)
            else:
                text = f"({a} {_C_OPS[e.op]} {b})"
            return self.from_float(t, text) if t.is_narrow_float else text
        a, b = self.expr(e.a), self.expr(e.b)
        if e.op in ("min", "max"):
            # a helper function, not an inline `?:`, which would evaluate an operand twice: a
            # shuffle among them would then run a second time in only some lanes
            ct = self.compute_type(t)
            fn = f"tilecore_{e.op}_{''.join(ch if ch.isalnum() else '_' for ch in ct)}"
            if fn not in self.helpers:
                cmp = "<" if e.op == "min" else ">"
                self.helpers[fn] = (f"{self.helper_prefix()} {ct} {fn}({ct} a, {ct} b) "
                                    f"{{ return a {cmp} b ? a : b; }}")
            return f"{fn}({a}, {b})"
        if e.op == "pow":
            return f"(({self.compute_type(t)})pow((double)({a}), (double)({b})))"
        if e.op in ("div", "mod") and _may_overflow(e):
            return f"{self.checked_division(e.op, t)}({a}, {b})"
        return f"({a} {_C_OPS[e.op]} {b})"

    def checked_division(self, op: str, t: DType) -> str:
        """The helper computing C's `/` or `%` ("div" / "mod") on signed `t` (32 or 64 bits)
        as the semantics do where C does not define it: INT_MIN / -1 wraps to INT_MIN, its
        remainder is 0 (x86 traps; GPUs give an unspecified value). A function, not an inline
        `?:`, so each operand is evaluated once."""
        ct = self.compute_type(t)
        fn = f"tilecore_c{op}_{''.join(ch if ch.isalnum() else '_' for ch in ct)}"
        if fn not in self.helpers:
            # -a through the unsigned type: negating INT_MIN is undefined in C, not in unsigned
            body = (f"(({ct})(0u - (unsigned {ct})a)) : a / b" if op == "div" else "0 : a % b")
            self.helpers[fn] = (f"{self.helper_prefix()} {ct} {fn}({ct} a, {ct} b) "
                                f"{{ return b == -1 ? {body}; }}")
        return fn

    def expr_Unary(self, e: Unary) -> str:
        """Negation, not, abs and the float functions (FLOAT_FUNCS), computed like BinOp."""
        t = e.dtype
        if e.op == "not":
            return f"(!{self.expr(e.a)})"
        if t.is_int or t.is_bool:
            a = self.expr(e.a)
            if e.op == "neg":
                return f"(-({a}))"
            if e.op == "abs":
                return f"(({a}) < 0 ? -({a}) : ({a}))"
            raise TileInternalError(f"unary {e.op} on integer {t}")
        a = self.compute(e.a)
        if e.op == "neg":
            text = f"(-({a}))"
        else:
            text = self.math_call(e.op, dt.float64 if t.name == "float64" else dt.float32).format(a)
        return self.from_float(t, text) if t.is_narrow_float else text

    def expr_Cast(self, e: Cast) -> str:
        """A conversion with one rounding (narrow floats through the language's conversions)."""
        src, dst = e.value.dtype, e.dtype
        v = self.expr(e.value)
        if dst.is_narrow_float:
            if src.is_narrow_float:
                return self.from_float(dst, self.to_float(src, v))
            if src.name == "float64" or (src.is_int and src.bits >= 32):
                # one rounding, as the oracle does (through float32 would round twice)
                return self.from_double(dst, f"((double)({v}))")
            return self.from_float(dst, f"((float)({v}))")
        if src.is_narrow_float:
            v = self.to_float(src, v)
            if dst.name == "float32":
                return v
        if dst.is_bool:
            return f"(({v}) != 0)"
        return f"(({self.type_name(dst)})({v}))"

    def expr_Select(self, e: Select) -> str:
        """`c ? a : b`: only the chosen side is evaluated, as the IR requires."""
        return f"({self.expr(e.cond)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"

    # ------------------------------------------------------------------ integer-only operations
    def int_op(self, e) -> str:
        """Floor division / remainder and the bit operations (`tilecore.semantics`) in C: floor
        division corrects C's truncating quotient by one where the remainder is nonzero and
        the operands' signs differ; left shifts of signed values shift the unsigned bits (a
        negative value's shift is undefined in C, the two's complement result is not)."""
        t = e.a.dtype
        if isinstance(e, Unary):
            return f"(~({self.expr(e.a)}))"
        a, b = self.expr(e.a), self.expr(e.b)
        signed = t.kind == "int"
        if e.op in _C_BIT_OPS:
            return f"(({a}) {_C_BIT_OPS[e.op]} ({b}))"
        if e.op == "shr":
            return f"(({a}) >> ({b}))"  # arithmetic on signed ints (gcc, clang, nvcc, Metal)
        if e.op == "shl":
            if not signed and t.bits >= 32:  # narrow unsigned ints compute as (signed) int
                return f"(({a}) << ({b}))"
            ct = self.compute_type(t)
            return f"(({ct})((unsigned {ct.replace('signed ', '')})({a}) << ({b})))"
        if not signed:
            return f"(({a}) {'/' if e.op == 'floordiv' else '%'} ({b}))"
        checked = _may_overflow(e)
        r = f"{self.checked_division('mod', t)}({a}, {b})" if checked else f"(({a}) % ({b}))"
        fix = f"({r} != 0 && (({r} < 0) != (({b}) < 0)))"
        if e.op == "floordiv":
            q = f"{self.checked_division('div', t)}({a}, {b})" if checked else f"(({a}) / ({b}))"
            return f"({q} - {fix})"
        return f"({r} + ({fix} ? ({b}) : 0))"


_C_BIT_OPS = {"bitand": "&", "bitor": "|", "bitxor": "^"}


def _may_overflow(e: BinOp) -> bool:
    """Whether integer division `e` may compute INT_MIN / -1 (undefined in C): signed 32- or
    64-bit operands (narrower ones compute in `int`, where it cannot overflow) and a divisor
    that is not a constant other than -1."""
    t = e.a.dtype
    if t.kind != "int" or t.bits < 32:
        return False
    return not (isinstance(e.b, Const) and int(e.b.value) != -1)
