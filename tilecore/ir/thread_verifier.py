"""Structural checks of thread IR (a PrimFunc whose body holds ThreadKernels).

Checked, with the first problem raised as a TileInternalError (a compiler bug, never the
user's): every Var is defined before use (parameters' symbolic dims, block and thread
indices, loop counters, lets); every buffer a statement or expression touches is a parameter
or declared in its ThreadKernel's `shared` / `registers`; no tile-level node (Load, Store, tile
ops, KernelLaunch, T.Parallel loops) remains inside a ThreadKernel; conditions and predicates
are bool; and, where it can be decided, no `Barrier` sits under control flow that differs
between the threads of a block, and no `Shuffle` or `IntrinsicCall` under control flow that
differs between the lanes of a warp. A `WarpSpecialized` split occurs once per kernel, and
neither of its sides holds a block barrier (the other side would never arrive).

Divergence is decided as `insert-barriers` decides it: a value varies between threads when it
depends on the thread index, on a per-thread register array (not a `T.alloc_var` scalar), on a
shuffle, or on a variable bound from such a value. A varying condition computable from the
thread index alone is evaluated for every thread, so `if tx // 32 == 0` is warp-uniform (fine
around an mma) but not block-uniform (wrong around a barrier).
"""

from __future__ import annotations

import numpy as np

from ..errors import TileInternalError
from .expr import Expr, Load, Select, Var
from .module import PrimFunc
from .stmt import TILE_OPS, AtomicAdd, For, IfThenElse, KernelLaunch, LetStmt, SeqStmt, Store
from .thread import (
    Atomic,
    Barrier,
    IntrinsicCall,
    MemLoad,
    MemStore,
    Shuffle,
    ThreadKernel,
    VecMove,
    WarpSpecialized,
)
from .visit import walk

UNIFORM, WARP_UNIFORM, DIVERGENT = 0, 1, 2


def verify_thread_func(func: PrimFunc) -> None:
    """Raise TileInternalError on the first structural problem of the lowered `func`."""
    defined = {id(v) for v in func.dyn_vars}
    buffers = {id(p) for p in func.params}
    _Outer(defined, buffers).stmt(func.body)


def _where(s) -> str:
    loc = getattr(s, "loc", None)
    return f"{type(s).__name__} at {loc}" if loc is not None else type(s).__name__


class _Where:
    """`_where(s)`, formatted only when a message needs it (the verifier runs after every pass
    of every test's compile: formatting each statement's location was a tenth of its time)."""

    __slots__ = ("s",)

    def __init__(self, s):
        self.s = s

    def __str__(self) -> str:
        return _where(self.s)


_FACTS = "_verify_facts"  # per-expression cache of `_expr_facts`


def _expr_facts(e) -> tuple:
    """(Vars, (buffer, predicate) of each MemLoad, any tile-level Load, any non-bool Select
    condition, any Shuffle, any per-thread register read) of expression `e`, from one walk,
    kept on the (frozen) node: the verifier checks the whole module after every pass, and
    passes keep the expressions they do not change. Objects, not ids, are kept (a copy of the
    expression means the same ones); never the node itself (a reference cycle)."""
    if type(e) is Var:
        return (e,), (), False, False, False, False
    d = e.__dict__
    got = d.get(_FACTS)
    if got is None:
        vars_: dict[int, Var] = {}
        loads: list = []
        tile_load = bad_select = shuffle = local = False
        for n in walk(e):
            if isinstance(n, Var):
                vars_[id(n)] = n
            elif isinstance(n, Load):
                tile_load = True
            elif isinstance(n, MemLoad):
                loads.append((n.buffer, n.pred))
                if n.buffer.scope == "local" and not n.buffer.is_var:
                    local = True
            elif isinstance(n, Select) and not n.cond.dtype.is_bool:
                bad_select = True
            elif isinstance(n, Shuffle):
                shuffle = True
        got = (tuple(vars_.values()), tuple(loads), tile_load, bad_select, shuffle, local)
        d[_FACTS] = got
    return got


class _Outer:
    """Outside ThreadKernels: only lets, sequences and the kernels themselves."""

    def __init__(self, defined: set, buffers: set):
        self.defined = defined
        self.buffers = buffers

    def stmt(self, s) -> None:
        if isinstance(s, SeqStmt):
            saved = set(self.defined)
            for x in s.stmts:
                self.stmt(x)
            self.defined = saved
        elif isinstance(s, LetStmt):
            _KernelChecker.check_vars(s.value, self.defined, _where(s))
            self.defined.add(id(s.var))
        elif isinstance(s, ThreadKernel):
            for g in s.grid:
                _KernelChecker.check_vars(g, self.defined, _where(s))
            _KernelChecker(s, set(self.defined), set(self.buffers)).run()
        else:
            raise TileInternalError(f"{_where(s)} outside any ThreadKernel in a lowered function")


