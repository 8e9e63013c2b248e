"""The C-style renderer: statements, flat memory and the kernel driver over the C-expression layer.

In the spirit of tinygrad's `renderer/cstyle.py`: one base walks the thread IR and prints C; a
language supplies spellings through hooks. Layers (each its own module): `cexpr.py` (names,
types, scalar expressions), this module (statements, memory, the driver), `gpu.py` (what every
GPU dialect shares: grid linearization, shared-memory carving, narrow atomics, shuffles,
operand packing), then a dialect subclass (CUDA in backends/cuda; HIP and Metal later).

Semantics follow the `interp` oracle exactly where C allows:
- narrow floats (fp16, bf16, fp8) are stored narrow but every operation computes in float32 and
  rounds back to the narrow type after each operation;
- integer division and remainder are C's (truncating), which is what the IR means;
- ints narrower than 32 bits compute as C's promoted `int` and wrap to their width only when
  stored (a memory write or a cast), as the oracle computes ints wide and wraps on store; let
  bindings of such ints are therefore declared `int`.

A dialect adds the spelling of a new thread-IR statement by defining `stmt_<ClassName>` (and of
an expression, `expr_<ClassName>`); `stmt` / `expr` dispatch on the class name.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import TileInternalError, TileTargetError
from ..ir.expr import Cast, Const
from ..ir.stmt import SeqStmt
from ..ir.thread import ThreadKernel, find_kernel
from .cexpr import C_RESERVED, C_TYPES, FLOAT_BIN_FUNCS, FLOAT_FUNCS, CExprRenderer
from .debug import DebugRenderMixin  # T.print / T.device_assert
from .spec import KernelParam, RenderedKernel

# The dtype and math tables live in cexpr.py; they are re-exported here, their historical home.
__all__ = ["C_RESERVED", "C_TYPES", "FLOAT_BIN_FUNCS", "FLOAT_FUNCS", "CStyleRenderer"]


class CStyleRenderer(DebugRenderMixin, CExprRenderer):
    """Renders a lowered module (one ThreadKernel) as C-like source; see the module docstring.

    Statement hooks a language must supply: `barrier_text`, `vector_types` / `vector_zeros`,
    `signature`, `index_bindings`, `shared_decls`; optional: `prelude`, `table_decl`,
    `param_decl`, `register_decl`, `late_decls`, and `extra_params` (parameters a hook adds
    while rendering).
    """

    # bytes -> the dialect's type moved in one access of that size, and its zero value
    vector_types: dict[int, str] = {}
    vector_zeros: dict[int, str] = {}

    def __init__(self, fast_math: bool = False):
        super().__init__(fast_math)
        self.lines: list[str] = []
        self.depth = 0
        self.tables: dict[tuple, str] = {}  # LaneTable values -> name of its constant array
        self.kernel: ThreadKernel | None = None
        self.extra_params: list[str] = []  # declarations hooks append (Metal's index attributes)

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

    def stmt_While(self, s) -> None:
        """A C while loop (the condition re-evaluated before each iteration)."""
        self.emit(f"while ({self.expr(s.cond)}) {{")
        self.block(s.body)
        self.emit("}")

    def stmt_GridSync(self, s) -> None:
        """T.sync_grid needs every block resident at once (a cooperative launch), which no
        C-style target launches yet: refused with the targets that run it."""
        raise TileTargetError("T.sync_grid() needs a cooperative launch, which this target does not "
                              "make", s.loc, hint="run the kernel on interp, cpu or an emu target, "
                              "or split it into two kernels at the sync")

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
        dst = self.bit_view(vt, self.ref(s.dst, s.dst_offset), s.dst.scope)
        src = self.bit_view(vt, self.ref(s.src, s.src_offset), s.src.scope, const=True)
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
        """A type of `nbytes` (1, 2, 4, 8, 16) bytes moved in one access: `vector_types[nbytes]`."""
        return self.vector_types[nbytes]

    def vector_zero(self, nbytes: int) -> str:
        """A zero value of `vector_type(nbytes)`: `vector_zeros[nbytes]`."""
        return self.vector_zeros[nbytes]

    def prelude(self) -> list[str]:
        """Lines before everything else: the helper functions the kernel uses (`helpers`); a
        dialect puts its headers (which may depend on `used_types`) before them."""
        return list(self.helpers.values())

    def table_decl(self, name: str, values: tuple) -> str:
        """A constant int array readable by every thread."""
        return f"static const int {name}[{len(values)}] = {{{', '.join(map(str, values))}}};"

    def signature(self, name: str, params: list[str], kernel: ThreadKernel) -> str:
        """The kernel's signature line (without the opening brace)."""
        raise NotImplementedError

    def param_decl(self, p: KernelParam, c_name: str, index: int) -> str:
        """Parameter `index`'s declaration: a pointer to the tensor's elements, or a value."""
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

    def late_decls(self) -> list[str]:
        """Kernel-scope declarations (after the register arrays) that hooks only learn of while
        rendering the body (GPU: the bases of shared operand addresses)."""
        return []

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
        decls = [self.param_decl(p, p.name, i) for i, p in enumerate(params)]
        self.depth = 1
        self.lines = []
        for line in self.index_bindings(kernel):
            self.emit(line)
        shared_lines, smem = self.shared_decls(kernel)
        for line in shared_lines:
            self.emit(line)
        for buf in kernel.registers:
            self.emit(self.register_decl(buf))
        mark = len(self.lines)
        self.stmt(kernel.body)
        body = self.lines[:mark] + [self.indent_unit + d for d in self.late_decls()] + self.lines[mark:]
        head = self.prelude()
        head += [self.table_decl(n, v) for v, n in self.tables.items()]
        sig = self.signature(entry, decls + self.extra_params, kernel)
        src = "\n".join(head + ["", sig + " {"] + body + ["}", ""])
        return RenderedKernel(src, entry, self.launch_grid(kernel), (kernel.num_threads, 1, 1), smem,
                              tuple(params))

    def launch_grid(self, kernel: ThreadKernel) -> tuple:
        """The three launch extents (expressions): the kernel's grid, padded with 1s."""
        return tuple(kernel.grid) + (Const(1, dt.int32),) * (3 - len(kernel.grid))

