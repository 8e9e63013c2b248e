"""tilecore tile IR -> a TVM TIR PrimFunc, built with `tvm.script.ir_builder`.

The input is the **tile** program, not tilecore's thread program: the thread IR is written for
SIMT targets with warp shuffles, tensor-core lane maps, vector moves and asynchronous copies,
none of which TVM's LLVM CPU target can run (it has no thread bindings or barriers) and most
of which WGSL lacks; the tile program's buffers, regions and loops map one to one onto TIR
buffers and loops, and TVM's own passes then do the target work.

Two mappings of a block (`caps.Caps.gpu`):

- CPU (`tvm:llvm`): the grid is one loop over blocks (`T.parallel`, or `T.serial` when the
  kernel accumulates atomically into global memory), numbered like the oracle's (bx fastest);
  every tile of a block is a local TIR buffer and the block's statements run in order;
- GPU (`tvm:webgpu`, `rocm`, `metal`, `opencl`): the grid is `blockIdx.x` (linearized, so no
  grid-dimension limits), the kernel's threads `threadIdx.x`; shared, fragment and local tiles
  live in `shared` memory (a tile belongs to the whole block), scalar `T.alloc_var`s are
  per-thread copies that every thread keeps identical. Every thread runs the block's serial
  control flow; each `T.Parallel` nest and tile operation is split over the threads
  (element `tx`, `tx + threads`, ...) with a barrier before and after it; a store outside
  them is made by thread 0 and followed by a barrier.
"""

from __future__ import annotations

import tvm
from tvm import tirx as tir
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as T

from tilecore.ir.buffer import Buffer
from tilecore.ir.expr import Load, binop, cast
from tilecore.ir.module import PrimFunc
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

from . import tileops
from .caps import Caps, Unsupported
from .dtypes import storage
from .exprs import ExprLower, as_i32, as_prim, c, convert, round_to, to_storage, ty, wrap_arith
from .params import call_order
from .private import private_fragments

# Shared memory per block (bytes) of the GPU-mapped targets: WebGPU adapters (lavapipe's
# maxComputeWorkgroupStorageSize, TVM's default for webgpu) and Metal 32 KiB, OpenCL's common
# 48 KiB, AMD's 64 KiB LDS.
SHARED_LIMIT = {"webgpu": 32768, "metal": 32768, "opencl": 49152, "rocm": 65536}


def _global_atomics(body) -> bool:
    return any(isinstance(s, (AtomicAdd, AtomicAddRegion))
               and (s.buffer if isinstance(s, AtomicAdd) else s.dst.buffer).scope == "global"
               for s in walk(body))


def _split_top(func: PrimFunc):
    """(top-level LetStmts, the KernelLaunch) of `func`'s body."""
    stmts = func.body.stmts if isinstance(func.body, SeqStmt) else (func.body,)
    lets, launch = [], None
    for s in stmts:
        if isinstance(s, LetStmt) and launch is None:
            lets.append(s)
        elif isinstance(s, KernelLaunch) and launch is None:
            launch = s
        else:
            raise Unsupported("the tvm backend compiles one `with T.Kernel(...)` preceded only by "
                              f"scalar assignments (found {type(s).__name__})")
    if launch is None:
        raise Unsupported("the kernel has no `with T.Kernel(...)` frame")
    return lets, launch


