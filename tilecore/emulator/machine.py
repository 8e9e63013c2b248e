"""Execute a lowered thread program: every block in turn, all its threads at once (NumPy lanes).

Each value is an array over the block's threads; control flow narrows an *active mask*.
Registers are (threads x n) arrays, shared memory one flat array per buffer, global memory
flat views of the argument arrays. Warp-wide operations (shuffles, intrinsics) require whole
warps; a barrier requires every thread of its scope (the block, its named thread count, each
warpgroup). Asynchronous copies land at the wait that retires them (`asyncops.py`), and the race
tracker (`race.py`) checks every shared access against the asynchronous memory model of
docs/architecture.md. Intrinsics run from their declared lane maps (`tilecore.ir.intrinsic`),
the same tables the code generator reads.
"""

from __future__ import annotations

import numpy as np

from .. import semantics as S
from ..errors import SourceLoc, TileRuntimeError
from ..ir.buffer import Buffer
from ..ir.debug import DeviceAssert, Print
from ..ir.expr import Expr, Var
from ..ir.grid_sync import phases as grid_phases
from ..ir.loops import While
from ..ir.module import Module
from ..ir.reg_budget import SetMaxNReg
from ..ir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt
from ..ir.thread import (
    AsyncCommit,
    AsyncCopy,
    AsyncFence,
    AsyncWait,
    Atomic,
    Barrier,
    IntrinsicCall,
    MbarrierArrive,
    MbarrierInit,
    MbarrierWait,
    MemStore,
    ThreadKernel,
    TmaLoad,
    TmaStore,
    VecMove,
    WarpgroupTurn,
    WarpSpecialized,
    find_kernel,
)
from ..ir.thread_printer import print_thread_func
from ..ir.visit import walk
from . import debug, divergence, shared_alias, uninit
from .asyncops import AsyncState
from .atomics import atomic_add
from .evaluate import Evaluator, lanes_of
from .intrinsics import run_intrinsic
from .mbarrier import MbarrierState
from .race import SyncClock
from .reg_budget import check_setmaxnreg
from .tasks import TaskGroup
from .turns import TurnCounts, no_region
from .wgmma import WgmmaState


class EmuArtifact:
    """The `tile_build` result for emu targets: runs the lowered module on NumPy arrays."""

    array_api = "numpy"

    def __init__(self, module: Module):
        self.module = module
        self.kernel = find_kernel(module.func.body)
        if self.kernel is None:
            raise TileRuntimeError("the emu target needs a thread-lowered module", module.func.loc,
                                   hint="compile for emu:<arch> of an installed GPU backend")
        self.source = print_thread_func(module.func)

    def run(self, args: list, dyn: dict) -> None:
        """Execute every block of the grid on `args` (parameter order, outputs written in place)."""
        func = self.module.func
        env: dict[int, object] = {}
        for v in func.dyn_vars:
            env[id(v)] = np.int64(dyn[v.name])
        mem = {id(p): a.reshape(-1) for p, a in zip(func.params, args)}
        Block(self.kernel, mem, env, func.params).run_grid()


def _invariant_vars(k: ThreadKernel, env: dict) -> set[int]:
    """Ids of the variables whose value is fixed for a whole block: the thread and block
    indices and the dynamic sizes bound before the run (`env`), unless the body rebinds one."""
    out = set(env) | {id(v) for v in k.block_vars} | {id(k.thread_var)}
    for n in walk(k.body):
        if isinstance(n, (LetStmt, For)):
            out.discard(id(n.var))
    return out


