"""Print thread-level IR as readable C-like pseudo code (what `kernel.get_ir(stage)` shows)."""

from __future__ import annotations

from .loops import While
from .module import PrimFunc
from .printer import Printer, print_node
from .stmt import For, IfThenElse, LetStmt, SeqStmt
from .thread import (
    AsyncCommit,
    AsyncCopy,
    AsyncFence,
    AsyncWait,
    Atomic,
    Barrier,
    IntrinsicCall,
    LaneTable,
    MbarrierArrive,
    MbarrierInit,
    MbarrierWait,
    MemLoad,
    MemStore,
    Shuffle,
    ThreadKernel,
    TmaLoad,
    TmaStore,
    VecMove,
    WarpgroupTurn,
    WarpSpecialized,
)


def _box(p: ThreadPrinter, tensor, coords, box) -> str:
    at = ", ".join(f"{p.expr(c)} : +{n}" for c, n in zip(coords, box))
    return f"{p.name(tensor)}[{at}]"


class ThreadPrinter(Printer):
    """The tile printer extended with thread-level nodes."""

    def expr(self, e, prec: int = 0) -> str:
        """An expression, thread-level nodes included."""
        if isinstance(e, MemLoad):
            s = f"{self.name(e.buffer)}[{self.expr(e.offset)}]"
            return s if e.pred is None else f"({self.expr(e.pred)} ? {s} : 0)"
        if isinstance(e, Shuffle):
            return f"shfl_{e.mode}({self.expr(e.value)}, {self.expr(e.arg)}, width={e.width})"
        if isinstance(e, LaneTable):
            return f"table{list(e.values)}[{self.expr(e.index)}]"
        return super().expr(e, prec)

    def _pred(self, p) -> str:
        return "" if p is None else f"if ({self.expr(p)}) "

    def _hopper(self, s) -> str:
        """One line for an mbarrier, TMA or fence statement."""
        if isinstance(s, TmaStore):
            op = f"tma_reduce_{s.reduce}" if s.reduce else "tma_store"
            return (f"{op} {_box(self, s.tensor, s.coords, s.box)} <- {self.name(s.src)}"
                    f"[{self.expr(s.src_offset)}] {s.layout.describe()}  # bulk, clipped")
        bar = f"{self.name(s.bar)}[{self.expr(s.bar_offset if isinstance(s, TmaLoad) else s.offset)}]"
        if isinstance(s, MbarrierInit):
            return f"mbarrier_init({bar}, count={s.count})"
        if isinstance(s, MbarrierArrive):
            tx = f", expect_tx={s.expect_tx}" if s.expect_tx else ""
            return f"mbarrier_arrive({bar}{tx})"
        if isinstance(s, MbarrierWait):
            hint = f", suspend={s.suspend_ns}ns" if s.suspend_ns else ""
            return f"mbarrier_wait({bar}, phase={self.expr(s.phase)}{hint})"
        hint = f" L2::{s.cache_hint}" if s.cache_hint else ""
        return (f"tma_load{hint} {self.name(s.dst)}[{self.expr(s.dst_offset)}] {s.layout.describe()} <- "
                f"{_box(self, s.tensor, s.coords, s.box)} else zero  # {s.nbytes} bytes on {bar}")

    def stmt(self, s, depth: int):
        """A statement at indentation `depth`, thread-level nodes included."""
        if isinstance(s, ThreadKernel):
            grid = ", ".join(f"{self.name(v)} < {self.expr(g)}" for v, g in zip(s.block_vars, s.grid))
            self.emit(depth, f"kernel grid({grid}) threads({self.name(s.thread_var)} < {s.num_threads}, "
                             f"warp {s.warp_size}):")
            for b in s.shared:
                lay = f"  # {b.layout.describe()}" if b.layout is not None else ""
                self.emit(depth + 1, f"shared {b.dtype.name} {self.name(b)}[{b.shape[0]}]{lay}")
            for b in s.registers:
                self.emit(depth + 1, f"reg {b.dtype.name} {self.name(b)}[{b.shape[0]}]")
            self.stmt(s.body, depth + 1)
        elif isinstance(s, MemStore):
            self.emit(depth, f"{self._pred(s.pred)}{self.name(s.buffer)}[{self.expr(s.offset)}] = "
                             f"{self.expr(s.value)}")
        elif isinstance(s, VecMove):
            zf = " else zero" if s.zero_fill else ""
            dst = f"{self.name(s.dst)}[{self.expr(s.dst_offset)} : +{s.lanes}]"
            src = f"{self.name(s.src)}[{self.expr(s.src_offset)} : +{s.lanes}]"
            hint = f" L2::{s.cache_hint}" if s.cache_hint else ""
            self.emit(depth, f"{self._pred(s.pred)}{dst} = {src}{zf}{hint}")
        elif isinstance(s, Barrier):
            if s.scope == "block":
                call = "barrier()"
            elif s.scope == "named":
                call = f"barrier(id={s.barrier_id}, threads={s.count})"
            else:
                call = f"barrier(warpgroup, id={s.barrier_id} + warpgroup)"
            self.emit(depth, f"{call}  # {s.reason}" if s.reason else call)
        elif isinstance(s, AsyncCopy):
            zf = " else zero" if s.zero_fill else ""
            dst = f"{self.name(s.dst)}[{self.expr(s.dst_offset)} : +{s.lanes}]"
            src = f"{self.name(s.src)}[{self.expr(s.src_offset)} : +{s.lanes}]"
            self.emit(depth, f"{self._pred(s.pred)}async {dst} <- {src}{zf}  # {s.queue}")
        elif isinstance(s, AsyncCommit):
            self.emit(depth, f"async_commit({s.queue})")
        elif isinstance(s, AsyncWait):
            self.emit(depth, f"async_wait({s.queue}, pending={s.pending})")
        elif isinstance(s, AsyncFence):
            self.emit(depth, f"async_fence({s.kind})")
        elif isinstance(s, WarpgroupTurn):
            who = f", warpgroup {s.only} only" if s.only >= 0 else ""
            self.emit(depth, f"warpgroup_turn_{s.kind}(id={s.base_id} + warpgroup, groups={s.groups}{who})")
        elif isinstance(s, WarpSpecialized):
            regs = f", setmaxnreg {s.producer_regs}" if s.producer_regs else ""
            self.emit(depth, f"producer (threads >= {s.split}{regs}):")
            self.stmt(s.producer, depth + 1)
            regs = f", setmaxnreg {s.consumer_regs}" if s.consumer_regs else ""
            regs += f", {s.groups} independent groups" if s.groups > 1 else ""
            self.emit(depth, f"consumer (threads < {s.split}{regs}):")
            self.stmt(s.consumer, depth + 1)
        elif isinstance(s, (MbarrierInit, MbarrierArrive, MbarrierWait, TmaLoad, TmaStore)):
            self.emit(depth, self._hopper(s))
        elif isinstance(s, Atomic):
            ref = f"{self.name(s.buffer)}[{self.expr(s.offset)}]"
            got = "" if s.prev is None else f"{self.name(s.prev)}[{self.expr(s.prev_offset)}] = "
            self.emit(depth, f"{self._pred(s.pred)}{got}atomic_{s.op}({ref}, {self.expr(s.value)})")
        elif isinstance(s, IntrinsicCall):
            args = ", ".join(f"{o.name}={self.name(r.buffer)}[{self.expr(r.offset)}]"
                             for o, r in zip(s.intrinsic.operands, s.operands))
            if s.scale_d is not None:
                args += f", scale_d={self.expr(s.scale_d)}"
            self.emit(depth, f"{s.intrinsic.name}({args})")
        elif isinstance(s, For) and s.kind in ("serial", "unroll"):
            step = "" if s.step == 1 else f", step {s.step}"
            self.emit(depth, f"for {self.name(s.var)} in {s.kind}({self.expr(s.start)}, "
                             f"{self.expr(s.stop)}{step}):")
            self.stmt(s.body, depth + 1)
        elif isinstance(s, While):
            self.emit(depth, f"while {self.expr(s.cond)}:")
            self.stmt(s.body, depth + 1)
        elif isinstance(s, IfThenElse):
            self.emit(depth, f"if {self.expr(s.cond)}:")
            self.stmt(s.then_body, depth + 1)
            if s.else_body is not None:
                self.emit(depth, "else:")
                self.stmt(s.else_body, depth + 1)
        elif isinstance(s, (SeqStmt, LetStmt)):
            super().stmt(s, depth)
        else:
            super().stmt(s, depth)


def print_thread_func(f: PrimFunc) -> str:
    """A lowered function: parameters, symbolic dimensions, then the thread program."""
    p = ThreadPrinter()
    params = []
    for b in f.params:
        shape = ", ".join(p.expr(s) for s in b.shape)
        params.append(f"{b.dtype.name} {p.name(b)}[{shape}]")
    for v in f.dyn_vars:
        params.append(f"int {p.name(v)}")
    p.emit(0, f"thread_func {f.name}({', '.join(params)}):")
    p.stmt(f.body, 1)
    return "\n".join(p.lines) + "\n"


def print_thread_node(node) -> str:
    """One thread-level statement or expression as text."""
    return print_node(node, ThreadPrinter)
