"""The frontend: parse a decorated Python function's AST into tile IR.

The kernel body is never executed by Python. Each statement is translated: `with T.Kernel`
opens the launch, `for ... in T.Parallel/T.Pipelined/range` become loops, `if` on kernel values
becomes IR (on Python values it is decided now), assignments bind names or store into buffers,
and T.* calls emit tile operations. Anything else is a TileSyntaxError naming the line.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import inspect
import math
import textwrap

from .. import dtypes as dt
from ..errors import (
    SourceLoc,
    TileBindingError,
    TileError,
    TileNameError,
    TileShapeError,
    TileSyntaxError,
    TileTypeError,
)
from ..ir.buffer import Buffer
from ..ir.expr import Const, Expr, Load, Var, as_expr, binop, bitwise, cast, const_int, select, unary
from ..ir.loops import While
from ..ir.module import PrimFunc
from ..ir.stmt import For, IfThenElse, KernelLaunch, LetStmt, SeqStmt, Store
from . import builder as bld
from . import intops, loop_exit, persistent, reducers
from .buffer_annotations import check_macro_args
from .global_views import view_ref
from .ops import KernelSpec, LoopSpec, TensorSpec
from .persistent import PersistentSpec
from .refs import Ref, SliceItem
from .views import BufferView

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Mod: "mod",
           ast.Pow: "pow", ast.FloorDiv: "floordiv", ast.BitAnd: "bitand", ast.BitOr: "bitor",
           ast.BitXor: "bitxor", ast.LShift: "shl", ast.RShift: "shr"}
_BIT_OPS = ("bitand", "bitor", "bitxor", "shl", "shr")
_CMPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PY_CMP = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
           "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}
# Identity and membership are about Python objects, decided when the kernel is built.
_PY_ONLY_CMP = {ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
                ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_PY_SAFE = {builtins.int, builtins.float, builtins.bool, builtins.len, builtins.range,
            builtins.tuple, builtins.list, builtins.zip, builtins.enumerate, builtins.isinstance,
            builtins.sum, builtins.any, builtins.all, builtins.sorted, builtins.reversed,
            builtins.divmod, builtins.round, builtins.str, builtins.dict, builtins.set,
            builtins.hasattr, builtins.getattr, builtins.callable, builtins.map, builtins.filter,
            builtins.slice, builtins.type}
_UNSUPPORTED = {
    ast.Continue: ("`continue` is not supported in kernels", "guard the loop body with `if`"),
    ast.Return: ("`return` is not supported inside a kernel", "outputs are written to tensors"),
    ast.Try: ("`try` is not supported in kernels",
             "check inputs before calling the kernel; guard risky elements with `if`"),
    ast.Raise: ("`raise` is not supported in kernels",
               "validate arguments in Python before calling the kernel"),
    ast.FunctionDef: ("nested function definitions are not supported in kernels",
                      "define it outside and decorate it with @T.macro"),
    ast.Lambda: ("lambdas are not supported in kernels", "write a @T.macro helper instead"),
    ast.Import: ("imports are not supported in kernels", "import at module level"),
    ast.Global: ("`global` is not supported in kernels",
                "kernels read module globals as constants; write results to tensors"),
    ast.Delete: ("`del` is not supported in kernels", "drop the statement; names end with the kernel"),
}


class Macro:
    """A Python function whose body is inlined into kernels that call it (`@T.macro`)."""

    def __init__(self, fn):
        self.fn = fn
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__


class _Scope:
    def __init__(self, kind: str):
        self.kind = kind
        self.vars: dict[str, object] = {}


class Parser:
    """Translates one function (kernel or macro) into statements of the current builder."""

    def __init__(self, fn, builder: bld.Builder | None = None, let_vars: set | None = None,
                 outer_locals: dict | None = None):
        self.fn = fn
        self.outer_locals = outer_locals or {}
        self.outer_chain: list[dict] = []  # locals of the frames further out (see string_annotation)
        try:
            lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise TileSyntaxError(
                f"cannot read the source of {getattr(fn, '__name__', fn)!r}: {e}",
                hint="define kernels in a .py file (not in an interactive prompt or exec)",
            ) from e
        self.file = inspect.getsourcefile(fn) or "<unknown>"
        self.line0 = start
        self.tree = ast.parse(textwrap.dedent("".join(lines)))
        self.globals = fn.__globals__
        self.closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:  # empty cell: the name is assigned later
                    pass
        self.scopes: list[_Scope] = [_Scope("function")]
        self.b = builder or bld.Builder()
        self.let_vars = let_vars if let_vars is not None else set()
        self.breaks: list = []  # exit flags of the enclosing loops (None: no `break`; loop_exit.py)
        self.kernel_seen = False

    # ------------------------------------------------------------------ helpers
    def loc(self, node) -> SourceLoc:
        return SourceLoc(self.file, self.line0 + getattr(node, "lineno", 1) - 1)

    def lookup(self, name: str, node):
        for sc in reversed(self.scopes):
            if name in sc.vars:
                return sc.vars[name]
        if name in self.closure:
            return self.closure[name]
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        known = [n for sc in self.scopes for n in sc.vars] + list(self.closure)
        close = difflib.get_close_matches(name, known, n=1)
        raise TileNameError(f"name {name!r} is not defined", self.loc(node),
                            hint=f"did you mean {close[0]!r}?" if close else
                            "define it before the kernel (a Python value) or assign it above")

    def lookup_local(self, name: str):
        """The kernel-scope binding of `name` (not closure, globals or builtins), or None."""
        idx = self._scope_of(name)
        return self.scopes[idx].vars[name] if idx is not None else None

    def _scope_of(self, name: str) -> int | None:
        for i in range(len(self.scopes) - 1, -1, -1):
            if name in self.scopes[i].vars:
                return i
        return None

    # ------------------------------------------------------------------ entry points
    def parse_prim_func(self) -> PrimFunc:
        fdef = self.tree.body[0]
        if not isinstance(fdef, ast.FunctionDef):
            raise TileSyntaxError("@T.prim_func must decorate a function", self.loc(fdef),
                                  hint="put @T.prim_func on a `def`")
        params, signature = [], []
        annotations = getattr(self.fn, "__annotations__", {})
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs:
            raise TileSyntaxError("kernel parameters must be plain positional tensors", self.loc(fdef),
                                  hint="list each tensor as `A: T.Tensor(shape, dtype)`; no *args, **kwargs "
                                  "or keyword-only parameters")
        for arg in a.args:
            ann = annotations.get(arg.arg)
            if isinstance(ann, str) and not isinstance(ann, dt.DType):  # DType is a str too
                ann = self.string_annotation(arg, ann)
            if isinstance(ann, str):
                ann = dt.as_dtype(ann)
            if isinstance(ann, dt.DType):
                signature.append(self.scalar_param(arg, ann))
                continue
            if not isinstance(ann, TensorSpec):
                raise TileTypeError(
                    f"kernel parameter {arg.arg!r} is annotated with {ann!r}, neither "
                    "T.Tensor(shape, dtype) nor an integer dtype", self.loc(arg),
                    hint=f"write `{arg.arg}: T.Tensor((M, N), 'float16')` for a tensor or "
                    f"`{arg.arg}: T.int32` for a scalar passed as a Python int",
                )
            buf = Buffer(arg.arg, ann.shape, ann.dtype, "global")
            self.b.names.add(arg.arg)
            self.scopes[0].vars[arg.arg] = buf
            params.append(buf)
            signature.append(buf)
        bld.push(self.b)
        try:
            body = self.block(fdef.body, "function")
        finally:
            bld.pop()
        if not self.kernel_seen:
            raise TileSyntaxError("the kernel body has no `with T.Kernel(...)`", self.loc(fdef),
                                  hint="wrap the body in `with T.Kernel(grid..., threads=128) as (bx, by):`")
        scalars = tuple(v for v in signature if isinstance(v, Var))
        attrs = (("scalar_params", scalars), ("signature", tuple(signature))) if scalars else ()
        from .compat_ops import with_scratch

        params, attrs = with_scratch(tuple(params), tuple(signature), attrs, self.b.scratch)
        return PrimFunc(fdef.name, tuple(params), body, self.loc(fdef), attrs)

    def string_annotation(self, arg, text: str):
        """A `from __future__ import annotations` annotation, evaluated in the kernel's closure
        and its decorating frame; failing that, in the frames that called it (a factory nested
        in a factory whose sizes only the annotations use, as TileLang examples write)."""
        scope = {**self.outer_locals, **self.closure}
        try:
            return eval(text, self.globals, scope)  # noqa: S307 - the user's own annotation
        except NameError as e:
            err = e
        for more in self.outer_chain:
            scope = {**more, **scope}
            try:
                return eval(text, self.globals, scope)  # noqa: S307
            except NameError as e:
                err = e
        raise TileNameError(f"annotation of {arg.arg!r}: {err}", self.loc(arg),
                            hint="define or import the names the annotation uses") from None

    def scalar_param(self, arg, d: dt.DType) -> Var:
        """`n: T.int32` in the signature: an integer passed by value at call time (a Var bound
        like a symbolic dimension, so it may size the grid)."""
        if not d.is_int:
            raise TileTypeError(
                f"scalar kernel parameter {arg.arg!r} has dtype {d}; scalar parameters are integers",
                self.loc(arg), hint=f"pass a {d} value as a one-element tensor: "
                f"`{arg.arg}: T.Tensor((1,), '{d}')`")
        v = Var(arg.arg, d)
        self.b.names.add(arg.arg)
        self.scopes[0].vars[arg.arg] = v
        return v

    def inline_macro(self, args, kwargs, node):
        """Parse this (macro) function's body into the caller's current block."""
        fdef = self.tree.body[0]
        try:
            sig = inspect.signature(self.fn).bind(*args, **kwargs)
        except TypeError as e:
            raise TileSyntaxError(f"bad arguments to macro {self.fn.__name__}: {e}",
                                  hint=f"the macro's signature is {self.fn.__name__}"
                                  f"{inspect.signature(self.fn)}") from e
        sig.apply_defaults()
        check_macro_args(self.fn, sig.arguments, self.b.loc)  # T.SharedBuffer(...) annotations
        self.scopes = [_Scope("macro")]
        self.scopes[0].vars.update(sig.arguments)
        for s in fdef.body:
            self.stmt(s)

    # ------------------------------------------------------------------ statements
    def block(self, stmts, kind: str) -> SeqStmt:
        self.b.blocks.append([])
        self.scopes.append(_Scope(kind))
        try:
            loop_exit.stmts(self, stmts)
        finally:
            self.scopes.pop()
            out = self.b.blocks.pop()
        return SeqStmt(tuple(out))

    def stmt(self, node):
        loc = self.loc(node)
        self.b.loc = loc
        try:
            self._stmt(node)
        except TileError as e:
            raise e.with_loc(loc) from None
        except RecursionError:
            raise
        except (TypeError, ValueError) as e:
            raise TileSyntaxError(f"invalid kernel statement: {e}", loc,
                                  hint="see docs/language.md for what kernels accept") from None

    def _stmt(self, node):
        if isinstance(node, ast.Assert):
            return self.build_time_assert(node)
        for kind, (msg, hint) in _UNSUPPORTED.items():
            if isinstance(node, kind):
                raise TileSyntaxError(msg, self.loc(node), hint=hint)
        if isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return  # docstring
            v = self.ev(node.value)
            if v is not None:
                raise TileSyntaxError("this expression's value is discarded", self.loc(node),
                                      hint="assign it to a buffer element or a name")
        elif isinstance(node, ast.Assign):
            if len(node.targets) != 1:
                return self.chained_assign(node)
            self.assign(node.targets[0], node.value)
        elif isinstance(node, ast.AugAssign):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise TileSyntaxError(f"operator {type(node.op).__name__} is not supported", self.loc(node),
                                      hint="write the operation out: `x = x op y`")
            cur = self.ev(node.target)
            self.assign_value(node.target, self.arith(op, cur, self.ev(node.value)))
        elif isinstance(node, ast.AnnAssign):
            if node.value is None:
                raise TileSyntaxError("an annotated name needs a value", self.loc(node),
                                      hint="write `x: T.float32 = value`, or T.alloc_var for a mutable name")
            ann = self.ev(node.annotation)
            val = self.ev(node.value)
            if isinstance(ann, dt.DType):
                val = cast(val, ann)
            self.assign_value(node.target, val)
        elif isinstance(node, ast.For):
            self.for_(node)
        elif isinstance(node, ast.If):
            self.if_(node)
        elif isinstance(node, ast.While):
            self.while_(node)
        elif isinstance(node, ast.With):
            self.with_(node)
        elif isinstance(node, ast.Pass):
            return
        elif isinstance(node, ast.Break):
            loop_exit.do_break(self, node)
        else:
            raise TileSyntaxError(f"`{type(node).__name__}` statements are not supported in kernels",
                                  self.loc(node),
                                  hint="see docs/language.md for the statements kernels accept")

    def chained_assign(self, node: ast.Assign):
        """`a = b = value`: the value is evaluated once and bound to each target, left to right."""
        value = self.ev(node.value)
        for t in node.targets:
            self.assign_value(t, value)

    def build_time_assert(self, node: ast.Assert):
        """`assert cond, msg` on build-time values is checked now (TileLang's frontend runs it
        as Python); on a kernel value it would need a device-side check, which is not provided."""
        cond = self.ev(node.test)
        if isinstance(cond, Ref):
            cond = cond.as_expr()
        if isinstance(cond, Const):
            cond = cond.value
        if isinstance(cond, Expr):
            raise TileSyntaxError("`assert` on a kernel value is not supported (only build-time "
                                  "Python values can be asserted)", self.loc(node),
                                  hint="check inputs before calling the kernel")
        if not cond:
            msg = self.ev(node.msg) if node.msg is not None else ast.unparse(node.test)
            raise TileError(f"assertion failed while building the kernel: {msg}", self.loc(node),
                            hint="change the build-time values (shapes, parameters) so the assert holds")

    def assign(self, target, value_node):
        if isinstance(target, ast.Name):
            self.b.pending = target.id
        try:
            value = self.ev(value_node)
        finally:
            self.b.pending = None
        self.assign_value(target, value)

    def assign_value(self, target, value):
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value, target)
        elif isinstance(target, ast.Subscript):
            ref = self.ev(target)
            if not isinstance(ref, Ref):
                raise TileSyntaxError("only buffer elements can be assigned by subscript", self.loc(target),
                                      hint="assign to a buffer element like A[i, j]")
            if not ref.is_element:  # TVM script's vector store: a tile copy or a fill
                self.assign_region(ref, value)
                return
            buf = ref.buffer
            val = self.value_expr(value, buf.dtype)
            if id(buf) in self.b.reducers:  # T.alloc_reducer: the update forms (reducers.py)
                reducers.store(self.b, buf, ref.items, val)
                return
            self.b.emit(Store(buf, tuple(as_expr(i) for i in ref.items), cast(val, buf.dtype), self.b.loc))
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                raise TileSyntaxError("tuple assignment needs a tuple of the same length", self.loc(target),
                                      hint="give as many values as names")
            for t, v in zip(target.elts, value):
                self.assign_value(t, v)
        else:
            raise TileSyntaxError(f"cannot assign to {type(target).__name__}", self.loc(target),
                                  hint="assign to a name, a buffer element, or a tuple of them")

    def assign_region(self, ref: Ref, value) -> None:
        """`B[i:i + 4] = A[j:j + 4]` (also `T.Ramp(base, 1, lanes)` subscripts, TVM's vector
        index) is `T.copy` of the region, `B[i:i + 4] = v` with a scalar `T.fill`; any other
        value is a located error."""
        from . import ops

        if isinstance(value, Buffer) or (isinstance(value, Ref) and not value.is_element):
            ops.copy(value, ref)
            return
        try:
            scalar = self.value_expr(value, ref.buffer.dtype)
        except TileTypeError:
            raise TileShapeError(f"cannot assign {type(value).__name__} to a slice of {ref.buffer.name}",
                                 self.b.loc, hint="assign a region of the same shape (a copy) or a scalar "
                                 "(a fill), or write the elements in a T.Parallel loop") from None
        ops.fill(ref, scalar)

    def value_expr(self, value, like=None) -> Expr:
        if isinstance(value, Buffer):
            if value.is_var:
                return Load(value, (as_expr(0),))
            raise TileTypeError(f"{value.name} is a whole tile, not a value",
                                hint="use T.copy to move tiles, or index it inside T.Parallel")
        try:
            return as_expr(value, like)
        except TileTypeError:
            raise

    def assign_name(self, name: str, value, node):
        if getattr(value, "kernel_lambda", False):
            raise TileSyntaxError("a lambda in a kernel body is an argument (`T.comm_reducer(lambda "
                                  "x, y: x + y, ...)`), not a value to name", self.loc(node),
                                  hint="define the function before the kernel with `def`")
        idx = self._scope_of(name)
        existing = self.scopes[idx].vars[name] if idx is not None else None
        if isinstance(existing, bld.PrivateVar) and not isinstance(value, bld.PrivateVar):
            buf = existing.buffer
            self.b.emit(Store(buf, existing.index, cast(self.value_expr(value, buf.dtype), buf.dtype),
                              self.b.loc))
            return
        if isinstance(existing, Buffer) and existing.is_var and not (isinstance(value, Buffer)):
            self.b.emit(Store(existing, (as_expr(0),), cast(self.value_expr(value, existing.dtype),
                                                           existing.dtype), self.b.loc))
            return
        if isinstance(value, Ref):
            value = value.as_expr()
        self._check_rebind(name, existing, idx, value)
        if isinstance(value, Buffer) and value.is_var:
            value = Load(value, (as_expr(0),)) if isinstance(existing, (Var, Expr)) else value
        if isinstance(value, Expr) and not isinstance(value, Const):
            if isinstance(value, Var) and value not in self.let_vars:
                self._bind_scope().vars[name] = value
                return
            var = Var(name, value.dtype)
            self.let_vars.add(var)
            self.b.let_values[id(var)] = (var, value)
            self.b.emit(LetStmt(var, value, self.b.loc))
            self._bind_scope().vars[name] = var
            return
        self._bind_scope().vars[name] = value

    def _bind_scope(self) -> _Scope:
        """Where an assignment binds: the innermost scope that is not a parse-time unrolled
        loop over a Python sequence (an assignment there must outlive the iteration, as in
        Python, or `acc = acc + A[x]` over a tuple would keep only the first value)."""
        return next(s for s in reversed(self.scopes) if s.kind != "static")

    def _check_rebind(self, name: str, existing, idx, value) -> None:
        """A value name defined outside a kernel loop or branch and reassigned inside it: the
        reassignment would be invisible after the loop (each iteration binds a new immutable
        name), so `s = 0.0` then `for i in T.serial(n): s = s + A[i]` would leave `s` 0.0."""
        if idx is None:
            return
        scalar = (int, float, bool, Expr)
        if not isinstance(existing, scalar) or not isinstance(value, scalar + (Ref,)):
            return
        inner = max((i for i, s in enumerate(self.scopes) if s.kind in ("loop", "if")), default=-1)
        if idx >= inner:
            return
        if isinstance(existing, Var) and existing not in self.let_vars:
            what = "a loop or block index"
        else:
            what = "a value"
        raise TileBindingError(
            f"{name!r} is {what} defined outside this loop or branch and is reassigned inside it; "
            "kernel names are immutable, so the new value would be lost after the loop",
            hint=f"declare it with `{name} = T.alloc_var(dtype)` (and `{name} = init`) to make it "
            "mutable, or use a new name inside the loop")

    def for_(self, node: ast.For):
        if node.orelse:
            raise TileSyntaxError("`for ... else` is not supported", self.loc(node),
                                  hint="move the `else` body after the loop")
        it = self.ev(node.iter)
        if isinstance(it, range):
            it = LoopSpec("serial", (as_expr(it.start),), (as_expr(it.stop),), it.step)
        if isinstance(it, (tuple, list)):
            # A loop over a Python sequence unrolls now (meta-programming).
            loop_exit.enter(self, node, "sequence")  # refuses a `break`
            for v in it:
                self.scopes.append(_Scope("static"))
                try:
                    self.assign_value(node.target, v)
                    for s in node.body:
                        self.stmt(s)
                finally:
                    self.scopes.pop()
            return
        if isinstance(it, PersistentSpec):
            names = [node.target] if isinstance(node.target, ast.Name) else list(
                getattr(node.target, "elts", []))
            if not names or not all(isinstance(n, ast.Name) for n in names):
                raise TileSyntaxError("loop variables must be plain names", self.loc(node.target),
                                      hint="write `for bx, by in T.Persistent([m, n], sms, bid)`")
            loop_exit.enter(self, node, "persistent")  # refuses a `break`
            persistent.lower(self, node, it, names, _Scope)
            return
        if not isinstance(it, LoopSpec):
            raise TileSyntaxError(
                "a kernel loop must iterate over T.Parallel, T.Pipelined, T.serial, T.unroll or range",
                self.loc(node.iter), hint="write `for i in T.serial(n)` (or range(n))",
            )
        names = [node.target] if isinstance(node.target, ast.Name) else (
            list(node.target.elts) if isinstance(node.target, ast.Tuple) else None)
        if names is None or not all(isinstance(n, ast.Name) for n in names):
            raise TileSyntaxError("loop variables must be plain names", self.loc(node.target),
                                  hint="write `for i in ...` or `for i, j in T.Parallel(m, n)`")
        if len(names) != len(it.stops):
            raise TileBindingError(
                f"the loop binds {len(names)} name(s) but iterates over {len(it.stops)} dimension(s)",
                self.loc(node.target), hint="bind one name per extent: `for i, j in T.Parallel(m, n)`",
            )
        if it.kind != "parallel" and self.b.parallel_depth:
            pass  # a serial loop inside T.Parallel runs per element
        # A loop may reuse an enclosing loop's (or block index's) name, as in TileLang: inside
        # it the name is the new index, after it the enclosing one again (the loop's scope is
        # popped). The new index gets a fresh IR name so no backend sees two indices called `i`.
        vars_ = []
        for n in names:
            outer = self.lookup_local(n.id)
            shadows = isinstance(outer, Var) and outer not in self.let_vars
            if shadows:
                self.b.names.add(outer.name)  # so the fresh name differs from the outer one
            vars_.append(Var(self.b.unique_name(n.id) if shadows else n.id, dt.int32))
        flag = loop_exit.enter(self, node, it.kind)
        self.b.blocks.append([])
        self.scopes.append(_Scope("loop"))
        self.breaks.append(flag)
        if it.kind == "parallel":
            self.b.parallel_depth += 1
            self.b.parallel_loops.append((tuple(vars_), tuple(it.stops)))
        try:
            for n, v in zip(names, vars_):
                self.scopes[-1].vars[n.id] = v
            loop_exit.stmts(self, node.body)
        finally:
            self.breaks.pop()
            if it.kind == "parallel":
                self.b.parallel_depth -= 1
                self.b.parallel_loops.pop()
            self.scopes.pop()
            body = SeqStmt(tuple(self.b.blocks.pop()))
        loc = self.loc(node)
        body = loop_exit.guard_body(flag, body, loc)
        for v, start, stop in reversed(list(zip(vars_, it.starts, it.stops))):
            if not (start.dtype.is_int and stop.dtype.is_int):
                raise TileTypeError("loop bounds must be integers", loc,
                                    hint="convert the bound with int(...) or T.cast(..., 'int32')")
            body = For(v, start, stop, it.step, it.kind, body, it.annotations, loc)
        self.b.emit(body)

    def if_(self, node: ast.If):
        cond = self.ev(node.test)
        if isinstance(cond, Ref):
            cond = cond.as_expr()
        if not isinstance(cond, Expr):
            taken = node.body if cond else node.orelse
            loop_exit.stmts(self, taken)
            return
        if isinstance(cond, Const):
            taken = node.body if cond.value else node.orelse
            loop_exit.stmts(self, taken)
            return
        loc = self.loc(node)
        then = self.block(node.body, "if")
        other = self.block(node.orelse, "if") if node.orelse else None
        if isinstance(other, SeqStmt) and len(other.stmts) == 1 and isinstance(other.stmts[0], IfThenElse):
            other = other.stmts[0]  # `elif`: the chain stays a chain (warpgroup branches read it)
        if not cond.dtype.is_bool:
            cond = binop("ne", cond, 0)
        self.b.emit(IfThenElse(cond, then, other, loc))

    def while_(self, node: ast.While):
        """`while cond:` on a kernel value: a `While` node, the condition evaluated before each
        iteration. A build-time condition is decided now: false runs nothing, true never ends."""
        if node.orelse:
            raise TileSyntaxError("`while ... else` is not supported", self.loc(node),
                                  hint="move the `else` body after the loop")
        cond = self.ev(node.test)
        if isinstance(cond, Ref):
            cond = cond.as_expr()
        if not isinstance(cond, Expr) or isinstance(cond, Const):
            if not (cond.value if isinstance(cond, Const) else cond):
                return
            raise TileSyntaxError(
                "this `while` condition is true when the kernel is built, so the loop never ends",
                self.loc(node), hint="make the condition read a kernel value the body changes "
                "(a `T.alloc_var` or a local buffer element)")
        loc = self.loc(node)
        flag = loop_exit.enter(self, node, "while")
        self.breaks.append(flag)
        try:
            body = self.block(node.body, "loop")
        finally:
            self.breaks.pop()
        if not cond.dtype.is_bool:
            cond = binop("ne", cond, 0)
        if flag is not None:
            cond = binop("and", loop_exit.running(flag), cond)
        self.b.emit(While(cond, body, loc))

    def with_(self, node: ast.With):
        if len(node.items) != 1:
            raise TileSyntaxError("`with` takes exactly one T.Kernel(...)", self.loc(node),
                                  hint="write `with T.Kernel(grid, threads=n) as (bx, ...):`")
        item = node.items[0]
        spec = self.ev(item.context_expr)
        region = getattr(spec, "tile_region", None)  # `with T.ws(...)` (language/thread_level.py)
        if region is not None and self.b.kernel is not None:
            if item.optional_vars is not None:
                raise TileSyntaxError("`with T.ws(...)` binds no names", self.loc(node),
                                      hint="drop the `as ...` part")
            self.b.emit(region(self.block(node.body, "if"), self.loc(node)))
            return
        if not isinstance(spec, KernelSpec):
            raise TileSyntaxError("the only `with` supported in kernels is `with T.Kernel(...)`",
                                  self.loc(node), hint="remove this `with` or move it outside the kernel")
        if self.b.kernel is not None:
            raise TileSyntaxError("`with T.Kernel(...)` cannot be nested in another kernel",
                                  self.loc(node), hint="write the kernels one after the other")
        if len(self.scopes) > 2:
            raise TileSyntaxError("`with T.Kernel(...)` must be at the top of the function body",
                                  self.loc(node), hint="move the launch out of the loop or branch; loop "
                                  "inside it instead")
        self.kernel_seen = True
        tgt = item.optional_vars
        ndim = len(spec.grid)
        if tgt is None:
            names = []
        elif isinstance(tgt, ast.Name):
            names = [tgt]
        elif isinstance(tgt, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in tgt.elts):
            names = list(tgt.elts)
        else:
            raise TileBindingError("bind block indices to plain names: `as (bx, by)`", self.loc(node),
                                   hint="write `as (bx, by)`")
        if names and len(names) != ndim:
            raise TileBindingError(
                f"T.Kernel has {ndim} grid dimension(s) but `as` binds {len(names)} name(s)",
                self.loc(node), hint=f"write `as ({', '.join(['bx', 'by', 'bz'][:ndim])})`",
            )
        default = ["bx", "by", "bz"]
        block_vars = tuple(Var(names[i].id if names else default[i], dt.int32) for i in range(ndim))
        frame = bld.KernelFrame(threads=spec.threads, block_vars=block_vars)
        self.b.kernel = frame
        self.b.blocks.append([])
        self.scopes.append(_Scope("kernel"))
        try:
            for n, v in zip(names, block_vars):
                self.scopes[-1].vars[n.id] = v
            for s in node.body:
                self.stmt(s)
        finally:
            self.scopes.pop()
            body = SeqStmt(tuple(self.b.blocks.pop()))
            self.b.kernel = None
        from .thread_level import per_thread_fragments

        self.b.blocks[-1].append(per_thread_fragments(KernelLaunch(
            spec.grid, block_vars, spec.threads, tuple(frame.allocs), body,
            spec.annotations + tuple(frame.annotations), self.loc(node))))

    # ------------------------------------------------------------------ expressions
    def ev(self, node):
        m = getattr(self, "ev_" + type(node).__name__, None)
        if m is None:
            raise TileSyntaxError(f"`{type(node).__name__}` expressions are not supported in kernels",
                                  self.loc(node), hint="compute the value in Python before the kernel "
                                  "(or with T.* operations inside it)")
        return m(node)

    def ev_Constant(self, node):
        return node.value

    def ev_Lambda(self, node: ast.Lambda):
        """A lambda in a kernel body (`T.comm_reducer(lambda x, y: x + y, ...)`): a function whose
        call evaluates the body with the parameters bound, at build time, like a helper."""
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
            raise TileSyntaxError("a lambda in a kernel takes plain positional parameters",
                                  self.loc(node), hint="write `lambda x, y: ...`")
        names = [p.arg for p in a.args]

        def call(*vals):
            if len(vals) != len(names):
                raise TileSyntaxError(f"the lambda takes {len(names)} arguments, got {len(vals)}",
                                      self.loc(node), hint="pass one value per parameter")
            self.scopes.append(_Scope("lambda"))
            try:
                self.scopes[-1].vars.update(zip(names, vals))
                return self.ev(node.body)
            finally:
                self.scopes.pop()

        call.kernel_lambda = True
        return call

    def ev_Name(self, node):
        v = self.lookup(node.id, node)
        if isinstance(v, Buffer) and v.is_var:
            return Load(v, (as_expr(0),))
        if isinstance(v, bld.PrivateVar):
            return Load(v.buffer, v.index)
        return v

    def ev_Attribute(self, node):
        base = self.ev(node.value)
        if isinstance(base, Load) and base.buffer.is_var:
            base = base.buffer
        try:
            return getattr(base, node.attr)
        except AttributeError:
            mod = getattr(base, "__name__", type(base).__name__)
            names = [n for n in dir(base) if not n.startswith("_")]
            close = difflib.get_close_matches(node.attr, names, n=1)
            raise TileNameError(f"{mod}.{node.attr} does not exist", self.loc(node),
                                hint=f"did you mean {close[0]!r}?" if close else
                                "docs/language.md lists every T.* name") from None

    def ev_Subscript(self, node):
        base = self.ev(node.value)
        if isinstance(base, Load) and base.buffer.is_var:
            base = base.buffer
        sl = node.slice
        items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        vals = [self.ev(i) for i in items]
        if isinstance(base, BufferView):
            vals = [v.as_expr() if isinstance(v, Ref) else v for v in vals]
            if len(vals) != len(base.shape):
                raise TileShapeError(
                    f"the view of {base.name} has {len(base.shape)} dimension(s) but is indexed "
                    f"with {len(vals)}", self.loc(node), hint="give one index per dimension")
            return view_ref(base, vals)
        if isinstance(base, Buffer):
            vals = [v.as_expr() if isinstance(v, Ref) else v for v in vals]
            if len(vals) != len(base.shape):
                raise TileShapeError(
                    f"{base.name} has {len(base.shape)} dimension(s) but is indexed with {len(vals)}",
                    self.loc(node), hint=f"give one index per dimension of {base.name}")
            for v in vals:
                if not isinstance(v, SliceItem) and not isinstance(v, (int, Expr)) or isinstance(v, bool):
                    raise TileTypeError(f"index {v!r} of {base.name} is not an integer", self.loc(node),
                                        hint="index with ints, loop variables or integer expressions")
                if isinstance(v, Expr) and not v.dtype.is_int:
                    raise TileTypeError(f"index of {base.name} has dtype {v.dtype}; indices must be integers",
                                        self.loc(node), hint="wrap it in T.cast(..., 'int32')")
            return Ref(base, tuple(vals))
        if isinstance(base, (tuple, list, dict, str)):
            key = vals[0] if len(vals) == 1 else tuple(vals)
            if isinstance(key, Expr):
                k = const_int(key)
                if k is None:
                    raise TileTypeError("a Python sequence can only be indexed by a constant", self.loc(node),
                                        hint="copy the values into a buffer, or unroll with `for x in seq:`")
                key = k
            return base[key]
        raise TileTypeError(f"{type(base).__name__} cannot be subscripted in a kernel", self.loc(node),
                            hint="only buffers and Python sequences can be indexed")

    def ev_Slice(self, node):
        if node.step is not None:
            raise TileShapeError("strided slices are not supported", self.loc(node),
                                 hint="copy the contiguous tile, then index it in a T.Parallel loop")
        lo = self.ev(node.lower) if node.lower is not None else None
        hi = self.ev(node.upper) if node.upper is not None else None
        return SliceItem(lo, hi)

    def ev_Tuple(self, node):
        return tuple(self.ev(e) for e in node.elts)

    def ev_Dict(self, node):
        """A dict of parse-time values (`T.annotate_layout({buf: layout})`)."""
        if any(k is None for k in node.keys):
            raise TileSyntaxError("`**` in a dict is not supported in kernels", self.loc(node),
                                  hint="build the dict outside the kernel")
        return {self.ev(k): self.ev(v) for k, v in zip(node.keys, node.values)}

    ev_List = ev_Tuple

    def ev_ListComp(self, node):
        """`[f(g) for g in groups if ...]` over a Python sequence: evaluated at build time (the
        element may be a kernel expression; the sequence and the conditions are Python's)."""
        out: list = []

        def gen(i):
            if i == len(node.generators):
                out.append(self.ev(node.elt))
                return
            g = node.generators[i]
            if g.is_async:
                raise TileSyntaxError("async comprehensions are not supported", self.loc(node),
                                      hint="use a plain `for` in the comprehension")
            seq = self.ev(g.iter)
            if isinstance(seq, (Expr, Ref, Buffer)) or not hasattr(seq, "__iter__"):
                raise TileSyntaxError("a comprehension in a kernel iterates over a Python sequence",
                                      self.loc(node), hint="use a T.serial / T.Parallel loop for "
                                      "kernel values")
            for v in seq:
                self.scopes.append(_Scope("static"))
                try:
                    self.assign_value(g.target, v)
                    conds = [self.ev(c) for c in g.ifs]
                    if any(isinstance(c, (Expr, Ref)) for c in conds):
                        raise TileSyntaxError("a comprehension's `if` must be a build-time value",
                                              self.loc(node),
                                              hint="use T.if_then_else(cond, a, b) for a kernel value")
                    if all(conds):
                        gen(i + 1)
                finally:
                    self.scopes.pop()

        gen(0)
        return out

    ev_GeneratorExp = ev_ListComp

    def arith(self, op, a, b):
        if isinstance(a, Ref):
            a = a.as_expr()
        if isinstance(b, Ref):
            b = b.as_expr()
        py = lambda x: isinstance(x, (int, float, bool)) and not isinstance(x, Expr)  # noqa: E731
        if not (py(a) and py(b)) and not any(isinstance(x, (Expr, Buffer)) for x in (a, b)):
            return self.py_binop(op, a, b)
        if py(a) and py(b):
            if op in _BIT_OPS and isinstance(a, int) and isinstance(b, int):
                if isinstance(a, bool) and isinstance(b, bool) and op != "shl" and op != "shr":
                    return {"bitand": a and b, "bitor": a or b, "bitxor": a != b}[op]
                return intops.py_bit(op, int(a), int(b))
            if op in ("floordiv", "mod") and isinstance(a, int) and isinstance(b, int) and b:
                # Inside kernels `//` and `%` are C-style even on Python ints, so an expression
                # means the same whether or not its operands happen to be constants.
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
                return q if op == "floordiv" else a - q * b
            return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
                    "div": lambda: a / b, "mod": lambda: a % b, "pow": lambda: a ** b,
                    "floordiv": lambda: a // b, "bitand": lambda: a & b, "bitor": lambda: a | b}[op]()
        for x in (a, b):
            if isinstance(x, Buffer):
                raise TileTypeError(f"{x.name} is a whole tile; arithmetic needs elements",
                                    hint=f"index it inside T.Parallel: {x.name}[i, j]")
            if not isinstance(x, (Expr, int, float, bool)):
                numpy_scalar = type(x).__module__ == "numpy"
                raise TileTypeError(
                    f"cannot use {type(x).__name__} in kernel arithmetic",
                    hint=(f"a NumPy scalar has a dtype of its own: write int(...) / float(...) "
                          f"for a Python number, or T.{type(x).__name__}(...) for a typed one"
                          if numpy_scalar else
                          "kernel arithmetic takes elements, names and Python numbers"))
        if op == "floordiv":
            ea, eb = as_expr(a) if isinstance(a, Expr) else a, b
            if (isinstance(ea, Expr) and ea.dtype.is_int or isinstance(ea, int)) and (
                    isinstance(eb, Expr) and eb.dtype.is_int or isinstance(eb, int)):
                return binop("div", a, b)
            return unary("floor", binop("div", a, b))
        if op in _BIT_OPS:
            return bitwise(op, a, b)
        if op == "pow":
            ea = as_expr(a)
            if not ea.dtype.is_float:
                ea = cast(ea, dt.float32)
            return binop("pow", ea, b)
        return binop(op, a, b)

    @staticmethod
    def py_binop(op, a, b):
        """An operator on build-time Python objects that are not numbers (`"reduce_" + op`,
        tuple concatenation, `[0] * n`): Python's own meaning."""
        import operator

        fn = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
              "mod": operator.mod, "pow": operator.pow, "floordiv": operator.floordiv,
              "bitand": operator.and_, "bitor": operator.or_, "bitxor": operator.xor,
              "shl": operator.lshift, "shr": operator.rshift}[op]
        try:
            return fn(a, b)
        except TypeError as e:
            raise TileTypeError(f"cannot apply {op} to {type(a).__name__} and {type(b).__name__}: "
                                f"{e}", hint="make both operands numbers or kernel values") from None

    def ev_BinOp(self, node):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise TileSyntaxError(f"operator {type(node.op).__name__} is not supported in kernels",
                                  self.loc(node), hint="use T.gemm for matrix products and +, -, *, /, "
                                  "//, %, **, bit operators on elements")
        return self.arith(op, self.ev(node.left), self.ev(node.right))

    def ev_UnaryOp(self, node):
        v = self.ev(node.operand)
        if isinstance(v, Ref):
            v = v.as_expr()
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub):
            return -v if not isinstance(v, Expr) else unary("neg", v)
        if isinstance(node.op, ast.Not):
            return (not v) if not isinstance(v, Expr) else unary("not", v)
        return intops.bitwise_not(v)  # ast.Invert

    def ev_Compare(self, node):
        left = self.ev(node.left)
        result = None
        for op, right_node in zip(node.ops, node.comparators):
            name = _CMPS.get(type(op))
            if type(op) in _PY_ONLY_CMP:
                right = self.ev(right_node)
                r = self.py_only_compare(op, left, right, node)
                result = r if result is None else self.logic("and", result, r)
                left = right
                continue
            if name is None:
                raise TileSyntaxError(f"comparison {type(op).__name__} is not supported in kernels",
                                      self.loc(node), hint="compare values with ==, !=, <, <=, >, >=")
            right = self.ev(right_node)
            a = left.as_expr() if isinstance(left, Ref) else left
            b = right.as_expr() if isinstance(right, Ref) else right
            if not isinstance(a, Expr) and not isinstance(b, Expr):
                r = _PY_CMP[name](a, b)
            else:
                r = binop(name, a, b)
            result = r if result is None else self.logic("and", result, r)
            left = right
        return result

    def py_only_compare(self, op, a, b, node) -> bool:
        """`is`, `is not`, `in`, `not in`: Python's answer at build time (`if dtype is None`,
        `if mode in ("a", "b")`); membership of a kernel value is an error, not a guess."""
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(a, (Expr, Ref)):
            raise TileTypeError("`in` on a kernel value cannot be decided when the kernel is built",
                                self.loc(node), hint="compare with == and combine with `or`")
        return _PY_ONLY_CMP[type(op)](a, b)

    def logic(self, op, a, b):
        if not isinstance(a, Expr) and not isinstance(b, Expr):
            return (a and b) if op == "and" else (a or b)
        if not isinstance(a, Expr):
            if op == "and":
                return b if a else False
            return True if a else b
        if not isinstance(b, Expr):
            if op == "and":
                return a if b else False
            return True if b else a
        return binop(op, a, b)

    def ev_BoolOp(self, node):
        op = "and" if isinstance(node.op, ast.And) else "or"
        vals = [self.ev(v) for v in node.values]
        vals = [v.as_expr() if isinstance(v, Ref) else v for v in vals]
        out = vals[0]
        for v in vals[1:]:
            out = self.logic(op, out, v)
        return out

    def ev_IfExp(self, node):
        c = self.ev(node.test)
        if isinstance(c, Ref):
            c = c.as_expr()
        if not isinstance(c, Expr):
            return self.ev(node.body) if c else self.ev(node.orelse)
        return select(c, self.value_expr(self.ev(node.body)), self.value_expr(self.ev(node.orelse)))

    def ev_Call(self, node):
        fn = self.ev(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.ev(a.value))
            else:
                args.append(self.ev(a))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                kwargs.update(self.ev(k.value))
            else:
                kwargs[k.arg] = self.ev(k.value)
        name = getattr(fn, "__name__", type(fn).__name__)
        if getattr(fn, "__tile_builtin__", False):
            try:
                inspect.signature(fn).bind(*args, **kwargs)
            except TypeError as e:
                raise TileSyntaxError(f"bad arguments to T.{name}: {e}", self.loc(node),
                                      hint=f"T.{name}{inspect.signature(fn)}") from None
            return fn(*args, **kwargs)
        if isinstance(fn, Macro):
            sub = Parser(fn.fn, self.b, self.let_vars)
            sub.kernel_seen = True
            sub.inline_macro(args, kwargs, node)
            self.b.loc = self.loc(node)
            return None
        if isinstance(fn, dt.DType):
            if len(args) != 1 or kwargs:
                raise TileSyntaxError(f"T.{fn.name}(x) takes one value", self.loc(node),
                                      hint=f"write T.{fn.name}(x)")
            return cast(self.value_expr(args[0]), fn)
        py_vals = all(not isinstance(a, (Expr, Ref, Buffer)) for a in list(args) + list(kwargs.values()))
        if fn in (builtins.min, builtins.max):
            if py_vals:
                return fn(*args, **kwargs)
            out = self.value_expr(args[0])
            for a in args[1:]:
                out = binop(fn.__name__, out, self.value_expr(a))
            return out
        if fn is builtins.abs:
            return abs(args[0]) if py_vals else unary("abs", self.value_expr(args[0]))
        if fn in _PY_SAFE and (py_vals or fn not in (builtins.int, builtins.float, builtins.bool)):
            # containers of kernel values and attribute lookups are Python's business too
            return self.call_python(fn, name, args, kwargs, node)
        if getattr(fn, "__module__", None) == "math" or fn in vars(math).values():
            if py_vals:
                return fn(*args, **kwargs)
        if callable(fn) and not isinstance(fn, type(builtins.print)):
            return self.call_python(fn, name, args, kwargs, node)
        raise TileSyntaxError(
            f"call to Python function `{name}` inside a kernel is not supported",
            self.loc(node),
            hint="compute the value outside the kernel and pass it in, or decorate the helper with "
            "@T.macro to inline it",
        )


    def call_python(self, fn, name: str, args, kwargs, node):
        """A plain Python callable (a helper returning an index expression, a layout, a dtype,
        or a class such as functools.partial) runs now, at build time, as TileLang's frontend
        does: kernel values reach it as expressions and T.* calls in it emit into the kernel."""
        args = [a.as_expr() if isinstance(a, Ref) and a.is_element else a for a in args]
        from .helpers import HelperParser, is_user_helper

        if is_user_helper(fn) and any(isinstance(a, Expr) and not isinstance(a, Const)
                                      for a in list(args) + list(kwargs.values())):
            sub = HelperParser(fn, self.b, self.let_vars)
            sub.kernel_seen = True
            value = sub.inline(args, kwargs, node)
            self.b.loc = self.loc(node)
            return value
        try:
            return fn(*args, **kwargs)
        except TileError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's helper failed; name it and where
            raise TileSyntaxError(
                f"the Python function `{name}` called in the kernel failed when the kernel was "
                f"built: {type(e).__name__}: {e}", self.loc(node),
                hint="a helper called from a kernel runs at build time on expressions; decorate "
                     "it with @T.macro if it holds kernel statements") from None


def prim_func(fn) -> PrimFunc:
    """`@T.prim_func`: parse the decorated function into a tile-level PrimFunc."""
    if isinstance(fn, PrimFunc):
        return fn
    import sys

    # With `from __future__ import annotations`, a factory parameter used only in annotations
    # is not captured by the closure; the decorating frame (the factory) still holds it.
    caller = sys._getframe(1)
    p = Parser(fn, outer_locals=dict(caller.f_locals))
    f = caller.f_back
    while f is not None and f.f_code.co_name != "<module>" and len(p.outer_chain) < 6:
        p.outer_chain.append(dict(f.f_locals))
        f = f.f_back
    return p.parse_prim_func()


def macro(fn) -> Macro:
    """`@T.macro`: a helper whose body is inlined wherever a kernel calls it."""
    return Macro(fn)


__all__ = ["prim_func", "macro", "Macro", "Parser", "TileError"]
