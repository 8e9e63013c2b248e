"""The eager-style frontend: a `@tilecore.jit` function whose body *is* the kernel (TileLang's
default style), as opposed to a factory returning a `@T.prim_func`.

    @tilecore.jit
    def matmul(A, B, block_M: int = 64):
        M, N, K = T.const("M, N, K")     # compile-time constants, bound from tensor shapes
        A: T.Tensor((M, K), "float16")   # declares parameter A as a tensor
        B: T.Tensor((K, N), "float16")
        C = T.empty((M, N), "float16")   # an output the call allocates and returns
        with T.Kernel(...) as (bx, by):
            ...
        return C

Like `@T.prim_func`, the body is never executed: it is parsed twice. The *probe* parses only the
top-level statements up to the last tensor declaration or `T.const` (and before the kernel frame),
with each `T.const` a placeholder variable, to learn which parameters are tensors and which
dimension of which tensor names each constant; compile-time Python on the constants
(`scale = 1 / math.sqrt(dim)`) belongs below the declarations, where only the build reads it. The
*build* parses everything with the constants bound to ints (one PrimFunc per binding): its
parameters are the tensor parameters in signature order followed by the returned `T.empty`
outputs in `return` order, so `out_idx` is implied by `return`.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import SourceLoc, TileBindingError, TileError, TileSyntaxError, TileTypeError
from ..ir.buffer import Buffer
from ..ir.expr import Expr, Var
from ..ir.module import PrimFunc
from ..ir.stmt import SeqStmt
from . import builder as bld
from .builder import builtin
from .ops import Tensor, TensorSpec
from .parser import Parser, _Scope, macro


@builtin
def const(names: str):
    """`M, N, K = T.const("M, N, K")`: compile-time constants of an eager `@tilecore.jit`
    function, bound from the shapes of the tensors passed at call time (or `compile(M=...)`).
    Only valid at the top of an eager function body; this direct call means it was used elsewhere."""
    raise TileSyntaxError("T.const is only valid at the top of an eager @tilecore.jit function body",
                          hint="in a @T.prim_func, use T.dynamic('n') for call-time dimensions")


@builtin
def empty(shape, dtype="float32"):
    """`C = T.empty((M, N), dtype)`: an output tensor of an eager `@tilecore.jit` function,
    allocated by the call and returned by `return C`. Only valid at the top of an eager body."""
    raise TileSyntaxError("T.empty is only valid at the top of an eager @tilecore.jit function body",
                          hint="in a @T.prim_func, declare outputs as parameters and use out_idx")


def const_names(spec, loc) -> list[str]:
    """The names in a `T.const` string: separated by commas and/or spaces."""
    if not isinstance(spec, str):
        raise TileTypeError(f"T.const takes a string of names, got {type(spec).__name__}", loc,
                            hint='write M, N = T.const("M, N")')
    names = [n for n in re.split(r"[,\s]+", spec) if n]
    bad = [n for n in names if not n.isidentifier()]
    if not names or bad:
        raise TileSyntaxError(f"T.const({spec!r}) does not name identifiers", loc,
                              hint='write M, N = T.const("M, N")')
    return names


def is_eager(fn) -> bool:
    """Whether `fn` is an eager kernel body rather than a PrimFunc factory: its top level (outside
    any nested function) has a `with` statement (the kernel frame) or calls `T.const`/`T.empty`.
    A factory keeps its kernel frame inside the nested `@T.prim_func`, so it has neither."""
    fdef = _fdef(fn)
    if fdef is None:
        return False
    for s in fdef.body:
        if isinstance(s, (ast.With, ast.AsyncWith)):
            return True
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.Expr)) and s.value is not None:
            for n in ast.walk(s.value):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                        n.func.attr in ("const", "empty"):
                    return True
    return False


def _fdef(fn):
    try:
        src = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return None
    tree = ast.parse(src)
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def tensor_param_names(fn) -> list[str]:
    """The parameters declared as tensors by a bare top-level `X: T.Tensor(...)` annotation."""
    fdef = _fdef(fn)
    params = list(inspect.signature(fn).parameters)
    declared = {s.target.id for s in fdef.body if isinstance(s, ast.AnnAssign) and s.value is None
                and isinstance(s.target, ast.Name)}
    return [p for p in params if p in declared]


def scalar_param_dtypes(fn) -> dict:
    """Parameters annotated in the signature with an integer dtype (`n: T.int32`): run-time
    scalars passed as Python ints, not compile-time values (name -> dtype)."""
    out = {}
    for name, ann in getattr(fn, "__annotations__", {}).items():
        if isinstance(ann, str) and not isinstance(ann, dt.DType):  # a string annotation
            try:
                ann = eval(ann, fn.__globals__)  # noqa: S307 - the user's own annotation
            except Exception:  # noqa: BLE001 - a non-dtype annotation (e.g. `int`) is config
                continue
        if isinstance(ann, dt.DType) and ann.is_int and name != "return":
            out[name] = ann
    return out


@dataclass(frozen=True)
class _ProbeShape:
    """A probed declaration's shape: the constants' placeholders, None where a dimension is an
    expression (see EagerParser._partial_spec)."""

    shape: tuple


class _Undeclared:
    """A tensor parameter's placeholder until its `X: T.Tensor(...)` line is parsed."""

    def __init__(self, name: str):
        self.name = name