class Lowerer:
    """Builds the PrimFunc of one tilecore function for one target (call `build()` once)."""

    def __init__(self, func: PrimFunc, caps: Caps):
        self.func = func
        self.caps = caps
        self.x = ExprLower(caps)
        self.tx = None  # threadIdx.x (GPU mapping)
        self.threads = 1
        self.depth = 0  # > 0 inside a statement split over threads (a T.Parallel nest)
        self.scratch: list = []  # (shape, dtype) of per-block temporaries (overlapping copies)

    # ----------------------------------------------------------------- function
    def build(self):
        """The `tvm.tirx.PrimFunc`."""
        func = self.func
        lets, launch = _split_top(func)
        for p in func.params:
            self.caps.check_dtype(p.dtype, f"parameter {p.name}")
        for b in launch.allocs:
            self.caps.check_dtype(b.dtype, f"buffer {b.name}")
        for v in func.dyn_vars:
            self.x.vars[id(v)] = tir.Var(v.name, "int32")
        with IRBuilder() as ib:
            with T.prim_func():
                T.func_name(func.name)
                T.func_attr({"global_symbol": func.name, "tirx.noalias": True})
                for p in call_order(func):
                    if isinstance(p, Buffer):
                        shape = [s if isinstance(s, int) else self.x.vars[id(s)] for s in p.shape]
                        buf = T.buffer(shape, storage(p.dtype), buffer_name=p.name)
                        self.x.bufs[id(p)] = T.arg(p.name, buf)
                    else:  # a scalar parameter
                        T.arg(p.name, self.x.vars[id(p)])
                for s in lets:
                    self.let(s)
                self.launch(launch)
        return ib.get()

    def launch(self, k: KernelLaunch) -> None:
        # not bound to variables: on a GPU a host-side binding would become a kernel parameter
        grid = [self.x(g, index=True) for g in k.grid]
        total = grid[0]
        for g in grid[1:]:
            total = total * g
        if self.caps.gpu:
            self.threads = k.num_threads
            with T.launch_thread("blockIdx.x", total) as lin:
                tx = T.env_thread("threadIdx.x")
                with T.launch_thread(tx, self.threads):
                    self.tx = tx
                    self._block(k, grid, lin)
            return
        loop = T.serial if _global_atomics(k.body) else T.parallel
        with loop(0, total) as lin:
            self._block(k, grid, lin)

    def _block(self, k: KernelLaunch, grid, lin) -> None:
        """Block indices from the linear block number, the block's tiles, then its body."""
        rest = lin
        for i, (v, g) in enumerate(zip(k.block_vars, grid)):
            val = rest if i == len(grid) - 1 else tir.floormod(rest, g)
            self.x.vars[id(v)] = T.bind(as_i32(val))
            rest = tir.floordiv(rest, g)
        private = private_fragments(k) if self.caps.gpu else set()
        shared = 0
        for b in k.allocs:
            if id(b) in private:  # per thread: one value per element it owns
                n = -(-b.numel // self.threads)
                self.x.private[id(b)] = T.alloc_buffer([n], storage(b.dtype), scope="local")
                continue
            scope = "local" if (not self.caps.gpu or b.is_var) else "shared"
            if scope == "shared":
                shared += b.numel * b.dtype.itemsize
            self.x.bufs[id(b)] = T.alloc_buffer(list(b.static_shape), storage(b.dtype), scope=scope)
        limit = SHARED_LIMIT.get(self.caps.kind)
        if limit is not None and shared > limit:
            raise Unsupported(f"the kernel's shared tiles need {shared} bytes of shared memory; "
                              f"tvm:{self.caps.kind} has {limit} (fragments that every statement "
                              "accesses element-wise are kept in registers; these are not)")
        self.stmt(k.body)

    # ----------------------------------------------------------------- statements
    def stmt(self, s) -> None:
        """Emit statement `s` into the current ir_builder frame."""
        try:
            m = getattr(self, "s_" + type(s).__name__)
        except AttributeError:
            if isinstance(s, tileops.TILE_OPS):
                self.distributed(lambda: tileops.emit(self, s))
                return
            raise Unsupported(f"the tvm backend cannot lower {type(s).__name__}") from None
        m(s)

    def s_SeqStmt(self, s: SeqStmt) -> None:
        for x in s.stmts:
            self.stmt(x)

    def let(self, s: LetStmt) -> None:
        # named like the tilecore variable: a top-level one becomes a kernel parameter on GPUs,
        # which the WebGPU runner finds by this name in the WGSL's PODArgs
        value = self.x(s.value)
        self.x.vars[id(s.var)] = T.bind(value, var=tir.Var(s.var.name, ty(value)))

    s_LetStmt = let

    def s_Store(self, s: Store) -> None:
        self.store(s.buffer, s.indices, self.x(s.value))

    def store(self, buf: Buffer, indices, value) -> None:
        """`buf[indices] = value` (a compute value of buf's dtype); on a GPU outside a split
        statement, thread 0 stores into memory the block shares and a barrier follows."""
        if id(buf) in self.x.private:  # inside a split statement, at the element's own position
            T.buffer_store(self.x.private[id(buf)], to_storage(value, buf.dtype), [self.x.it])
            return
        tbuf = self.x.buffer(buf)
        emit = lambda: T.buffer_store(tbuf, to_storage(value, buf.dtype), self.x.indices(indices))  # noqa: E731
        if self.caps.gpu and self.depth and buf.is_var:
            raise Unsupported(f"T.alloc_var {buf.name} is assigned inside a T.Parallel nest; on "
                              f"tvm:{self.caps.kind} each thread keeps its own copy")
        if not self.caps.gpu or self.depth or buf.is_var:
            emit()
            return
        self.barrier()
        with T.If(self.tx == c(0, ty(self.tx))):
            with T.Then():
                emit()
        self.barrier()

    def s_AtomicAdd(self, s: AtomicAdd) -> None:
        if self.caps.gpu:
            raise Unsupported(f"T.atomic_add is not lowered for tvm:{self.caps.kind} (no float "
                              "atomics in WGSL; TVM's GPU atomics are not wired up here)")
        # CPU: blocks run one after another when a kernel accumulates into global memory, so a
        # plain read-modify-write is atomic; the value is added in the buffer's compute type
        d = s.buffer.dtype
        if s.op != "add":  # T.atomic_max / atomic_min: the expression lowering's max / min
            self.store(s.buffer, s.indices, self.x(cast(binop(s.op, Load(s.buffer, s.indices), s.value), d)))
            return
        cur = self.x.load(s.buffer, s.indices)
        v = convert(self.x(s.value), s.value.dtype, d, self.caps)
        new = wrap_arith("add", cur, v, ty(cur), self.caps.has_64bit) if d.is_int else round_to(cur + v, d)
        self.store(s.buffer, s.indices, new)

    def s_IfThenElse(self, s: IfThenElse) -> None:
        cond = self.x(s.cond)
        with T.If(cond):
            with T.Then():
                self.stmt(s.then_body)
            if s.else_body is not None:
                with T.Else():
                    self.stmt(s.else_body)

    def s_For(self, s: For) -> None:
        if s.kind == "parallel" and self.caps.gpu and not self.depth:
            self.distributed(lambda: self.parallel_nest(s))
            return
        start, stop = self.bound(self.x(s.start, index=True)), self.bound(self.x(s.stop, index=True))
        loop = T.unroll if s.kind == "unroll" and isinstance(stop, tir.IntImm) else T.serial
        if s.step == 1:
            with loop(start, stop) as v:
                self.x.vars[id(s.var)] = v
                self.stmt(s.body)
            return
        st = s.step
        n = tir.max(tir.truncdiv(stop - start + c(st - (1 if st > 0 else -1), "int32"), c(st, "int32")),
                    c(0, "int32"))
        with loop(0, n) as k:
            self.x.vars[id(s.var)] = T.bind(start + k * c(st, "int32"))
            self.stmt(s.body)

    @staticmethod
    def bound(x):
        """`x` itself when it is a variable or a constant, else a variable bound to it (a value
        used twice must not be two copies of one expression: TIR Lets inside would clash)."""
        return x if isinstance(x, (tir.Var, tir.IntImm)) else T.bind(x)

    # ----------------------------------------------------------------- thread splitting
    def barrier(self) -> None:
        """A block barrier (GPU mapping), unless the previous statement already was one."""
        T.evaluate(tir.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))

    def distributed(self, body) -> None:
        """Run `body` (which emits a split statement) between barriers on a GPU."""
        if self.caps.gpu and not self.depth:
            self.barrier()
            self.depth += 1
            try:
                body()
            finally:
                self.depth -= 1
            self.barrier()
        else:
            body()

    def elements(self, extents, body) -> None:
        """Loop over the index space `extents` (ints or PrimExprs), calling `body(indices)`;
        on a GPU inside a split statement the flattened space is dealt to the threads."""
        extents = [as_prim(e) for e in extents]
        if not (self.caps.gpu and self.depth == 1):
            self._nest(extents, [], body)
            return
        total = extents[0]
        for e in extents[1:]:
            total = total * e
        self.depth += 1  # nested splits inside run serially per thread
        try:
            nt = c(self.threads, "int32")
            tx = as_i32(self.tx)
            with T.serial(0, tir.truncdiv(total + nt - c(1, "int32"), nt)) as it:
                flat = T.bind(it * nt + tx)
                with T.If(flat < total):
                    with T.Then():
                        idx, rest = [], flat
                        for j in range(len(extents) - 1, -1, -1):
                            idx.append(tir.floormod(rest, extents[j]) if j else rest)
                            rest = tir.floordiv(rest, extents[j])
                        self.x.it = it  # where per-thread fragments keep this element
                        body(list(reversed(idx)))
        finally:
            self.depth -= 1
            self.x.it = None

    def _nest(self, extents, idx, body) -> None:
        if len(idx) == len(extents):
            body(idx)
            return
        with T.serial(0, extents[len(idx)]) as v:
            self._nest(extents, idx + [v], body)

    def parallel_nest(self, s: For) -> None:
        """A T.Parallel nest split over threads: the perfectly nested parallel loops flattened."""
        loops = [s]
        while isinstance(loops[-1].body, For) and loops[-1].body.kind == "parallel":
            loops.append(loops[-1].body)
        if any(lp.step != 1 for lp in loops):
            raise Unsupported("a T.Parallel loop with a step is not lowered for GPU targets")
        starts = [self.bound(self.x(lp.start, index=True)) for lp in loops]
        extents = [self.bound(self.x(lp.stop, index=True) - st) for lp, st in zip(loops, starts)]

        def body(idx):
            for lp, st, i in zip(loops, starts, idx):
                self.x.vars[id(lp.var)] = T.bind(i + st) if not _is_zero(st) else T.bind(i)
            self.stmt(loops[-1].body)

        self.elements([tir.IntImm("int32", int(e)) if isinstance(e, int) else e for e in extents], body)


def _is_zero(e) -> bool:
    return isinstance(e, tir.IntImm) and int(e) == 0


def lower(func: PrimFunc, caps: Caps) -> tvm.IRModule:
    """The tilecore function `func` as a TVM IRModule holding one PrimFunc named like it."""
    prim = Lowerer(func, caps).build()
    return tvm.IRModule({func.name: prim})
