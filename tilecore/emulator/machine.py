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
from ..ir.expr import BinOp, Cast, Const, Expr, Select, Unary, Var
from ..ir.grid_sync import phases as grid_phases
from ..ir.loops import While
from ..ir.module import Module
from ..ir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt
from ..ir.thread import (
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
    WarpSpecialized,
    find_kernel,
)
from ..ir.thread_printer import print_thread_func
from ..ir.visit import walk
from . import debug, divergence, shared_alias, uninit
from .asyncops import AsyncState
from .intrinsics import run_intrinsic
from .mbarrier import MbarrierState
from .race import SyncClock
from .tasks import TaskGroup
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
            self.shared = {}
            self.trackers = {}
            self.clock = SyncClock(self.T)
            self.asyncs = AsyncState(self.T)
            self.mbarriers = MbarrierState()
            self.tasks: TaskGroup | None = None
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
            v = np.broadcast_to(np.asarray(self.eval(i, lanes), dtype=np.int64), (self.T,))
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
        off = np.broadcast_to(np.asarray(off, dtype=np.int64), (self.T,))
        store = self._storage(buf)
        n = store.shape[-1]
        self._check(buf, off, lanes, n, "read", width)
        idx = np.where(lanes, off, 0)[:, None] + np.arange(width)
        idx = np.where(lanes[:, None], idx, 0)
        if self.check_uninit:
            uninit.check_read(self, buf, idx, lanes)
        if buf.scope == "local":
            if self.wg is not None:
                self.wg.reg_access(self, buf, self.tid[lanes], idx[lanes], write=False)
            vals = store[self.tid[:, None], idx]
        else:
            vals = store[idx]
            if buf.scope == "shared":
                act = np.repeat(lanes, width)
                self.trackers[id(buf)].read(idx.reshape(-1)[act], np.repeat(self.tid, width)[act],
                                            self.loc_id, self.locs)
        return np.where(lanes[:, None], vals, np.zeros((), dtype=vals.dtype))

    def write(self, buf: Buffer, off, vals: np.ndarray, lanes: np.ndarray, width: int = 1) -> None:
        """Store vals (T, width) (storage dtype) at offsets of the active lanes."""
        off = np.broadcast_to(np.asarray(off, dtype=np.int64), (self.T,))
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
        """Value(s) of `e` for the lanes in `mask` (None: all); compute representation."""
        if isinstance(e, Const):
            if e.dtype.is_int:
                return np.int64(e.value)
            if e.dtype.is_bool:
                return np.bool_(e.value)
            return S.round_to(e.value, e.dtype)
        if isinstance(e, Var):
            try:
                return self.env[id(e)]
            except KeyError:
                raise TileRuntimeError(f"variable {e.name} used before it is bound", self.loc,
                                       hint="define the name before this statement") from None
        if isinstance(e, MemLoad):
            lanes = self._mask(mask)
            if e.pred is not None:
                lanes = lanes & np.broadcast_to(self.eval(e.pred, lanes), (self.T,))
            if e.indices:
                self._check_indices(e.buffer, e.indices, lanes, "read")
            off = self.eval(e.offset, lanes)
            return S.from_storage(self.read(e.buffer, off, lanes)[:, 0], e.buffer.dtype)
        if isinstance(e, BinOp):
            return self._binop(e, mask)
        if isinstance(e, Unary):
            return self._unary(e, mask)
        if isinstance(e, Cast):
            return S.cast_value(self.eval(e.value, mask), e.value.dtype, e.dtype)
        if isinstance(e, Select):
            c = np.broadcast_to(self.eval(e.cond, mask), (self.T,))
            m = self._mask(mask)
            mt, mf = m & c, m & ~c
            a = self.eval(e.true_value, mt) if mt.any() else None
            b = self.eval(e.false_value, mf) if mf.any() else None
            if a is None:
                return b if b is not None else self.eval(e.true_value, mt)
            if b is None:
                return a
            return np.where(c, a, b)
        if isinstance(e, Shuffle):
            return self._shuffle(e, mask)
        if isinstance(e, LaneTable):
            idx = np.asarray(self.eval(e.index, mask), dtype=np.int64)
            table = np.asarray(e.values, dtype=np.int64)
            return table[np.clip(idx, 0, len(table) - 1)]
        raise TileRuntimeError(f"emu cannot evaluate {type(e).__name__}", self.loc,
                               hint="a lowering produced a node the emulator lacks: report it")

    def _mask(self, mask) -> np.ndarray:
        return np.ones(self.T, dtype=bool) if mask is None else mask

    def _binop(self, e: BinOp, mask):
        a, b = self.eval(e.a, mask), self.eval(e.b, mask)
        op, t = e.op, e.a.dtype
        if op in ("div", "mod", "floordiv", "floormod") and (t.is_int or t.is_bool):
            bz = np.broadcast_to(np.asarray(b) == 0, (self.T,)) & self._mask(mask)
            if bz.any():
                raise TileRuntimeError("integer division by zero", self.loc,
                                       hint="guard the division (`if d != 0:`) or check the divisor")
            b = np.where(np.asarray(b) == 0, 1, b)  # inactive lanes may divide by zero
        if op in S.SHIFT_OPS:
            b = self._shift_count(b, t, mask)
        return S.binop(op, a, b, t)

    def _shift_count(self, b, t, mask):
        """Shift counts with inactive lanes' made valid; an active lane's count outside
        [0, compute width) is a TileRuntimeError (undefined in C, see tilecore.semantics)."""
        width = S.int_compute_dtype(t).bits
        bad = (np.asarray(b) < 0) | (np.asarray(b) >= width)
        active = np.broadcast_to(bad, (self.T,)) & self._mask(mask)
        if active.any():
            count = int(np.broadcast_to(np.asarray(b), (self.T,))[active][0])
            raise TileRuntimeError(f"shift count {count} is outside [0, {width}) for {t}", self.loc,
                                   hint="shift by a count in [0, bit width)")
        return np.where(bad, 0, b)

    def _unary(self, e: Unary, mask):
        return S.unary(e.op, self.eval(e.a, mask), e.dtype)

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

    def _shuffle(self, e: Shuffle, mask):
        self._whole_warps(mask, "a warp shuffle")
        v = np.broadcast_to(self.eval(e.value, mask), (self.T,))
        arg = np.broadcast_to(np.asarray(self.eval(e.arg, mask), dtype=np.int64), (self.T,))
        lane = self.tid % e.width
        src = (lane ^ arg) if e.mode == "xor" else arg
        src = self.tid - lane + (src % e.width)
        return v[src]

    # ----------------------------------------------------------------- statements
    def exec(self, s: Stmt, mask: np.ndarray) -> None:
        """Execute `s` for the threads in `mask`."""
        if s.loc is not None:
            self.loc_id = self._locid(s.loc)
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                self.exec(x, mask)
        elif isinstance(s, MemStore):
            lanes = mask if s.pred is None else mask & np.broadcast_to(self.eval(s.pred, mask), (self.T,))
            if lanes.any():
                v = np.broadcast_to(self.eval(s.value, lanes), (self.T,))
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
            c = np.broadcast_to(self.eval(s.cond, mask), (self.T,))
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
                live = live & np.broadcast_to(self.eval(s.cond, live), (self.T,))
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
        try:
            # the producer first, until it blocks: its copies are then in flight while the
            # consumers run, so a consumer read that skips its wait is caught as a race
            self.tasks.run([lambda: self.exec(s.producer, prod)] +
                           [lambda m=m: self.exec(s.consumer, m) for m in groups])
        finally:
            self.tasks = None
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
        start = np.broadcast_to(np.asarray(start, dtype=np.int64), (self.T,))
        stop = np.broadcast_to(np.asarray(stop, dtype=np.int64), (self.T,))
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
        pred = mask if s.pred is None else mask & np.broadcast_to(self.eval(s.pred, mask), (self.T,))
        for side, off_e in ((s.src, s.src_offset), (s.dst, s.dst_offset)):
            off = np.broadcast_to(np.asarray(self.eval(off_e, pred), dtype=np.int64), (self.T,))
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
        lanes = mask if s.pred is None else mask & np.broadcast_to(self.eval(s.pred, mask), (self.T,))
        if not lanes.any():
            return
        d = s.buffer.dtype
        off = np.broadcast_to(np.asarray(self.eval(s.offset, lanes), dtype=np.int64), (self.T,))
        v = np.broadcast_to(self.eval(s.value, lanes), (self.T,))
        store = self._storage(s.buffer)
        self._check(s.buffer, off, lanes, store.shape[-1], "atomic update")
        old = np.zeros(self.T, dtype=store.dtype)
        for t in np.nonzero(lanes)[0]:  # one thread after another: each sees the previous sums
            old[t] = store[off[t]]
            cur = S.from_storage(store[off[t]], d)
            if d.is_int:
                store[off[t]] = S.to_storage(S.wrap_int(cur + int(v[t]), d), d)
            else:
                store[off[t]] = S.to_storage(S.round_to(cur + S.round_to(v[t], d), d), d)
        if s.prev is not None:  # return_prev: the value each thread's update found
            vals = S.from_storage(old, d)
            if s.prev.dtype != d:
                vals = S.cast_value(vals, d, s.prev.dtype)
            self.write(s.prev, self.eval(s.prev_offset, lanes), S.to_storage(vals, s.prev.dtype)[:, None],
                       lanes)
