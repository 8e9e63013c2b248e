"""Tile IR -> one Python module that numba compiles: `launch_serial`, running every block (the
body of `T.Kernel`) in order with the body inline, and, unless the kernel accumulates atomically
into global memory or prints (then blocks run in order, one at a time), a `block` function and a
`launch` function calling it over `prange`.

Blocks are numbered like the oracle's (bx fastest, then by, then bz). Per-block shared and
fragment buffers are allocated at the start of each block and poisoned as `interp` poisons them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilecore import dtypes as dt
from tilecore.errors import TileTargetError
from tilecore.ir.aliases import BufferAlias
from tilecore.ir.debug import DEBUG_STMTS
from tilecore.ir.expr import Const, Load, binop, cast, const_int
from tilecore.ir.grid_sync import phases as grid_phases
from tilecore.ir.loops import While
from tilecore.ir.module import PrimFunc
from tilecore.ir.reducers import BINOP as REDUCER_BINOP
from tilecore.ir.reducers import FinalizeReducer, ReducerUpdate
from tilecore.ir.stmt import (
    AtomicAdd,
    AtomicAddRegion,
    For,
    IfThenElse,
    KernelLaunch,
    LetStmt,
    SeqStmt,
    Store,
)
from tilecore.ir.visit import walk

from . import debug, tileops
from .emit import Faults, Lines, Names
from .exprs import ExprGen, convert, round_to, storage_np, to_compute, to_storage, unsigned
from .ranges import interval, loop_range, observed, split_guard, upper_facts

HEADER = '''"""tilecore cpu kernel `{name}`: generated from tile IR, compiled by numba. Do not edit."""
# runtime {runtime}

import math  # noqa: F401

import numpy as np  # noqa: F401
from numba import njit, prange  # noqa: F401

from tilecore_cpu.runtime import (  # noqa: F401
    acc2, cdiv, cmod, copy1, copy2, dec2_bfloat16, dec2_float16, dec2_float8_e4m3fn,
    dec2_float8_e5m2, dec_bfloat16, dec_float16, dec_float8_e4m3fn, dec_float8_e5m2, enc_bfloat16,
    enc_float16, enc_float8_e4m3fn, enc_float8_e5m2, exp2_f32, exp_f32, f2i, fill1, fill2, fmax,
    fmin, load_masked1, load_masked2, odd_f32, oob, rnd_bfloat16, rnd_float16, rnd_float8_e4m3fn,
    rnd_float8_e5m2, store_masked1, store_masked2,
)
from tilecore_cpu.intops import cfloordiv, cfloormod, cshl, cshr  # noqa: F401
'''
# no_cfunc_wrapper: nothing takes a generated function's address as a first-class function
# value, and the wrapper is lowered and optimized with each function (a tenth of a small
# kernel's cold compile); functions only jitted code calls (the block, helpers) get
# no_cpython_wrapper (NESTED) as well, since Python never calls them
JIT = 'njit(cache=True, error_model="numpy", no_cfunc_wrapper=True{extra})'
NESTED = ", no_cpython_wrapper=True"


@dataclass(frozen=True)
class Generated:
    """The generated module source and what the host side needs to run and report faults."""

    source: str
    faults: Faults
    parallel: bool
    prints: tuple = ()  # T.print sites: (format, argument dtypes) (tilecore_cpu.debug)


def _poison(d) -> str:
    if d.is_float:
        bits = np.full((), np.nan, dtype=d.np).view(storage_np(d))
        return f"np.{storage_np(d).name}({int(bits)})" if d.bits < 32 else f"np.{d.name}(np.nan)"
    if d.is_bool:
        return "True"
    if d.kind == "uint":
        return str(int(dt.max_value(d)))
    return str(int(dt.min_value(d)) + 7)


class Codegen:
    """Generates the module for one PrimFunc (call `generate()` once)."""

    def __init__(self, func: PrimFunc, runtime_tag: str):
        self.func = func
        self.runtime_tag = runtime_tag
        self.names = Names()
        self.faults = Faults()
        self.x = ExprGen(self.names, self.faults)
        self.helpers: list[str] = []  # extra njit functions (reductions, scans)
        self.scratch: list[str] = []  # per-block scratch allocations
        self.lines = Lines()
        self.print_sites: list = []  # T.print formats (tilecore_cpu.debug)
        self.log_args: list[str] = []

    # ------------------------------------------------------------------ module
    def generate(self) -> Generated:
        """Build the module source."""
        func = self.func
        top, launch = _split_top(func)
        scalars = func.attr("scalar_params", ())
        self.scalar_ids = {id(v) for v in scalars}
        # the launchers' parameters: the tensors, then the scalar parameters (int64 values the
        # host checked against their dtype: `CpuArtifact.run` passes them in this order)
        params = [self.names.of(p) for p in func.params] + [self.names.of(v) for v in scalars]
        dyn = [(v, self.names.of(v)) for v in func.dyn_vars]
        lets = [(s, self.names.of(s.var)) for s in top]
        for v, _ in dyn:  # a tensor's dimension: an int32 size, never negative
            lo = dt.min_value(v.dtype) if id(v) in self.scalar_ids else 0
            self.x.env[id(v)] = (lo, dt.max_value(v.dtype))
        for s, _ in lets:
            if s.var.dtype.is_int:
                r = interval(s.value, self.x.env)
                if r is not None:
                    self.x.env[id(s.var)] = r
        bvars = [self.names.of(v) for v in launch.block_vars]
        self.log_args = debug.log_args(launch.body)
        self.names.used.update(self.log_args)
        for v, g in zip(launch.block_vars, launch.grid):
            # a grid size known only at run time: block indices are below its (wrapped) range
            n = observed(interval(g, self.x.env), g.dtype)[1] if g.dtype.is_int else 1 << 40
            self.x.env[id(v)] = (0, max(n - 1, 0))
        allocs = []
        for b in launch.allocs:
            name = self.names.of(b)
            shape = b.static_shape
            # not fill loops of the kernel's own: every kernel's loops cost it typing, lowering
            # and LLVM's loop passes again (about 10% of a small kernel). Not np.full either
            # where the rank allows: numba compiles its overload (a flat-iterator loop) once per
            # process and dtype, never from its disk cache (0.1-0.2 s each); np.empty is cheaper
            # and the runtime's fill1/fill2 are compiled once per signature, then disk-cached
            storage = f"np.{storage_np(b.dtype).name}"
            value = f"{storage}({_poison(b.dtype)})"
            if len(shape) in (1, 2):
                allocs.append(f"{name} = np.empty({tuple(shape)!r}, {storage})")
                zeros = ", ".join(["np.int64(0)"] * len(shape))
                sizes = ", ".join(f"np.int64({n})" for n in shape)
                allocs.append(f"fill{len(shape)}({name}, {zeros}, {sizes}, {value})")
            else:
                allocs.append(f"{name} = np.full({tuple(shape)!r}, {value}, {storage})")
        self.lines.depth = 1
        self.x.loc = launch.loc
        parts = grid_phases(launch.body)
        self.phases = len(parts)
        if len(parts) == 1:
            self.stmt(launch.body)
        else:  # T.sync_grid: `block` runs one phase; the launcher runs each over the grid
            for i, part in enumerate(parts):
                self.lines.add(f"if _phase == {i}:")
                self.lines.body(lambda part=part: [self.stmt(x) for x in part])
        body = self.lines.text()
        outer = [n for v, n in dyn if id(v) not in self.scalar_ids] + [n for _, n in lets]
        parallel = not self.log_args and not any(  # printing kernels run blocks in order
            isinstance(s, (AtomicAdd, AtomicAddRegion))
            and (s.buffer if isinstance(s, AtomicAdd) else s.dst.buffer).scope == "global"
            for s in walk(launch.body)
        )
        out = [HEADER.format(name=func.name, runtime=self.runtime_tag)]
        out.extend(self.helpers)
        phase = ["_phase"] if self.phases > 1 else []
        block_body = "".join(f"    {line}\n" for line in allocs + self.scratch) + body
        if parallel:  # the prange launcher calls the block as a function
            bargs = ", ".join(phase + bvars + params + outer + ["err"] + self.log_args)
            out.append(f"\n@{JIT.format(extra=NESTED)}\ndef block({bargs}):\n{block_body}")
        # the serial launcher runs the block's body inline: numba then types, lowers and
        # optimizes it once, where a separate `block` would be compiled to machine code on its
        # own and again inside the launcher (about 15% of a small kernel's compile time)
        out.append(self._launch("launch_serial", launch, params, dyn, lets, outer, False,
                                inline=(bvars, block_body)))
        if parallel:
            out.append(self._launch("launch", launch, params, dyn, lets, outer, True))
        return Generated("".join(out), self.faults, parallel, tuple(self.print_sites))

    def _launch(self, fname, launch, params, dyn, lets, outer, parallel, inline=None) -> str:
        """A launcher running every block: `prange` over blocks when `parallel`; with `inline`
        ((block variable names, block body at one indent)) the body runs in the loop itself."""
        lines = Lines()
        lines.add("")
        lines.add(f"@{JIT.format(extra=', parallel=True' if parallel else '')}")
        lines.add(f"def {fname}({', '.join(params + ['err'] + self.log_args)}):")
        with lines.indent():
            for v, name in dyn:
                if id(v) in self.scalar_ids:  # a launcher parameter already
                    continue
                p, d = _dim_of(self.func, v)
                lines.add(f"{name} = np.int64({self.names.of(p)}.shape[{d}])")
            for s, name in lets:
                lines.add(f"{name} = {self.x.gen(s.value)}")
            gs = []
            for i, g in enumerate(launch.grid):
                gs.append(f"_g{i}")
                c = const_int(g)
                if c is not None:  # a constant grid: no `max` (numba compiles its overload)
                    lines.add(f"_g{i} = np.int64({max(c, 0)})")
                else:
                    lines.add(f"_g{i} = max(np.int64({self.x.observed(g)}), 0)")
            phase = []
            if self.phases > 1:  # every block finishes a phase before the next starts
                lines.add(f"for _phase in range({self.phases}):")
                lines.depth += 1
                phase = ["_phase"]
            lines.add(f"for _blk in {'prange' if parallel else 'range'}({' * '.join(gs)}):")
            with lines.indent():
                # prange may type its index unsigned, and numba makes uint64 // int64 a float
                lines.add("_b = np.int64(_blk)")
                rest = "_b"
                idx = []
                for i, g in enumerate(gs):
                    if i == len(gs) - 1:
                        idx.append(rest)
                    else:
                        idx.append(f"({rest}) % {g}")
                        rest = f"({rest}) // {g}"
                if inline is None:
                    lines.add(f"block({', '.join(phase + idx + params + outer + ['err'] + self.log_args)})")
                else:
                    for name, value in zip(inline[0], idx):
                        lines.add(f"{name} = {value}")
        text = lines.text()
        if inline is not None:  # the body sits in the block loop (inside the phase loop, if any)
            pad = "    " * (2 if self.phases > 1 else 1)
            text += "".join(f"{pad}{line}\n" if line.strip() else "\n"
                            for line in inline[1].rstrip("\n").split("\n"))
        return text

    # ------------------------------------------------------------------ statements
    def stmt(self, s) -> None:
        """Emit statement `s` at the current indentation."""
        loc = getattr(s, "loc", None)
        if loc is not None:
            self.x.loc = loc
        if isinstance(s, SeqStmt):
            for t in s.stmts:
                self.stmt(t)
        elif isinstance(s, LetStmt):
            self.lines.add(f"{self.names.of(s.var)} = {self.x.gen(s.value)}")
            if s.var.dtype.is_int:
                r = interval(s.value, self.x.env)
                if r is not None:
                    self.x.env[id(s.var)] = r
        elif isinstance(s, Store):
            self._store(s)
        elif isinstance(s, AtomicAdd):
            self._atomic(s)
        elif isinstance(s, For):
            self._for(s)
        elif isinstance(s, While):  # re-evaluated before each iteration, as in Python
            self.lines.add(f"while {self.x.gen(s.cond)}:")
            self.lines.body(lambda: self.stmt(s.body))
            self.x.loc = s.loc
        elif isinstance(s, IfThenElse):
            self.lines.add(f"if {self.x.gen(s.cond)}:")
            n = len(self.x.facts)
            self.x.facts.extend(upper_facts(s.cond))
            self.lines.body(lambda: self.stmt(s.then_body))
            del self.x.facts[n:]
            if s.else_body is not None:
                self.lines.add("else:")
                self.lines.body(lambda: self.stmt(s.else_body))
        elif isinstance(s, tileops.TILE_OPS):
            tileops.emit(self, s)
        elif isinstance(s, DEBUG_STMTS):
            debug.emit_debug(self, s)
        elif isinstance(s, ReducerUpdate):  # a block's iterations run in sequence: read-modify-write
            combined = binop(REDUCER_BINOP[s.op], Load(s.buffer, s.indices), s.value)
            self._store(Store(s.buffer, s.indices, cast(combined, s.buffer.dtype), s.loc))
        elif isinstance(s, FinalizeReducer):  # the updates combined as they ran
            pass
        elif isinstance(s, BufferAlias):  # T.view(..., dtype=): the base's bytes, no copy
            v = s.buffer
            n = v.numel * v.dtype.itemsize
            self.lines.add(f"{self.names.of(v)} = {self.names.of(s.base)}.reshape(-1).view(np.uint8)"
                           f"[:{n}].view(np.{storage_np(v.dtype).name}).reshape({tuple(v.shape)!r})")
        else:
            raise TileTargetError(f"the cpu backend cannot compile {type(s).__name__} statements", loc,
                                  hint="run this kernel on interp (or an emu target)")

    def _element(self, buf, indices, value_fn) -> None:
        """`buf[indices] = value_fn(ref)` with a bounds check unless proven in range."""
        idx = [self.x.gen(i) for i in indices]
        ref = f"{self.names.of(buf)}[{', '.join(unsigned(c, self.x.counters) for c in idx)}]"
        ok = self.x.in_bounds(buf, indices, idx)
        if ok is None:
            self.lines.add(f"{ref} = {value_fn(ref)}")
            return
        self.lines.add(f"if {ok}:")
        with self.lines.indent():
            self.lines.add(f"{ref} = {value_fn(ref)}")
        self.lines.add("else:")
        with self.lines.indent():
            self.lines.add(self.x.fault_call("write", buf, idx))

    def _store(self, s: Store) -> None:
        d = s.buffer.dtype
        value = convert(self.x.gen(s.value), s.value.dtype, d)
        self._element(s.buffer, s.indices, lambda ref: to_storage(value, d))

    def _atomic(self, s: AtomicAdd) -> None:
        if s.op != "add":  # max / min: the blocks of a kernel with global atomics run in sequence
            combined = binop(s.op, Load(s.buffer, s.indices), s.value)
            self._store(Store(s.buffer, s.indices, cast(combined, s.buffer.dtype), s.loc))
            return
        d = s.buffer.dtype
        value = convert(self.x.gen(s.value), s.value.dtype, d)
        self._element(s.buffer, s.indices,
                      lambda ref: to_storage(round_to(f"({to_compute(ref, d)} + {value})", d), d))

    def _for(self, s: For) -> None:
        var = self.names.of(s.var)
        start, stop = self.x.observed(s.start), self.x.observed(s.stop)
        r = loop_range(s.start, s.stop, s.step, self.x.env)
        if r is not None:
            self.x.env[id(s.var)] = r
        split = split_guard(s)
        if isinstance(s.start, Const) and s.start.value >= 0 and s.step > 0:
            self.x.counters.add(var)  # max(start, ...) in the split form stays >= start too
        if split is None:
            step = f", {s.step}" if s.step != 1 else ""
            self.lines.add(f"for {var} in range({start}, {stop}{step}):")
            self.lines.body(lambda: self.stmt(s.body))
            self.x.loc = s.loc
            return
        # `for i: [lets]; if cond(i): body` with cond linear in i: iterate only where it holds
        outer, lows, highs, lets, guard = split
        depth = self.lines.depth
        if outer:
            self.lines.add(f"if {' & '.join(f'({self.x.gen(c)})' for c in outer)}:")
            self.lines.depth += 1
        lo = f"max({start}, {', '.join(self.x.observed(e) for e in lows)})" if lows else start
        hi = f"min({stop}, {', '.join(self.x.observed(e) for e in highs)})" if highs else stop
        self.lines.add(f"for {var} in range({lo}, {hi}):")

        def body():
            for let in lets:
                self.stmt(let)
            n = len(self.x.facts)
            self.x.facts.extend(upper_facts(guard.cond))
            self.stmt(guard.then_body)
            del self.x.facts[n:]

        self.lines.body(body)
        self.lines.depth = depth
        self.x.loc = s.loc

    # ------------------------------------------------------------------ for tile ops
    def scratch_array(self, hint: str, shape: tuple, np_name: str) -> str:
        """A per-block scratch array allocated once at the top of `block`."""
        name = self.names.fresh(hint)
        self.scratch.append(f"{name} = np.empty({tuple(shape)!r}, np.{np_name})")
        return name

    def helper(self, hint: str, args: str, body: Lines, fastmath: str = "") -> str:
        """Add a module-level njit function; returns its name."""
        name = self.names.fresh(hint)
        extra = NESTED + (f", fastmath={fastmath}" if fastmath else "")
        self.helpers.append(f"\n@{JIT.format(extra=extra)}\ndef {name}({args}):\n{body.text()}")
        return name


def _split_top(func: PrimFunc):
    """The LetStmts before the launch and the one KernelLaunch of a PrimFunc."""
    body = func.body
    stmts = body.stmts if isinstance(body, SeqStmt) else (body,)
    lets, launch = [], None
    for s in stmts:
        if isinstance(s, LetStmt) and launch is None:
            lets.append(s)
        elif isinstance(s, KernelLaunch) and launch is None:
            launch = s
        else:
            raise TileTargetError(
                f"the cpu backend expects `with T.Kernel(...)` to hold the whole kernel body, found "
                f"{type(s).__name__} outside it", getattr(s, "loc", None) or func.loc,
                hint="move the statement into the `with T.Kernel(...)` block")
    if launch is None:
        raise TileTargetError(f"kernel {func.name} has no T.Kernel launch", func.loc,
                              hint="wrap the body in `with T.Kernel(...)`")
    return lets, launch


def _dim_of(func: PrimFunc, v):
    for p in func.params:
        for d, s in enumerate(p.shape):
            if s is v:
                return p, d
    raise TileTargetError(f"symbolic dimension {v.name} appears in no parameter shape", func.loc,
                          hint="declare it as a scalar parameter (`n: T.int32` in the signature) "
                          "or use it in a tensor's shape")
