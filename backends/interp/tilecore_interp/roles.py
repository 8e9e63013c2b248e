"""Warp-specialized tile programs on the interpreter (tilecore.lower.tile_roles): roles, mbarriers
and `T.tma_copy` at the tile level.

Each mbarrier of `T.alloc_barrier` is a `_Mbarrier` in its buffer's environment slot: the
arrivals its phase still misses and the number of completed phases. `T.barrier_arrive` counts
for the threads executing it (`BarrierArrive.arrivals`, set by the `thread-level` pass: a
role's 128 threads arrive at once); `T.tma_copy` reads its source at issue (its bytes are
expected and completed together, so they never hold a phase back) and its data land at the
first wait that passes after its phase completed: until then the destination holds the poison
value and counts as unwritten, so a read that skips the wait is reported by the
uninitialized-read check (TILECORE_CHECK_UNINIT) or shows as poison; `T.barrier_wait(bar, p)`
passes when the phase of parity p has completed. `Roles` runs its arms as concurrent tasks on a private copy
of the environment's scalars (buffers are shared), with the emulator's baton-passing scheduler
(`tilecore.emulator.tasks`): a role blocked at a wait lets the others run; when all are
blocked the block is deadlocked, reported at the wait with what its phase misses. A phase
some threads arrived at that is still incomplete when the roles end is a mismatched arrival
count, reported too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilecore.errors import TileRuntimeError
from tilecore.ir.expr import Var
from tilecore.ir.thread_level import (
    BarrierArrive,
    BarrierInit,
    BarrierWait,
    Roles,
    ThreadSync,
    TmaCopy,
    WarpRole,
)
from tilecore.ir.visit import walk
from tilecore.semantics import poison_value

from .exprs import compile_expr

STMTS = (BarrierInit, BarrierArrive, BarrierWait, Roles, ThreadSync, TmaCopy, WarpRole)
_SCHEDULER = Var("role scheduler")  # the environment slot holding the running TaskGroup


@dataclass
class _Mbarrier:
    count: int
    pending: int
    phase: int = 0  # phases completed
    arrived: int = 0  # arrivals in the current phase
    copies: list = field(default_factory=list)  # T.tma_copy data not landed: (phase, arr, box, vals, shadow)

    def land(self) -> None:
        """The copies of completed phases land (a wait observed their phase)."""
        keep = []
        for phase, arr, box, vals, sh in self.copies:
            if phase < self.phase:
                arr[box] = vals
                if sh is not None:
                    sh[box] = True
            else:
                keep.append((phase, arr, box, vals, sh))
        self.copies = keep

    def arrive(self, n: int) -> None:
        while n:
            take = min(n, self.pending)
            self.pending -= take
            self.arrived += take
            n -= take
            if self.pending == 0:
                self.phase += 1
                self.pending, self.arrived = self.count, 0


def compile_stmt(prog, s, vec):
    """The closure running thread-level statement `s` at the tile level (for Program.stmt)."""
    if isinstance(s, WarpRole):  # no waits: the region runs in program order
        return prog.stmt(s.body, vec)
    if isinstance(s, ThreadSync):  # tile operations of one role are ordered already
        def nothing(env, mask):
            return None

        return nothing
    if isinstance(s, TmaCopy):
        return _tma_copy(prog, s, vec)
    if isinstance(s, BarrierInit):
        slot, counts = prog.slots(s.bar), tuple(int(c) for c in s.counts)

        def init(env, mask):
            env[slot] = [_Mbarrier(c, c) for c in counts]

        return init
    if isinstance(s, BarrierArrive):
        return _arrive(prog, s)
    if isinstance(s, BarrierWait):
        return _wait(prog, s)
    return _roles(prog, s, vec)


def _element(prog, s):
    slot, fidx = prog.slots(s.bar), compile_expr(s.index, prog.slots, s.loc)

    def get(env):
        bars = env[slot]
        i = int(fidx(env, None))
        if not isinstance(bars, list):
            raise TileRuntimeError(f"mbarrier {s.bar.name} used before T.alloc_barrier ran", s.loc,
                                   hint="allocate the mbarriers at the top of the kernel body")
        if not 0 <= i < len(bars):
            raise TileRuntimeError(f"mbarrier {s.bar.name}[{i}] does not exist (it holds {len(bars)})",
                                   s.loc, hint="index the barrier within its count (check the stage index)")
        return bars[i], i

    return get


def _tma_copy(prog, s: TmaCopy, vec):
    """The copy reads its source now; its destination is undefined (poison, and unwritten for
    the uninitialized-read check) until a wait observes the phase its bytes complete on."""
    copy, get = prog.stmt(s.copy, vec), _element(prog, s)
    dst = s.copy.dst
    slot, sh_slot = prog.slots(dst.buffer), prog.slots.shadow.get(id(dst.buffer))
    starts = [compile_expr(e, prog.slots, s.loc) for e in dst.starts]
    poison = poison_value(dst.buffer.dtype)

    def tma(env, mask):
        bar, _ = get(env)
        real = env[slot]
        staged = list(env)
        staged[slot] = real.copy()
        if sh_slot is not None:
            staged[sh_slot] = env[sh_slot].copy()
        copy(staged, mask)
        box = tuple(slice(int(f(env, None)), int(f(env, None)) + n) for f, n in zip(starts, dst.extents))
        vals = staged[slot][box].copy()
        real[box] = poison
        sh = env[sh_slot] if sh_slot is not None else None
        if sh is not None:
            sh[box] = False
        bar.copies.append((bar.phase, real, box, vals, sh))

    return tma


def _arrive(prog, s: BarrierArrive):
    get, n = _element(prog, s), s.arrivals
    if n < 1:
        raise TileRuntimeError("T.barrier_arrive reached interp without its thread count", s.loc,
                               hint="a thread-level kernel bypassed the thread-level pass: report it")

    def arrive(env, mask):
        bar, _ = get(env)
        bar.arrive(n)

    return arrive


def _wait(prog, s: BarrierWait):
    get, fpar = _element(prog, s), compile_expr(s.parity, prog.slots, s.loc)
    tslot = prog.slots(_SCHEDULER)

    def error(bar, i, p):
        return TileRuntimeError(
            f"deadlock: every role waits, this one on mbarrier {s.bar.name}[{i}] for the phase of parity "
            f"{p}, which can never complete: {bar.pending} of its {bar.count} arrivals are missing",
            s.loc, hint="a GPU would hang here: an arrive is missing, the arrival count of "
                        "T.alloc_barrier differs from the threads that arrive, or the parity is wrong")

    def wait(env, mask):
        bar, i = get(env)
        p = int(fpar(env, None)) & 1
        if bar.phase % 2 == p:
            tasks = env[tslot]
            if tasks is None:
                raise error(bar, i, p)
            tasks.block(lambda: bar.phase % 2 != p, lambda: error(bar, i, p))
        bar.land()

    return wait


def _roles(prog, s: Roles, vec):
    from tilecore.emulator.tasks import TaskGroup

    tslot = prog.slots(_SCHEDULER)
    for _, _, body in s.arms:
        for n in walk(body):
            if isinstance(n, ThreadSync) and n.barrier_id is None:
                raise TileRuntimeError("T.sync_threads() inside concurrent roles: the block barrier "
                                       "would need every role at once", n.loc,
                                       hint="synchronize the roles with mbarriers")
    arms = [prog.stmt(body, vec) for _, _, body in s.arms]
    bars = sorted({id(n.bar): n.bar for n in walk(s) if isinstance(n, (BarrierArrive, BarrierWait))}.items())
    bslots = [(prog.slots(b), b) for _, b in bars]

    def run(env, mask):
        group = TaskGroup()
        env[tslot] = group

        def task(fn, copy):
            return lambda: fn(copy, mask)

        try:
            group.run([task(fn, list(env)) for fn in arms])
        finally:
            env[tslot] = None
        for slot, b in bslots:
            for i, bar in enumerate(env[slot] if isinstance(env[slot], list) else ()):
                if bar.arrived:
                    raise TileRuntimeError(
                        f"mbarrier {b.name}[{i}] ends the block with a phase incomplete: {bar.arrived} "
                        f"threads arrived, {bar.pending} of its {bar.count} expected arrivals are missing",
                        s.loc, hint="make the arrival count of T.alloc_barrier equal the number of "
                                    "threads that call T.barrier_arrive in each phase")

    return run
