"""Print tile IR as tilecore source that reads like (and re-parses as) the user's kernel."""

from __future__ import annotations

from .buffer import Buffer, Region
from .expr import INT_OP_FUNCS, OP_SYMBOLS, BinOp, Cast, Const, Expr, Load, Select, Unary, Var, const_int
from .loops import While
from .module import PrimFunc
from .names import fresh_name
from .stmt import (
    AtomicAdd,
    AtomicAddRegion,
    Copy,
    CumSum,
    Fill,
    For,
    Gemm,
    IfThenElse,
    KernelLaunch,
    LetStmt,
    Reduce,
    SeqStmt,
    Store,
)

_PREC = {"or": 1, "and": 2, "lt": 4, "le": 4, "gt": 4, "ge": 4, "eq": 4, "ne": 4,
         "add": 6, "sub": 6, "mul": 7, "div": 7, "mod": 7}
_UNARY_T = {"abs": "T.abs", "neg": "-", "not": "not "}


class Namer:
    """Gives every Var and Buffer a unique, stable printed name."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.used: set[str] = set()

    def __call__(self, obj) -> str:
        key = id(obj)
        if key not in self.names:
            self.names[key] = fresh_name(obj.name or "v", self.used)
        return self.names[key]


class Printer:
    """Turns statements and expressions into indented tilecore source lines."""

    def __init__(self):
        self.name = Namer()
        self.lines: list[str] = []

    # ----------------------------------------------------------------- expressions
    def expr(self, e, prec: int = 0) -> str:
        if isinstance(e, int):
            return str(e)
        if isinstance(e, Const):
            if e.dtype.is_bool:
                return "True" if e.value else "False"
            if e.dtype.is_int:
                return str(e.value) if e.dtype.name in ("int32", "int64") else f"T.{e.dtype.name}({e.value})"
            v = repr(float(e.value))
            if v in ("inf", "-inf", "nan"):
                v = f"float('{v}')"
            return v if e.dtype.name == "float32" else f"T.{e.dtype.name}({v})"
        if isinstance(e, Var):
            return self.name(e)
        if isinstance(e, Load):
            if e.buffer.is_var:
                return self.name(e.buffer)
            return f"{self.name(e.buffer)}[{', '.join(self.expr(i) for i in e.indices)}]"
        if isinstance(e, BinOp):
            if e.op in ("min", "max", "pow"):
                return f"T.{e.op}({self.expr(e.a)}, {self.expr(e.b)})"
            if e.op in INT_OP_FUNCS:
                return f"T.{INT_OP_FUNCS[e.op]}({self.expr(e.a)}, {self.expr(e.b)})"
            p = _PREC[e.op]
            op = OP_SYMBOLS[e.op]
            if e.op == "div" and e.dtype.is_int:
                op = "//"
            s = f"{self.expr(e.a, p)} {op} {self.expr(e.b, p + 1)}"
            return f"({s})" if p < prec else s
        if isinstance(e, Unary):
            if e.op == "neg":
                s = f"-{self.expr(e.a, 8)}"
                return f"({s})" if prec > 7 else s
            if e.op == "not":
                s = f"not {self.expr(e.a, 3)}"
                return f"({s})" if prec > 3 else s
            if e.op in INT_OP_FUNCS:
                return f"T.{INT_OP_FUNCS[e.op]}({self.expr(e.a)})"
            return f"T.{e.op}({self.expr(e.a)})"
        if isinstance(e, Cast):
            return f"T.cast({self.expr(e.value)}, T.{e.dtype.name})"
        if isinstance(e, Select):
            return (f"T.if_then_else({self.expr(e.cond)}, {self.expr(e.true_value)}, "
                    f"{self.expr(e.false_value)})")
        if isinstance(e, Buffer):
            return self.name(e)
        if isinstance(e, Expr):
            return repr(e)
        return repr(e)

    def region(self, r: Region) -> str:
        if r.is_full:
            return self.name(r.buffer)
        parts = []
        for s, n in zip(r.starts, r.extents):
            st = self.expr(s)
            if n == 1:
                parts.append(st)
            elif const_int(s) == 0:
                parts.append(f"0:{n}")
            else:
                parts.append(f"{st}:{self.expr(s + n)}")
        return f"{self.name(r.buffer)}[{', '.join(parts)}]"

    # ----------------------------------------------------------------- statements
    def emit(self, depth: int, text: str):
        self.lines.append("    " * depth + text)

    def launch_annotations(self, s: KernelLaunch, depth: int) -> None:
        """`T.use_swizzle` / `T.stream_k` / `T.annotate_layout` calls recorded on a launch
        (explicit layout objects, which have no source spelling, print as comments)."""
        from .index_layout import FRAGMENT_ANNOTATION
        from .smem_layout import LAYOUT_ANNOTATION, RASTER_ANNOTATION, STREAM_K_ANNOTATION, LayoutRequest

        for key, value in s.annotations:
            if key == RASTER_ANNOTATION:
                panel, order, _ = value
                self.emit(depth, f"T.use_swizzle({panel}, {order!r})")
            elif key == STREAM_K_ANNOTATION:
                self.emit(depth, f"T.stream_k({self.name(value[0])}, {self.name(value[1])})")
            elif key == LAYOUT_ANNOTATION:
                items = []
                for buf, lay, _ in value:
                    if isinstance(lay, LayoutRequest):
                        pad = f", pad={lay.pad}" if lay.pad is not None else ""
                        items.append(f"{self.name(buf)}: T.make_{lay.kind}_layout({self.name(buf)}{pad})")
                    else:
                        self.emit(depth, f"# layout of {self.name(buf)}: {lay.describe()}")
                if items:
                    self.emit(depth, f"T.annotate_layout({{{', '.join(items)}}})")
            elif key == FRAGMENT_ANNOTATION:
                for buf, fmap, _ in value:
                    self.emit(depth, f"# layout of {self.name(buf)}: {fmap.text}")

    def stmt(self, s, depth: int):
        if s is None:
            return
        if isinstance(s, SeqStmt):
            if not s.stmts:
                self.emit(depth, "pass")
            for x in s.stmts:
                self.stmt(x, depth)
        elif isinstance(s, KernelLaunch):
            grid = ", ".join(self.expr(g) for g in s.grid)
            threads = s.threads[0] if len(s.threads) == 1 else tuple(s.threads)
            names = ", ".join(self.name(v) for v in s.block_vars)
            comma = "," if len(s.block_vars) == 1 else ""
            self.emit(depth, f"with T.Kernel({grid}, threads={threads}) as ({names}{comma}):")
            for b in s.allocs:
                self.alloc(b, depth + 1)
            self.launch_annotations(s, depth + 1)
            self.stmt(s.body, depth + 1)
        elif isinstance(s, For):
            self.loop(s, depth)
        elif isinstance(s, LetStmt):
            self.emit(depth, f"{self.name(s.var)} = {self.expr(s.value)}")
        elif isinstance(s, Store):
            if s.buffer.is_var:
                self.emit(depth, f"{self.name(s.buffer)} = {self.expr(s.value)}")
            else:
                idx = ", ".join(self.expr(i) for i in s.indices)
                self.emit(depth, f"{self.name(s.buffer)}[{idx}] = {self.expr(s.value)}")
        elif isinstance(s, AtomicAdd):
            idx = ", ".join(self.expr(i) for i in s.indices)
            order = "" if s.order == "relaxed" else f", memory_order={s.order!r}"  # in the cache key
            self.emit(depth, f"T.atomic_{s.op}({self.name(s.buffer)}[{idx}], {self.expr(s.value)}{order})")
        elif isinstance(s, AtomicAddRegion):
            tma = ", use_tma=True" if s.use_tma else ""  # part of the compile-cache key
            self.emit(depth, f"T.atomic_add({self.region(s.dst)}, {self.region(s.src)}{tma})")
        elif isinstance(s, While):
            self.emit(depth, f"while {self.expr(s.cond)}:")
            self.stmt(s.body, depth + 1)
        elif isinstance(s, IfThenElse):
            self.emit(depth, f"if {self.expr(s.cond)}:")
            self.stmt(s.then_body, depth + 1)
            if s.else_body is not None:
                self.emit(depth, "else:")
                self.stmt(s.else_body, depth + 1)
        elif isinstance(s, Copy):
            # the hint is printed: the compile cache keys on this script
            hint = f", eviction_policy={s.cache_hint!r}" if s.cache_hint else ""
            self.emit(depth, f"T.copy({self.region(s.src)}, {self.region(s.dst)}{hint})")
        elif isinstance(s, Gemm):
            extra = ""
            if s.transpose_a:
                extra += ", transpose_A=True"
            if s.transpose_b:
                extra += ", transpose_B=True"
            if s.clear_accum:
                extra += ", clear_accum=True"
            if s.asynchronous:  # part of the script: the compile cache keys on it
                extra += ", wg_wait=-1"
            self.emit(depth, f"T.gemm({self.region(s.a)}, {self.region(s.b)}, {self.region(s.c)}{extra})")
        elif isinstance(s, Fill):
            self.emit(depth, f"T.fill({self.region(s.dst)}, {self.expr(s.value)})")
        elif isinstance(s, Reduce):
            self.emit(depth, f"T.reduce_{s.kind}({self.name(s.src)}, {self.name(s.dst)}, dim={s.dim}, "
                             f"clear={s.clear})")
        elif isinstance(s, CumSum):
            self.emit(depth, f"T.cumsum({self.name(s.src)}, {self.name(s.dst)}, dim={s.dim}, "
                             f"reverse={s.reverse})")
        else:
            printer = getattr(s, "print_lines", None)
            if printer is not None:
                for line in printer(self):
                    self.emit(depth, line)
            else:
                self.emit(depth, f"# {s!r}")

    def alloc(self, b: Buffer, depth: int):
        shape = tuple(b.shape)
        if b.is_var:
            self.emit(depth, f"{self.name(b)} = T.alloc_var(T.{b.dtype.name})")
            return
        fn = {"shared": "alloc_shared", "fragment": "alloc_fragment", "local": "alloc_local"}[b.scope]
        self.emit(depth, f"{self.name(b)} = T.{fn}({shape}, T.{b.dtype.name})")

    def loop(self, s: For, depth: int):
        if s.kind == "parallel":
            vars_, body = [s.var], s.body
            exts = [s.stop]
            while isinstance(body, For) and body.kind == "parallel" and const_int(body.start) == 0:
                vars_.append(body.var)
                exts.append(body.stop)
                body = body.body
            names = ", ".join(self.name(v) for v in vars_)
            self.emit(depth, f"for {names} in T.Parallel({', '.join(self.expr(e) for e in exts)}):")
            self.stmt(body, depth + 1)
            return
        args = self.expr(s.stop) if const_int(s.start) == 0 and s.step == 1 else (
            f"{self.expr(s.start)}, {self.expr(s.stop)}" + (f", {s.step}" if s.step != 1 else ""))
        fn = {"serial": "T.serial", "pipelined": "T.Pipelined", "unroll": "T.unroll"}[s.kind]
        extra = "".join(f", {k}={v!r}" for k, v in s.annotations)
        self.emit(depth, f"for {self.name(s.var)} in {fn}({args}{extra}):")
        self.stmt(s.body, depth + 1)


def print_func(f: PrimFunc) -> str:
    """The whole function as `@T.prim_func def name(...)` source."""
    p = Printer()
    params = []
    scalars = f.attr("scalar_params", ())
    for b in f.attr("signature") or f.params:
        if isinstance(b, Var):  # a scalar parameter (`n: T.int32`)
            params.append(f"{p.name(b)}: T.{b.dtype.name}")
            continue
        shape = ", ".join(p.expr(s) for s in b.shape)
        if len(b.shape) == 1:
            shape += ","
        params.append(f"{p.name(b)}: T.Tensor(({shape}), T.{b.dtype.name})")
    header = []
    for v in f.dyn_vars:
        if any(v is s for s in scalars):
            continue
        header.append(f"{p.name(v)} = T.dynamic({v.name!r})")
    p.lines.extend(header)
    p.emit(0, "@T.prim_func")
    p.emit(0, f"def {f.name}({', '.join(params)}):")
    p.stmt(f.body, 1)
    return "\n".join(p.lines) + "\n"


def print_node(node, printer_cls=None) -> str:
    """Any statement or expression as source text (with `printer_cls`, e.g. the thread printer)."""
    p = (printer_cls or Printer)()
    if isinstance(node, Expr):
        return p.expr(node)
    p.stmt(node, 0)
    return "\n".join(p.lines)