@dataclass(frozen=True)
class Probe:
    """What the probe learned: each constant's placeholder, and each tensor parameter's declared
    shape (None where a dimension is an expression the probe cannot match) and source line."""

    consts: dict  # name -> Var placeholder
    specs: dict  # tensor parameter name -> (TensorSpec | None, SourceLoc)


class EagerParser(Parser):
    """Parses an eager function body. `binding` None probes; otherwise it maps each constant's
    name to its int and the whole body is built into a PrimFunc."""

    def __init__(self, fn, config: dict, binding: dict | None):
        super().__init__(fn)
        self.binding = binding
        self.config = config
        self.tensor_names = tensor_param_names(fn)
        self.scalars = {n: Var(n, d) for n, d in scalar_param_dtypes(fn).items()}
        self.order = [n for n in inspect.signature(fn).parameters
                      if n in self.tensor_names or n in self.scalars]
        self.consts: dict[str, Var] = {}
        self.specs: dict = {}
        self.inputs: dict[str, Buffer] = {}
        self.outputs: dict[str, Buffer] = {}
        self.returned: list[str] | None = None

    # ------------------------------------------------------------------ entry points
    def run(self):
        """Probe (returns a Probe) or build (returns the PrimFunc)."""
        fdef = self.tree.body[0]
        self.scopes[0].vars.update(self.config)
        self.scopes[0].vars.update(self.scalars)
        for n in self.tensor_names:
            self.scopes[0].vars[n] = _Undeclared(n)
        self.b.blocks.append([])
        bld.push(self.b)
        self.scopes.append(_Scope("function"))
        stmts = fdef.body if self.binding is not None else _probed_prefix(fdef.body)
        try:
            for s in stmts:
                if self.binding is None and isinstance(s, (ast.With, ast.Return)):
                    break
                if self.binding is None:
                    self._probe_stmt(s)
                else:
                    self.stmt(s)
        finally:
            bld.pop()
        body = self.b.blocks.pop()
        if self.binding is None:
            return Probe(dict(self.consts), dict(self.specs))
        return self._prim_func(fdef, body)

    def _probe_stmt(self, s):
        """One statement of the probe. The constants are symbols here, so a line only Python can
        compute (`math.sqrt(dim)`, an `assert` on a constant) fails in the probe although it
        builds: say so, and that below the last declaration the probe does not read it."""
        try:
            self.stmt(s)
        except TileError as e:
            if _declares(s):
                raise
            e.hint = ("this line is above a tensor declaration or T.const, so it is read while the "
                      "constants are still symbols (before they are bound from the shapes); move it "
                      "below the last declaration, where it sees them as ints"
                      + (f" ({e.hint})" if e.hint else ""))
            raise

    def _prim_func(self, fdef, body) -> PrimFunc:
        """The built PrimFunc: declared inputs, then the returned outputs."""
        if not self.kernel_seen:
            raise TileSyntaxError("the kernel body has no `with T.Kernel(...)`", self.loc(fdef),
                                  hint="wrap the body in `with T.Kernel(grid..., threads=128) as bx:`")
        missing = [n for n in self.tensor_names if n not in self.inputs]
        if missing:
            raise TileBindingError(f"tensor parameter {missing[0]!r} is never declared", self.loc(fdef),
                                   hint=f"declare it at the top of the body: `{missing[0]}: "
                                   "T.Tensor(shape, dtype)`")
        returned = self.returned or []
        unreturned = [n for n in self.outputs if n not in returned]
        if unreturned:
            raise TileBindingError(
                f"T.empty output {unreturned[0]!r} is not returned", self.loc(fdef),
                hint=f"end the function with `return {', '.join(self.outputs)}`")
        outs = tuple(self.outputs[n] for n in returned)
        params = tuple(self.inputs[n] for n in self.tensor_names) + outs
        attrs = ()
        sig = tuple(self.inputs.get(n) or self.scalars[n] for n in self.order) + outs
        if self.scalars:
            attrs = (("scalar_params", tuple(self.scalars.values())), ("signature", sig))
        from .compat_ops import with_scratch

        params, attrs = with_scratch(params, sig, attrs, self.b.scratch)
        return PrimFunc(fdef.name, params, SeqStmt(tuple(body)), self.loc(fdef), attrs)

    # ------------------------------------------------------------------ statements
    def lookup(self, name, node):
        """A tensor parameter used before its declaration is a located error."""
        v = super().lookup(name, node)
        if isinstance(v, _Undeclared):
            raise TileBindingError(f"tensor parameter {name!r} is used before it is declared",
                                   self.loc(node), hint=f"declare it first: `{name}: T.Tensor(shape, dtype)`")
        return v

    def assign_name(self, name, value, node):
        """At the top of the body (outside the kernel frame) a name is a compile-time alias of its
        value: there is no statement list to hold a LetStmt there."""
        if self._top() and isinstance(value, Expr):
            self.scopes[-1].vars[name] = value
            return
        super().assign_name(name, value, node)

    def _top(self) -> bool:
        return len(self.scopes) == 2 and self.b.kernel is None

    def arith(self, op, a, b):
        """At the top of the body the code reads as Python, but `//` and `%` keep the kernels' C
        rounding (toward zero) even on ints: where that differs from Python's (operands of
        opposite signs, a remainder) the ceiling idiom `-(-n // b)` would silently be a floor."""
        ints = all(isinstance(x, int) and not isinstance(x, (bool, Expr)) for x in (a, b))
        if op in ("floordiv", "mod") and ints and b and self._top() and a % b and (a < 0) != (b < 0):
            raise TileSyntaxError(
                f"{a} {'//' if op == 'floordiv' else '%'} {b} rounds toward zero in a kernel body (C), "
                "not down as in Python", hint="write T.ceildiv(n, b) for a ceiling (not -(-n // b)), "
                "or T.floordiv / T.floormod for Python's rounding")
        return super().arith(op, a, b)

    def _stmt(self, node):
        if isinstance(node, ast.AnnAssign) and node.value is None:
            return self.declare_tensor(node)
        if isinstance(node, ast.FunctionDef) and self._top():
            return self.local_macro(node)
        if isinstance(node, ast.Return):
            return self.return_(node)
        if self.returned is not None:
            raise TileSyntaxError("statements after `return` are not allowed", self.loc(node),
                                  hint="move the `return` to the end of the function body")
        return super()._stmt(node)

    def declare_tensor(self, node: ast.AnnAssign):
        """`A: T.Tensor(shape, dtype)` of a parameter: the tensor parameter's Buffer."""
        loc = self.loc(node)
        name = node.target.id if isinstance(node.target, ast.Name) else None
        if name not in self.tensor_names or not self._top():
            raise TileSyntaxError("a bare annotation must declare a tensor parameter at the top of "
                                  "the function body", loc, hint="write `A: T.Tensor((M, K), dtype)`")
        if name in self.inputs or name in self.specs:
            raise TileBindingError(f"tensor parameter {name!r} is declared twice", loc,
                                   hint="delete one of the two declarations")
        try:
            ann = self._annotation(node.annotation)
        except TileError:
            if self.binding is None:  # a dimension the probe cannot evaluate: checked at call time
                self.specs[name] = (self._partial_spec(node.annotation), loc)
                self.scopes[0].vars[name] = Buffer(name, (), dt.int32, "global")
                return
            raise
        if not isinstance(ann, TensorSpec):
            raise TileTypeError(f"{name!r} is annotated with {type(ann).__name__}, not T.Tensor",
                                loc, hint=f"write `{name}: T.Tensor((M, N), 'float16')`")
        buf = Buffer(name, ann.shape, ann.dtype, "global")
        self.b.names.add(name)
        self.scopes[0].vars[name] = buf
        self.specs[name] = (ann, loc)
        self.inputs[name] = buf

    def local_macro(self, node: ast.FunctionDef):
        """`@T.macro def f(...)` at the top of the body, above the kernel frame: a macro that
        sees the names bound above it (the constants as ints, config values, tensors, aliases),
        as a macro nested in a PrimFunc factory sees the factory's locals. The body is never run,
        so the `def` is compiled here (at its own file:line) with those names as its globals."""
        loc = self.loc(node)
        if len(node.decorator_list) != 1 or self.ev(node.decorator_list[0]) is not macro:
            raise TileSyntaxError(f"function {node.name!r} in an eager kernel body is not a @T.macro",
                                  loc, hint="decorate it with @T.macro (inlined where the kernel "
                                  "calls it), or define a Python helper at module level")
        fdef = ast.FunctionDef(node.name, node.args, node.body, [], node.returns, node.type_comment)
        module = ast.fix_missing_locations(ast.Module([ast.copy_location(fdef, node)], []))
        tree = ast.increment_lineno(module, self.line0 - 1)  # the def's own file lines
        names = dict(self.globals)
        for sc in self.scopes:
            names.update({k: v for k, v in sc.vars.items() if not isinstance(v, _Undeclared)})
        exec(compile(tree, self.file, "exec"), names)  # noqa: S102 - the user's own `def`
        self.scopes[-1].vars[node.name] = macro(names[node.name])

    def _partial_spec(self, node):
        """In the probe, a declaration whose shape holds an expression of constants
        (`(batch, seq_len, heads // groups)`): its shape with the plain constants kept, so they
        still bind from this tensor (the other dimensions are checked when the kernel is built).
        None when even the shape cannot be read."""
        args = None
        if isinstance(node, ast.Subscript):
            sl = node.slice
            args = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        elif isinstance(node, ast.Call) and node.args:
            args = node.args
        if not args:
            return None
        try:
            shape = self.ev(args[0])
        except TileError:
            return None
        if not isinstance(shape, (tuple, list)):
            return None
        return _ProbeShape(tuple(s if isinstance(s, Var) else None for s in shape))

    def _annotation(self, node):
        """`T.Tensor(shape, dtype)`, or TileLang's subscript spelling `T.Tensor[shape, dtype]`."""
        if isinstance(node, ast.Subscript) and self.ev(node.value) is Tensor:
            sl = node.slice
            items = [self.ev(e) for e in sl.elts] if isinstance(sl, ast.Tuple) else [self.ev(sl)]
            return Tensor(*items)
        if isinstance(node, ast.Call) and self.ev(node.func) is Tensor:
            args = [self.ev(a) for a in node.args]
            return Tensor(*args, **{k.arg: self.ev(k.value) for k in node.keywords})
        return self.ev(node)

    def return_(self, node: ast.Return):
        """`return C` / `return C, D`: the outputs, in this order."""
        loc = self.loc(node)
        if not self._top():
            raise TileSyntaxError("`return` is only allowed as the last statement of the function",
                                  loc, hint="outputs are T.empty tensors returned at the end")
        v = node.value
        elts = [] if v is None else (v.elts if isinstance(v, (ast.Tuple, ast.List)) else [v])
        names = []
        for e in elts:
            if not isinstance(e, ast.Name) or e.id not in self.outputs:
                raise TileSyntaxError("an eager kernel returns T.empty tensors by name", loc,
                                      hint="write `C = T.empty((M, N), dtype)` ... `return C`")
            names.append(e.id)
        if len(set(names)) != len(names):
            raise TileSyntaxError("an output is returned twice", loc,
                                  hint="return each T.empty output once")
        self.returned = names

    # ------------------------------------------------------------------ T.const / T.empty
    def ev_Call(self, node):
        fn = self.ev(node.func)
        if fn is const or fn is empty:
            loc = self.loc(node)
            if not self._top():
                raise TileSyntaxError(f"T.{fn.__name__} must be at the top of the function body, "
                                      "outside `with T.Kernel`", loc,
                                      hint="move it above the `with T.Kernel(...)` line")
            args = [self.ev(a) for a in node.args]
            kwargs = {k.arg: self.ev(k.value) for k in node.keywords}
            try:
                bound = inspect.signature(fn).bind(*args, **kwargs).arguments
            except TypeError as e:
                raise TileSyntaxError(f"bad arguments to T.{fn.__name__}: {e}", loc,
                                      hint=f"T.{fn.__name__}{inspect.signature(fn)}") from None
            return self._const(bound["names"], loc) if fn is const else self._empty(bound, loc)
        return super().ev_Call(node)

    def _const(self, spec, loc):
        names = const_names(spec, loc)
        vals = []
        for n in names:
            if n in self.consts:
                raise TileBindingError(f"T.const {n!r} is declared twice", loc,
                                       hint="declare each T.const name once")
            self.consts[n] = Var(n, dt.int32)
            vals.append(self.consts[n] if self.binding is None else self.binding[n])
        return vals[0] if len(vals) == 1 else tuple(vals)

    def _empty(self, bound, loc):
        name = self.b.pending_name()
        if name is None:
            raise TileSyntaxError("assign T.empty to a name: `C = T.empty(shape, dtype)`", loc,
                                  hint="name each output (`C = T.empty(...)`) and `return C`")
        if self.binding is None:
            return None  # outputs do not bind constants
        spec = Tensor(bound["shape"], bound.get("dtype", "float32"))
        buf = Buffer(name, spec.shape, spec.dtype, "global")
        self.b.names.add(name)
        self.outputs[name] = buf
        return buf