class _KernelChecker:
    """Walks one ThreadKernel in program order, tracking definitions and divergence."""

    def __init__(self, k: ThreadKernel, defined: set, buffers: set):
        self.k = k
        self.defined = defined | {id(v) for v in k.block_vars} | {id(k.thread_var)}
        self.buffers = buffers | {id(b) for b in k.shared} | {id(b) for b in k.registers}
        self.varying: set[int] = {id(k.thread_var)}
        # values over the threads of lets computable from the thread index alone
        self.env: dict[int, np.ndarray] = {id(k.thread_var): np.arange(k.num_threads, dtype=np.int64)}
        self.control = UNIFORM
        self.in_roles = False  # inside a WarpSpecialized side: no block barriers

    def run(self) -> None:
        """Check the whole kernel."""
        self.stmt(self.k.body)

    # ------------------------------------------------------------------ expressions
    @staticmethod
    def check_vars(e, defined: set, where: str) -> None:
        """Every Var of `e` is in `defined`."""
        for n in walk(e):
            if isinstance(n, Var) and id(n) not in defined:
                raise TileInternalError(f"{where}: variable {n.name} used before definition")

    def expr(self, e, where: str) -> None:
        """Definitions, buffers and bool conditions inside expression `e`."""
        if e is None:
            return
        if not isinstance(e, Expr):
            raise TileInternalError(f"{where}: {e!r} is not an expression")
        if self._expr_ok(e):
            return
        for n in walk(e):  # something is wrong: report the first problem in walk order
            if isinstance(n, Var) and id(n) not in self.defined:
                raise TileInternalError(f"{where}: variable {n.name} used before definition")
            if isinstance(n, Load):
                raise TileInternalError(f"{where}: tile-level Load of {n.buffer.name} in thread IR")
            if isinstance(n, MemLoad):
                self.buffer(n.buffer, where)
                self.pred(n.pred, where)
            if isinstance(n, Select) and not n.cond.dtype.is_bool:
                raise TileInternalError(f"{where}: select condition is {n.cond.dtype}, not bool")
            if isinstance(n, Shuffle) and self.control == DIVERGENT:
                raise TileInternalError(f"{where}: warp shuffle under control flow that differs "
                                        "between the lanes of a warp")

    def _expr_ok(self, e) -> bool:
        """True when `expr` would find nothing wrong in `e` (from its cached facts)."""
        vars_, loads, tile_load, bad_select, shuffle, _ = _expr_facts(e)
        if tile_load or bad_select or (shuffle and self.control == DIVERGENT):
            return False
        defined, buffers = self.defined, self.buffers
        for v in vars_:
            if id(v) not in defined:
                return False
        for b, p in loads:
            if id(b) not in buffers or not (p is None or (isinstance(p, Expr) and p.dtype.is_bool)):
                return False
        return True

    def buffer(self, b, where: str) -> None:
        """`b` is a parameter or declared by the kernel."""
        if id(b) not in self.buffers:
            raise TileInternalError(f"{where}: buffer {b.name} ({b.scope}) is neither a parameter nor "
                                    "declared in the ThreadKernel's shared/registers")

    def pred(self, p, where: str) -> None:
        """A predicate is None or a bool expression."""
        if p is not None and not (isinstance(p, Expr) and p.dtype.is_bool):
            raise TileInternalError(f"{where}: predicate {p!r} is not bool")

    # ------------------------------------------------------------------ divergence
    def varies(self, e) -> bool:
        """True when `e` may differ between the threads of the block."""
        vars_, _, _, _, shuffle, local = _expr_facts(e)
        if shuffle or local:
            return True
        varying = self.varying
        return any(id(v) in varying for v in vars_)

    def _values(self, e):
        """`e` for every thread when computable from the thread index (and such lets), else None."""
        from ..lower.indexing import try_evaluate

        v = try_evaluate(e, self.env)
        if v is None:
            return None
        return np.broadcast_to(np.asarray(v), self.env[id(self.k.thread_var)].shape)

    def divergence(self, e) -> int:
        """UNIFORM, WARP_UNIFORM or DIVERGENT (the latter also when it cannot be decided)."""
        if not self.varies(e):
            return UNIFORM
        v = self._values(e)
        if v is None:
            return DIVERGENT
        if np.all(v == v[0]):
            return UNIFORM
        ws = self.k.warp_size
        n = len(v)
        if n % ws == 0 and np.all(v.reshape(n // ws, ws) == v.reshape(n // ws, ws)[:, :1]):
            return WARP_UNIFORM
        return DIVERGENT

    def under(self, level: int, body) -> None:
        """Check `body` under control flow of divergence `level`."""
        saved = self.control
        self.control = max(saved, level)
        self.stmt(body)
        self.control = saved

    # ------------------------------------------------------------------ statements
    def stmt(self, s) -> None:
        """Check one statement (and everything below it)."""
        where = _Where(s)
        if isinstance(s, SeqStmt):
            saved = set(self.defined)
            for x in s.stmts:
                self.stmt(x)
            self.defined = saved
        elif isinstance(s, LetStmt):
            self.expr(s.value, where)
            if self.varies(s.value):
                self.varying.add(id(s.var))
                v = self._values(s.value)
                if v is not None:
                    self.env[id(s.var)] = v
            self.defined.add(id(s.var))
        elif isinstance(s, For):
            if s.kind not in ("serial", "unroll"):
                raise TileInternalError(f"{where}: a {s.kind} loop in thread IR (only serial/unroll)")
            self.expr(s.start, where)
            self.expr(s.stop, where)
            level = max(self.divergence(s.start), self.divergence(s.stop))
            if level != UNIFORM:
                self.varying.add(id(s.var))
            saved = set(self.defined)
            self.defined.add(id(s.var))
            self.under(level, s.body)
            self.defined = saved
        elif isinstance(s, IfThenElse):
            self.expr(s.cond, where)
            if not s.cond.dtype.is_bool:
                raise TileInternalError(f"{where}: if condition is {s.cond.dtype}, not bool")
            level = self.divergence(s.cond)
            self.under(level, s.then_body)
            if s.else_body is not None:
                self.under(level, s.else_body)
        elif isinstance(s, MemStore):
            self.buffer(s.buffer, where)
            for e in (s.offset, s.value, s.pred):
                self.expr(e, where)
            self.pred(s.pred, where)
        elif isinstance(s, VecMove):
            self.buffer(s.dst, where)
            self.buffer(s.src, where)
            for e in (s.dst_offset, s.src_offset, s.pred):
                self.expr(e, where)
            self.pred(s.pred, where)
        elif isinstance(s, Atomic):
            self.buffer(s.buffer, where)
            if s.prev is not None:
                self.buffer(s.prev, where)
                self.expr(s.prev_offset, where)
            for e in (s.offset, s.value, s.pred):
                self.expr(e, where)
            self.pred(s.pred, where)
        elif isinstance(s, IntrinsicCall):
            if self.control == DIVERGENT:
                raise TileInternalError(f"{where}: {s.intrinsic.name} under control flow that differs "
                                        "between the lanes of a warp")
            for ref in s.operands:
                self.buffer(ref.buffer, where)
                self.expr(ref.offset, where)
            if s.scale_d is not None:
                self.expr(s.scale_d, where)
        elif isinstance(s, WarpSpecialized):
            if self.in_roles or not 0 < s.split < self.k.num_threads:
                raise TileInternalError(f"{where}: warp specialization must split the block once "
                                        f"({s.split} of {self.k.num_threads} threads)")
            self.in_roles = True
            # each side is evaluated over the threads that run it: a lane table built for the
            # consumers' `split` threads is never read by a producer thread
            # (lets computed before the split are sliced the same way)
            block = self.env
            self.env = {k: v[s.split:] for k, v in block.items()}
            self.stmt(s.producer)
            self.env = {k: v[:s.split] for k, v in block.items()}
            self.stmt(s.consumer)
            self.env = block
            self.in_roles = False
        elif isinstance(s, Barrier):
            if self.in_roles and s.scope == "block":
                raise TileInternalError(f"{where}: a block barrier inside a warp-specialized role "
                                        "(the other role never arrives; use a named barrier)")
            # a named barrier counts the threads that execute it (bar.sync id, n): it may sit in a
            # branch that whole warps take (the emulator checks the count and whole warps)
            if self.control != UNIFORM and s.scope != "named":
                raise TileInternalError(f"{where}: barrier under control flow that differs between the "
                                        f"threads of the block ({s.reason or 'no reason given'})")
        elif isinstance(s, (Store, AtomicAdd, KernelLaunch, ThreadKernel, *TILE_OPS)):
            raise TileInternalError(f"{where}: tile-level {type(s).__name__} inside a ThreadKernel")
        else:
            self.stmt_other(s, where)

    def stmt_other(self, s, where: str) -> None:
        """A statement kind this verifier does not know (added by a later design step): its
        buffers, expressions and nested statements (its dataclass fields) are still checked."""
        import dataclasses

        from .buffer import Buffer
        from .stmt import Stmt

        def field(v) -> None:
            if isinstance(v, Buffer):
                self.buffer(v, where)
            elif isinstance(v, Expr):
                self.expr(v, where)
            elif isinstance(v, Stmt):
                self.stmt(v)
            elif isinstance(v, tuple):
                for x in v:
                    field(x)
            elif dataclasses.is_dataclass(v) and not isinstance(v, type) and not getattr(v, "IR_LEAF", False):
                for f in dataclasses.fields(v):
                    field(getattr(v, f.name))

        for f in dataclasses.fields(s):
            if f.name != "loc":
                field(getattr(s, f.name))