class Block:
    """The state of one block's execution: registers, shared memory, race trackers."""

    def __init__(self, k: ThreadKernel, mem: dict, env: dict, params):
        self.k = k
        self.T = k.num_threads
        self.W = k.warp_size
        self.mem = mem
        self.params = {id(p): p for p in params}
        self.env = env
        self.tid = np.arange(self.T, dtype=np.int64)
        self.locs: list[SourceLoc | None] = []
        self._loc_ids: dict = {}
        self.loc_id = self._locid(k.loc)
        # register buffers asynchronous tensor-core ops read (fence tracking); see wgmma.py
        self.wgmma_regs = {id(r.buffer) for n in walk(k.body) if isinstance(n, IntrinsicCall)
                           and n.intrinsic.kind == "wgmma" for r in n.operands if r.buffer.scope == "local"}
        self.wg: WgmmaState | None = None
        self.check_uninit = uninit.enabled()
        self.has_waits = any(isinstance(n, MbarrierWait) for n in walk(k.body))
        self.all_lanes = np.ones(self.T, dtype=bool)
        self.all_lanes.flags.writeable = False  # shared by every caller, as is tid
        self.tid.flags.writeable = False
        self.evaluator = Evaluator(self, _invariant_vars(k, env))

    def _locid(self, loc) -> int:
        key = id(loc)
        if key not in self._loc_ids:
            self._loc_ids[key] = len(self.locs)
            self.locs.append(loc)
        return self._loc_ids[key]

    @property
    def loc(self):
        """The source location of the statement being executed."""
        return self.locs[self.loc_id]

    # ----------------------------------------------------------------- driver
    def run_grid(self) -> None:
        """Run every block of the grid, one after the other."""
        k = self.k
        dims = [int(np.asarray(self.eval(g, None))) for g in k.grid]
        # T.sync_grid: each phase runs in every block before the next (tilecore.ir.grid_sync);
        # no block state crosses a sync, so each phase starts with fresh block state
        for part in grid_phases(k.body):
            self._run_blocks(dims, SeqStmt(tuple(part), k.loc))

    def _run_blocks(self, dims: list, body) -> None:
        """Run `body` (the kernel body, or one phase of it) in every block, one after another."""
        k = self.k
        for flat in range(int(np.prod(dims)) if dims else 1):
            rest = flat
            for v, n in zip(k.block_vars, dims):
                self.env[id(v)] = np.int64(rest % n)
                rest //= n
            self.env[id(k.thread_var)] = self.tid
            self.evaluator.new_block()
            self.shared = {}
            self.trackers = {}
            self.clock = SyncClock(self.T)
            self.asyncs = AsyncState(self.T)
            self.mbarriers = MbarrierState()
            self.tasks: TaskGroup | None = None
            self.turns: TurnCounts | None = None
            self.wg = WgmmaState(self.T, self.wgmma_regs) if self.wgmma_regs else None
            for b in k.shared:
                self.shared[id(b)] = np.full(b.shape[0], S.poison_value(b.dtype), dtype=b.dtype.np)
            self.trackers = shared_alias.trackers(k, self.clock)  # planned reuse: shared_alias.py
            self.regs = {id(b): np.full((self.T, b.shape[0]), S.poison_value(b.dtype), dtype=b.dtype.np)
                         for b in k.registers}
            if self.check_uninit:
                self.reg_init = uninit.register_shadows(k.registers, self.T)
            self.exec(body, np.ones(self.T, dtype=bool))
            self.mbarriers.check_end(self)

    # ----------------------------------------------------------------- memory
    def _storage(self, buf: Buffer):
        if buf.scope == "global":
            return self.mem[id(buf)]
        if buf.scope == "shared":
            return self.shared[id(buf)]
        return self.regs[id(buf)]

    def _check(self, buf: Buffer, off: np.ndarray, lanes: np.ndarray, n: int, what: str, width: int = 1):
        if off.min() >= 0 and off.max() + width <= n:
            return  # every lane inside: the common case, two reductions
        bad = lanes & ((off < 0) | (off + width > n))
        if bad.any():
            t = int(np.argmax(bad))
            raise TileRuntimeError(
                f"out-of-bounds {what} of {buf.scope} buffer {buf.name}: thread {t} accesses flat "
                f"element {int(off[t])}, outside 0..{n - 1}", self.loc,
                hint="guard the access with `if` / T.if_then_else, or size the tile to the buffer")

    def _check_indices(self, buf: Buffer, indices, lanes: np.ndarray, what: str) -> None:
        """Each of the user's indices inside the tensor's shape, for the active lanes."""
        for dim, (i, n) in enumerate(zip(indices, buf.shape)):
            v = lanes_of(np.asarray(self.eval(i, lanes), dtype=np.int64), self.T)
            size = int(np.asarray(self.eval(n, None))) if isinstance(n, Var) else int(n)
            bad = lanes & ((v < 0) | (v >= size))
            if bad.any():
                t = int(np.argmax(bad))
                raise TileRuntimeError(
                    f"out-of-bounds {what} of {buf.scope} buffer {buf.name}: thread {t} uses index "
                    f"{int(v[t])} in dimension {dim} of size {size}", self.loc,
                    hint="guard the access with `if` / T.if_then_else, or size the grid to the tensor")

    def read(self, buf: Buffer, off, lanes: np.ndarray, width: int = 1) -> np.ndarray:
        """Values (T, width) in storage dtype at offsets off..off+width of active lanes (0 elsewhere)."""
        off = lanes_of(np.asarray(off, dtype=np.int64), self.T)
        store = self._storage(buf)
        n = store.shape[-1]
        self._check(buf, off, lanes, n, "read", width)
        idx = np.where(lanes, off, 0)[:, None] + np.arange(width)
        idx = np.where(lanes[:, None], idx, 0)
        # a register of a wgmma in flight is a race before it is an uninitialized read (the
        # accumulator a first k step with scale-d 0 writes has no earlier writer)
        if buf.scope == "local" and self.wg is not None:
            self.wg.reg_access(self, buf, self.tid[lanes], idx[lanes], write=False)
        if self.check_uninit:
            uninit.check_read(self, buf, idx, lanes)
        if buf.scope == "local":
            vals = store[self.tid[:, None], idx]
        else:
            vals = store[idx]
            if buf.scope == "shared":
                act = np.repeat(lanes, width)
                self.trackers[id(buf)].read(idx.reshape(-1)[act], np.repeat(self.tid, width)[act],
                                            self.loc_id, self.locs)
        return np.where(lanes[:, None], vals, np.zeros((), dtype=vals.dtype))

    def read1(self, buf: Buffer, off, lanes: np.ndarray) -> np.ndarray:
        """`read(buf, off, lanes)[:, 0]`: one element per lane, (T,), with fast paths for a
        register at one offset in every thread and for fully active lanes."""
        T = self.T
        if buf.scope == "local" and self.wg is None and np.ndim(off) == 0:
            store = self.regs[id(buf)]
            o = int(off)
            if not 0 <= o < store.shape[1]:
                self._check(buf, lanes_of(np.int64(o), T), lanes, store.shape[1], "read")
                return np.zeros(T, dtype=store.dtype)  # no active lane: nothing is read
            if self.check_uninit:
                uninit.check_register(self, buf, o, lanes)
            col = store[:, o]
            return col.copy() if lanes.all() else np.where(lanes, col, np.zeros((), dtype=col.dtype))
        off = lanes_of(np.asarray(off, dtype=np.int64), T)
        store = self._storage(buf)
        self._check(buf, off, lanes, store.shape[-1], "read")
        full = bool(lanes.all())
        idx = off if full else np.where(lanes, off, 0)
        if buf.scope == "local" and self.wg is not None:  # a race first, as in `read`
            self.wg.reg_access(self, buf, self.tid[lanes], idx[lanes][:, None], write=False)
        if self.check_uninit:
            uninit.check_read(self, buf, idx[:, None], lanes)
        if buf.scope == "local":
            vals = store[self.tid, idx]
        else:
            vals = store[idx]
            if buf.scope == "shared":
                self.trackers[id(buf)].read(idx if full else idx[lanes],
                                            self.tid if full else self.tid[lanes], self.loc_id, self.locs)
        return vals if full else np.where(lanes, vals, np.zeros((), dtype=vals.dtype))

    def write(self, buf: Buffer, off, vals: np.ndarray, lanes: np.ndarray, width: int = 1) -> None:
        """Store vals (T, width) (storage dtype) at offsets of the active lanes."""
        off = lanes_of(np.asarray(off, dtype=np.int64), self.T)
        store = self._storage(buf)
        n = store.shape[-1]
        self._check(buf, off, lanes, n, "write", width)
        t = self.tid[lanes]
        idx = off[lanes][:, None] + np.arange(width)
        v = vals[lanes]
        if buf.scope == "local":
            if self.wg is not None:
                self.wg.reg_access(self, buf, t, idx, write=True)
            store[t[:, None], idx] = v
            if self.check_uninit:
                uninit.mark_write(self, buf, t, idx)
        else:
            if buf.scope == "shared":
                self.trackers[id(buf)].write(idx.reshape(-1), np.repeat(t, width), self.loc_id, self.locs,
                                             v.reshape(-1))
            store[idx.reshape(-1)] = v.reshape(-1)

    # ----------------------------------------------------------------- expressions
    def eval(self, e: Expr, mask):
        """Value(s) of `e` for the lanes in `mask` (None: all); compute representation
        (`evaluate.py`: each node is compiled to a closure on first use)."""
        f = self.evaluator.fns.get(id(e))
        if f is None:
            f = self.evaluator.fn(e)
        return f(mask)

    def _mask(self, mask) -> np.ndarray:
        return self.all_lanes if mask is None else mask

    def _whole_warps(self, mask, what: str) -> np.ndarray:
        m = self._mask(mask)
        if self.T % self.W:
            raise TileRuntimeError(f"{what} needs whole warps; the block has {self.T} threads", self.loc,
                                   hint="use a multiple of the warp size as threads")
        w = m.reshape(-1, self.W)
        if not np.all(w.all(axis=1) | ~w.any(axis=1)):
            raise TileRuntimeError(f"{what} executed by part of a warp (divergent control flow)", self.loc,
                                   hint="keep the operation outside branches that split a warp")
        return m

    # ----------------------------------------------------------------- statements
    def exec(self, s: Stmt, mask: np.ndarray) -> None:
        """Execute `s` for the threads in `mask`."""
        if s.loc is not None:
            self.loc_id = self._locid(s.loc)
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                self.exec(x, mask)
        elif isinstance(s, MemStore):
            lanes = mask if s.pred is None else mask & lanes_of(self.eval(s.pred, mask), self.T)
            if lanes.any():
                v = lanes_of(self.eval(s.value, lanes), self.T)
                v = S.cast_value(v, s.value.dtype, s.buffer.dtype) if s.value.dtype != s.buffer.dtype else v
                if s.indices:
                    self._check_indices(s.buffer, s.indices, lanes, "write")
                off = self.eval(s.offset, lanes)
                self.write(s.buffer, off, S.to_storage(v, s.buffer.dtype)[:, None], lanes)
        elif isinstance(s, LetStmt):
            self.env[id(s.var)] = self.eval(s.value, mask)
        elif isinstance(s, IfThenElse):
            if self.has_waits and divergence.run_if_divergent(self, s, mask):
                return  # roles that wait on each other ran concurrently
            c = lanes_of(self.eval(s.cond, mask), self.T)
            mt = mask & c
            if mt.any():
                self.exec(s.then_body, mt)
            if s.else_body is not None:
                mf = mask & ~c
                if mf.any():
                    self.exec(s.else_body, mf)
        elif isinstance(s, For):
            self._for(s, mask)
        elif isinstance(s, While):
            # each thread leaves when its own condition fails; a barrier or warp-wide operation
            # in the body then runs for part of the block or warp, which those checks report
            live = mask
            while True:
                live = live & lanes_of(self.eval(s.cond, live), self.T)
                if not live.any():
                    break
                self.exec(s.body, live)
                if s.loc is not None:
                    self.loc_id = self._locid(s.loc)
        elif isinstance(s, VecMove):
            self._vecmove(s, mask)
        elif isinstance(s, Barrier):
            self._barrier(s, mask)
        elif isinstance(s, AsyncCopy):
            self.asyncs.issue(self, s, mask)
        elif isinstance(s, AsyncCommit) and s.queue == "wgmma":
            self._wgmma_state().commit(mask)
        elif isinstance(s, AsyncWait) and s.queue == "wgmma":
            self._wgmma_state().wait(self, s.pending, mask)
        elif isinstance(s, AsyncFence):
            if s.kind == "wgmma":
                self._wgmma_state().fence(mask)
            # proxy_async: the emulator has one proxy; ordinary barriers already order the data
        elif isinstance(s, AsyncCommit):
            self.asyncs.commit(s.queue, mask)
        elif isinstance(s, AsyncWait):
            self.asyncs.wait(self, s.queue, s.pending, mask)
        elif isinstance(s, WarpSpecialized):
            self._warp_specialized(s, mask)
        elif isinstance(s, SetMaxNReg):  # changes no value; warpgroup-aligned (reg_budget.py)
            check_setmaxnreg(self, mask)
        elif isinstance(s, WarpgroupTurn):
            if self.turns is None:
                raise no_region(self.loc)
            self.turns.execute(s, mask, self.loc)
        elif isinstance(s, (MbarrierInit, MbarrierArrive, MbarrierWait, TmaLoad, TmaStore)):
            self.mbarriers.execute(self, s, mask)
        elif isinstance(s, Atomic):
            self._atomic(s, mask)
        elif isinstance(s, IntrinsicCall) and s.intrinsic.kind == "wgmma":
            self._wgmma_state().issue(self, s, mask)
        elif isinstance(s, IntrinsicCall):
            m = self._whole_warps(mask, s.intrinsic.name)
            run_intrinsic(self, s, m)
        elif isinstance(s, Print):
            debug.run_print(self, s, mask)
        elif isinstance(s, DeviceAssert):
            debug.run_assert(self, s, mask)
        elif isinstance(s, ThreadKernel):
            raise TileRuntimeError("nested ThreadKernel", self.loc,
                                   hint="a lowering nested kernels: report it")
        else:
            raise TileRuntimeError(f"emu cannot execute {type(s).__name__}", self.loc,
                                   hint="a lowering produced a statement the emulator lacks: report it")

    def _warp_specialized(self, s: WarpSpecialized, mask: np.ndarray) -> None:
        """Producer and consumer threads run concurrently (`tasks.py`): each side blocks at an
        mbarrier wait until the other completes the phase."""
        if self.tasks is not None:
            raise TileRuntimeError("nested warp specialization", self.loc,
                                   hint="a lowering produced this; please report it with the kernel")
        cons, prod = mask & (self.tid < s.split), mask & (self.tid >= s.split)
        size = s.split // s.groups  # ping-pong consumer groups run as tasks of their own
        groups = [cons & (self.tid // size == g) for g in range(s.groups)]
        self.tasks = TaskGroup()
        self.turns = TurnCounts(s.split)
        try:
            # the producer first, until it blocks: its copies are then in flight while the
            # consumers run, so a consumer read that skips its wait is caught as a race
            self.tasks.run([lambda: self.exec(s.producer, prod)] +
                           [lambda m=m: self.exec(s.consumer, m) for m in groups])
            self.turns.check(self.loc)
        finally:
            self.tasks = self.turns = None
    def _wgmma_state(self) -> WgmmaState:
        """The block's wgmma queue state (made on first use by a kernel without wgmma calls)."""
        if self.wg is None:
            self.wg = WgmmaState(self.T, self.wgmma_regs)
        return self.wg

    def _barrier(self, s: Barrier, mask: np.ndarray) -> None:
        """A barrier of its scope: the threads taking part must all arrive, then are ordered."""
        if s.scope == "block":
            if not mask.all():
                raise TileRuntimeError("a barrier is reached by only some threads of the block "
                                       "(divergent control flow)", self.loc,
                                       hint="keep tile operations out of branches on thread-varying values")
            self.clock.barrier(None)
        elif s.scope == "named":
            m = self._whole_warps(mask, f"named barrier {s.barrier_id}")
            if int(m.sum()) != s.count:
                raise TileRuntimeError(f"named barrier {s.barrier_id} expects {s.count} threads but "
                                       f"{int(m.sum())} arrive (a GPU would hang)", self.loc,
                                       hint="every thread the barrier counts must reach it")
            self.clock.barrier(self.tid[m])
        else:
            size = 4 * self.W
            if self.T % size:
                raise TileRuntimeError(f"a warpgroup barrier needs whole warpgroups; the block has "
                                       f"{self.T} threads", self.loc, hint="use a multiple of 128 threads")
            groups = mask.reshape(-1, size)
            if not np.all(groups.all(axis=1) | ~groups.any(axis=1)):
                raise TileRuntimeError("a warpgroup barrier executed by part of a warpgroup "
                                       "(divergent control flow)", self.loc,
                                       hint="keep the operation outside branches that split a warpgroup")
            for g in np.nonzero(groups.all(axis=1))[0]:
                self.clock.barrier(self.tid[g * size:(g + 1) * size])

    def _for(self, s: For, mask: np.ndarray) -> None:
        start, stop = self.eval(s.start, mask), self.eval(s.stop, mask)
        if np.ndim(start) == 0 and np.ndim(stop) == 0:
            for i in range(int(start), int(stop), s.step):
                self.env[id(s.var)] = np.int64(i)
                self.exec(s.body, mask)
            return
        start = lanes_of(np.asarray(start, dtype=np.int64), self.T)
        stop = lanes_of(np.asarray(stop, dtype=np.int64), self.T)
        if not mask.any():
            return
        if s.step > 0:
            lo, hi = int(start[mask].min()), int(stop[mask].max())
            rng = range(lo, hi, s.step)
        else:
            lo, hi = int(start[mask].max()), int(stop[mask].min())
            rng = range(lo, hi, s.step)
        for i in rng:
            inside = (i >= start) & (i < stop) if s.step > 0 else (i <= start) & (i > stop)
            on = mask & inside & (((i - start) % s.step) == 0)
            if on.any():
                self.env[id(s.var)] = np.int64(i)
                self.exec(s.body, on)

    def _vecmove(self, s: VecMove, mask: np.ndarray) -> None:
        pred = mask if s.pred is None else mask & lanes_of(self.eval(s.pred, mask), self.T)
        for side, off_e in ((s.src, s.src_offset), (s.dst, s.dst_offset)):
            off = lanes_of(np.asarray(self.eval(off_e, pred), dtype=np.int64), self.T)
            if np.any(pred & (off % s.lanes != 0)):
                raise TileRuntimeError(f"misaligned {s.lanes}-element vector access to {side.name}",
                                       self.loc, hint="a lowering chose a vector width the offsets "
                                       "do not allow: report it")
        if pred.any():
            vals = self.read(s.src, self.eval(s.src_offset, pred), pred, s.lanes)
            self.write(s.dst, self.eval(s.dst_offset, pred), vals, pred, s.lanes)
        zero = mask & ~pred
        if s.zero_fill and zero.any():
            vals = np.zeros((self.T, s.lanes), dtype=s.dst.dtype.np)
            self.write(s.dst, self.eval(s.dst_offset, zero), vals, zero, s.lanes)

    def _atomic(self, s: Atomic, mask: np.ndarray) -> None:
        lanes = mask if s.pred is None else mask & lanes_of(self.eval(s.pred, mask), self.T)
        if not lanes.any():
            return
        d = s.buffer.dtype
        off = lanes_of(np.asarray(self.eval(s.offset, lanes), dtype=np.int64), self.T)
        v = lanes_of(self.eval(s.value, lanes), self.T)
        store = self._storage(s.buffer)
        self._check(s.buffer, off, lanes, store.shape[-1], "atomic update")
        # one thread after another, each seeing the previous sums (computed array-wise)
        old = atomic_add(store, off, v, lanes, d, s.op)
        if s.prev is not None:  # return_prev: the value each thread's update found
            vals = S.from_storage(old, d)
            if s.prev.dtype != d:
                vals = S.cast_value(vals, d, s.prev.dtype)
            self.write(s.prev, self.eval(s.prev_offset, lanes), S.to_storage(vals, s.prev.dtype)[:, None],
                       lanes)
