"""The C-style renderer base: thread-level IR to C-like source, shared by CUDA, HIP and Metal.

In the spirit of tinygrad's `renderer/cstyle.py`: one base class walks the IR and prints C;
a language is a small subclass that supplies type names, qualifiers and the spellings of
barriers, shuffles and intrinsics. Rendering dispatches on the node's class name
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
from ..ir.expr import BinOp, Cast, Const, Select, Unary, Var
from ..ir.stmt import SeqStmt
from ..ir.thread import ThreadKernel, find_kernel
from .spec import KernelParam, RenderedKernel

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
# Float binary functions: (float32, float64).
FLOAT_BIN_FUNCS: dict[str, tuple[str, str]] = {
    "min": ("fminf({}, {})", "fmin({}, {})"), "max": ("fmaxf({}, {})", "fmax({}, {})"),
    "pow": ("powf({}, {})", "pow({}, {})"), "mod": ("fmodf({}, {})", "fmod({}, {})"),
}


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


class CStyleRenderer:
    """Renders thread-level IR to C-like source; subclasses supply the language's spellings.

    Subclass attributes: `type_overrides` (dtype name -> C type), `kernel_prefix`, `restrict`.
    Subclass methods for what differs per language: `to_float` / `from_float` (narrow-float
    conversion), `float_literal_special` (inf / nan), and the statement hooks of thread IR nodes.
    """

    type_overrides: dict[str, str] = {}
    reserved_words: frozenset = frozenset()
    indent_unit = "  "

    def __init__(self):
        self.types = {**C_TYPES, **self.type_overrides}
        self.lines: list[str] = []
        self.depth = 0
        self.names: dict[int, str] = {}
        self._used_names: set[str] = set(C_RESERVED | self.reserved_words | set(self.types.values()))
        self.used_types: set[str] = set()  # dtype names rendered (decides the headers needed)
        self.tables: dict[tuple, str] = {}  # LaneTable values -> name of its constant array
        self.kernel: ThreadKernel | None = None

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

    # ------------------------------------------------------------------ expressions
    def expr(self, e) -> str:
        """C text of expression `e`, dispatched on its class name."""
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
            if d.name in ("int64",):
                return f"{v}LL"
            if d.kind == "uint":
                return f"{v}u"
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

    def expr_BinOp(self, e: BinOp) -> str:
        """Arithmetic, comparison or logic; floats through float32 for narrow types, C ints otherwise."""
        t = e.a.dtype
        if e.op in ("and", "or"):
            return f"({self.expr(e.a)} {_C_OPS[e.op]} {self.expr(e.b)})"
        if e.op in _CMP:
            return f"({self.compute(e.a)} {_C_OPS[e.op]} {self.compute(e.b)})"
        if t.is_float:
            a, b = self.compute(e.a), self.compute(e.b)
            prec = 1 if t.name == "float64" else 0
            if e.op in FLOAT_BIN_FUNCS:
                text = FLOAT_BIN_FUNCS[e.op][prec].format(a, b)
            else:
                text = f"({a} {_C_OPS[e.op]} {b})"
            return self.from_float(t, text) if t.is_narrow_float else text
        a, b = self.expr(e.a), self.expr(e.b)
        if e.op in ("min", "max"):
            cmp = "<" if e.op == "min" else ">"
            return f"(({a}) {cmp} ({b}) ? ({a}) : ({b}))"
        if e.op == "pow":
            return f"(({self.compute_type(t)})pow((double)({a}), (double)({b})))"
        return f"({a} {_C_OPS[e.op]} {b})"

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
            text = FLOAT_FUNCS[e.op][1 if t.name == "float64" else 0].format(a)
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

    # ------------------------------------------------------------------ statements
    def emit(self, line: str) -> None:
        """Append one line at the current indentation."""
        self.lines.append(self.indent_unit * self.depth + line if line else "")

    def stmt(self, s) -> None:
        """Render statement `s`, dispatched on its class name."""
        fn = getattr(self, f"stmt_{type(s).__name__}", None)
        if fn is None:
            raise TileInternalError(f"{type(self).__name__} cannot render statement {type(s).__name__}")
        fn(s)

    def block(self, s) -> None:
        """Render `s` one indentation level deeper."""
        self.depth += 1
        self.stmt(s)
        self.depth -= 1

    def stmt_SeqStmt(self, s) -> None:
        """Each statement in order."""
        for x in s.stmts:
            self.stmt(x)

    def stmt_LetStmt(self, s) -> None:
        """A const binding for the rest of the C block (narrow ints held as int)."""
        d = s.var.dtype
        ty = self.compute_type(d) if d.is_int else self.type_name(d)
        self.emit(f"const {ty} {self.name_of(s.var)} = {self.expr(s.value)};")

    def stmt_For(self, s) -> None:
        """A C for loop; `unroll` loops get `#pragma unroll`."""
        v = self.name_of(s.var)
        ty = self.type_name(s.var.dtype)
        if s.kind == "unroll":
            self.emit("#pragma unroll")
        cmp = "<" if s.step > 0 else ">"
        step = f"{v}++" if s.step == 1 else f"{v} += {s.step}"
        self.emit(f"for ({ty} {v} = {self.expr(s.start)}; {v} {cmp} {self.expr(s.stop)}; {step}) {{")
        self.block(s.body)
        self.emit("}")

    def stmt_IfThenElse(self, s) -> None:
        """An if / else block."""
        self.emit(f"if ({self.expr(s.cond)}) {{")
        self.block(s.then_body)
        if s.else_body is not None:
            self.emit("} else {")
            self.block(s.else_body)
        self.emit("}")

    # ------------------------------------------------------------------ thread-level nodes
    def zero(self, d: DType) -> str:
        """The value 0 of dtype `d`."""
        if d.is_bool:
            return "false"
        return self.float_literal(0.0, d) if d.is_float else f"(({self.type_name(d)})0)"

    def converted(self, value, d: DType) -> str:
        """`value` rendered and rounded to dtype `d` (memory writes round to the buffer's dtype)."""
        return self.expr(value if value.dtype == d else Cast(value, d))

    def ref(self, buf, offset) -> str:
        """The element `buf[offset]` as an lvalue."""
        return f"{self.name_of(buf)}[{self.expr(offset)}]"

    def expr_MemLoad(self, e) -> str:
        """`buf[offset]`, or 0 of the dtype when the predicate is false (nothing is read)."""
        if e.dtype != e.buffer.dtype:
            raise TileInternalError(f"MemLoad of {e.buffer.name} as {e.dtype}, stored as {e.buffer.dtype}")
        text = self.ref(e.buffer, e.offset)
        if e.pred is None:
            return text
        return f"({self.expr(e.pred)} ? {text} : {self.zero(e.dtype)})"

    def expr_LaneTable(self, e) -> str:
        """A read of a constant int table, declared once before the kernel."""
        name = self.tables.get(e.values)
        if name is None:
            name = f"lane_table_{len(self.tables)}"
            self.reserve(name)
            self.tables[e.values] = name
        return f"{name}[{self.expr(e.index)}]"

    def guarded(self, pred, line: str) -> None:
        """Emit `line`, under `if (pred)` when there is a predicate."""
        self.emit(line if pred is None else f"if ({self.expr(pred)}) {line}")

    def stmt_MemStore(self, s) -> None:
        """`buf[offset] = value` rounded to the buffer's dtype, under its predicate."""
        self.guarded(s.pred, f"{self.ref(s.buffer, s.offset)} = {self.converted(s.value, s.buffer.dtype)};")

    def stmt_Barrier(self, s) -> None:
        """The language's block barrier, with the reason lowering recorded."""
        self.emit(self.barrier_text() + (f"  // {s.reason}" if s.reason else ""))

    def stmt_VecMove(self, s) -> None:
        """One 1-16 byte access each way through the language's vector type; zero fill when asked."""
        nbytes = s.lanes * s.src.dtype.itemsize
        vt = self.vector_type(nbytes)
        dst = f"*reinterpret_cast<{vt}*>(&{self.ref(s.dst, s.dst_offset)})"
        src = f"*reinterpret_cast<const {vt}*>(&{self.ref(s.src, s.src_offset)})"
        if s.pred is None:
            self.emit(f"{dst} = {src};")
            return
        self.emit(f"if ({self.expr(s.pred)}) {{")
        self.emit(f"{self.indent_unit}{dst} = {src};")
        if s.zero_fill:
            self.emit("} else {")
            self.emit(f"{self.indent_unit}{dst} = {self.vector_zero(nbytes)};")
        self.emit("}")

    def stmt_ThreadKernel(self, s) -> None:
        """Only the outermost ThreadKernel is rendered (by `render`)."""
        raise TileInternalError("a ThreadKernel nested inside the kernel body")

    # ------------------------------------------------------------------ language hooks
    def barrier_text(self) -> str:
        """The block-wide barrier statement."""
        raise NotImplementedError

    def vector_type(self, nbytes: int) -> str:
        """A type of `nbytes` (1, 2, 4, 8, 16) bytes moved in one access."""
        raise NotImplementedError

    def vector_zero(self, nbytes: int) -> str:
        """A zero value of `vector_type(nbytes)`."""
        raise NotImplementedError

    def prelude(self) -> list[str]:
        """Lines before everything else (headers, helpers); may depend on `used_types`."""
        return []

    def table_decl(self, name: str, values: tuple) -> str:
        """A constant int array readable by every thread."""
        return f"static const int {name}[{len(values)}] = {{{', '.join(map(str, values))}}};"

    def signature(self, name: str, params: list[str], kernel: ThreadKernel) -> str:
        """The kernel's signature line (without the opening brace)."""
        raise NotImplementedError

    def param_decl(self, p: KernelParam, c_name: str) -> str:
        """One parameter's declaration: a pointer to the tensor's elements, or a value."""
        t = self.type_name(p.dtype)
        return f"{t}* {c_name}" if p.is_pointer else f"{t} {c_name}"

    def index_bindings(self, kernel: ThreadKernel) -> list[str]:
        """Declarations of the thread and block index variables."""
        raise NotImplementedError

    def shared_decls(self, kernel: ThreadKernel) -> tuple[list[str], int]:
        """Declarations of the block's shared buffers, and the dynamic shared bytes they take."""
        raise NotImplementedError

    def register_decl(self, buf) -> str:
        """A per-thread register array."""
        return f"{self.type_name(buf.dtype)} {self.name_of(buf)}[{buf.shape[0]}];"

    # ------------------------------------------------------------------ driver
    def render(self, module) -> RenderedKernel:
        """The source of `module` (a lowered Module) and how to launch it."""
        func = module.func
        body = func.body
        while isinstance(body, SeqStmt) and len(body.stmts) == 1:
            body = body.stmts[0]
        kernel = body if isinstance(body, ThreadKernel) else None
        if kernel is None:
            found = find_kernel(func.body)
            raise TileInternalError(
                f"{type(self).__name__} renders lowered kernels whose body is one ThreadKernel; "
                f"{func.name} has {'a tile-level body' if found is None else 'statements around it'}")
        if len(kernel.grid) > 3:
            raise TileInternalError(f"{func.name} has a {len(kernel.grid)}-D grid; at most 3 are launchable")
        self.kernel = kernel
        entry = self.name_of(func)
        params = [KernelParam(self.name_of(p), p.dtype, True) for p in func.params]
        params += [KernelParam(self.name_of(v), v.dtype, False) for v in func.dyn_vars]
        decls = [self.param_decl(p, p.name) for p in params]
        self.depth = 1
        self.lines = []
        for line in self.index_bindings(kernel):
            self.emit(line)
        shared_lines, smem = self.shared_decls(kernel)
        for line in shared_lines:
            self.emit(line)
        for buf in kernel.registers:
            self.emit(self.register_decl(buf))
        self.stmt(kernel.body)
        body = self.lines
        head = self.prelude()
        head += [self.table_decl(n, v) for v, n in self.tables.items()]
        src = "\n".join(head + ["", self.signature(entry, decls, kernel) + " {"] + body + ["}", ""])
        return RenderedKernel(src, entry, self.launch_grid(kernel), (kernel.num_threads, 1, 1), smem,
                              tuple(params))

    def launch_grid(self, kernel: ThreadKernel) -> tuple:
        """The three launch extents (expressions): the kernel's grid, padded with 1s."""
        return tuple(kernel.grid) + (Const(1, dt.int32),) * (3 - len(kernel.grid))