def _declares(s) -> bool:
    """Whether top-level statement `s` declares a tensor parameter (a bare annotation) or calls
    T.const: what the probe is for."""
    if isinstance(s, ast.AnnAssign) and s.value is None:
        return True
    return any(isinstance(n, ast.Call) and (n.func.attr if isinstance(n.func, ast.Attribute) else
                                            getattr(n.func, "id", None)) == "const" for n in ast.walk(s))


def _probed_prefix(body: list) -> list:
    """The top-level statements the probe reads: up to the last declaration (`_declares`).
    Those after it cannot change what the probe learns (outputs bind no constants), and may be
    compile-time Python on the constants (`1.0 / math.sqrt(dim)`) that only works on ints."""
    last = max((i for i, s in enumerate(body) if _declares(s)), default=-1)
    return body[:last + 1]


def probe(fn, config: dict) -> Probe:
    """Learn the constants and the tensor parameters' declared shapes (see the module docstring)."""
    return EagerParser(fn, config, None).run()


def build(fn, config: dict, binding: dict) -> PrimFunc:
    """The PrimFunc of `fn` for these config values and constant binding."""
    return EagerParser(fn, config, binding).run()


def bind_shapes(pr: Probe, tensors: dict, given: dict, where: SourceLoc | None) -> dict:
    """Each constant's int: from `given` (compile(M=...)), else from the shapes of `tensors`
    (parameter name -> array). Two tensors disagreeing on one constant is a TileError."""
    from ..errors import TileCallError

    binding: dict[str, int] = {}
    origin: dict[str, str] = {}
    for n, v in given.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise TileCallError(f"T.const {n} must be an int, got {v!r}", where,
                                hint=f"pass {n}=int(...)")
        binding[n], origin[n] = v, f"{n}={v}"
    by_var = {id(v): n for n, v in pr.consts.items()}
    for pname, arr in tensors.items():
        spec, decl = pr.specs.get(pname, (None, None))
        if spec is None:
            continue
        shape = tuple(int(s) for s in arr.shape)
        if len(shape) != len(spec.shape):
            raise TileCallError(
                f"argument {pname} has shape {shape}, but its declaration at {decl} has rank "
                f"{len(spec.shape)}", where,
                hint=f"pass a tensor of rank {len(spec.shape)} (reshape it) or fix the declaration")
        for d, (want, got) in enumerate(zip(spec.shape, shape)):
            n = by_var.get(id(want))
            if n is None:
                continue
            if n in binding and binding[n] != got:
                raise TileCallError(
                    f"T.const {n} is {binding[n]} from {origin[n]} but {got} from {pname}.shape[{d}]",
                    where, hint=f"the tensors' shapes must agree on {n} (see the declaration at {decl})")
            binding.setdefault(n, got)
            origin.setdefault(n, f"{pname}.shape[{d}]")
    unbound = [n for n in pr.consts if n not in binding]
    if unbound:
        raise TileCallError(f"T.const {unbound[0]} is not bound by any tensor argument's shape", where,
                            hint=f"pass it explicitly: .compile({unbound[0]}=...)")
    extra = [n for n in given if n not in pr.consts]
    if extra:
        raise TileCallError(f"{extra[0]} is neither a T.const nor a parameter", where,
                            hint=f"the kernel's T.const names: {', '.join(sorted(pr.consts)) or 'none'}")
    return binding


__all__ = ["const", "empty", "is_eager", "probe", "build", "bind_shapes", "Probe", "EagerParser"]
