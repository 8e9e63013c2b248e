"""Stream-K for persistent warp-specialized GEMMs (`T.stream_k(W, Flags)`; used by
tilecore.lower.warp_specialize).

A persistent kernel (G blocks, one per multiprocessor) of T tiles of n k steps each leaves a
partial last wave when T % G = r != 0: r blocks run one tile more than the others. With
`T.stream_k(W, Flags)` the schedule is a hybrid:

- data-parallel: the first T - r tiles, whole, as before (block b runs tiles b, b + G, ...);
- stream-K: the r * n k steps of the last r tiles are cut into G contiguous runs of q or q + 1
  steps (q = r * n // G, the first r * n % G runs one longer), run j for block j. A run covers
  the tail of one tile, whole tiles, and the head of another; each piece (a *unit*: tile u,
  k steps [k_first, k_first + k_count)) runs the kernel's main loop over its k steps only.

A tile cut into pieces is finished by the block holding its last k step (the *finisher*); the
blocks holding its earlier steps (*contributors*: lower block ids) store their float32
accumulators in W (slot = block id: a block contributes at most one piece, the head of the
last tile of its run) and count themselves in on `Flags[u]` (acq_rel atomic after a consumer
barrier). Every block runs its units from the last tile of its run to the first, so a block
contributes first and finishes last: the finisher's wait for `Flags[u]` to reach its number of
contributors is at the end of its run, when theirs began long ago (and on the emulator, which
runs blocks one after another in id order, the contributors have already run). The finisher
adds the partials to its accumulator in block order (deterministic for a given shape and
machine), resets `Flags[u]` to zero for the next call and runs the epilogue; a contributor
skips it. The ring counters continue across units (`tile_base` = k steps this block ran before
the unit), so the producer fills the next unit's stages while the consumers finish this one.

The consumers' main loop runs k = 0 .. k_count - 1 (so wgmma's scale-d `k != 0` zeroes each
unit's accumulator) and the producer loads k tile `k_first + k`; in the data-parallel tiles
k_first = 0 and k_count = n. W holds per block R x (consumer threads) float32 values, R being
the accumulator registers per thread, stored register-major so consecutive threads write
consecutive words: at least G x block_M x block_N elements.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileShapeError
from ..ir.buffer import Buffer
from ..ir.expr import Const, Var, binop, const, const_int, select
from ..ir.loops import While
from ..ir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt
from ..ir.thread import (
    AsyncWait,
    Atomic,
    Barrier,
    IntrinsicCall,
    MbarrierArrive,
    MemLoad,
    MemStore,
    ThreadKernel,
    TmaStore,
)
from ..ir.visit import substitute, walk
from .prefetch import flat_stmts


class StreamK:
    """The stream-K variables of one warp-specialized kernel: the unit's first k step and its
    number of k steps, which the staged loop's two roles read (async_pipeline._ws_loop)."""

    def __init__(self, workspace: Buffer, flags: Buffer, loc):
        self.workspace, self.flags, self.loc = workspace, flags, loc
        self.k_first = Var("k_first")
        self.k_count = Var("k_count")
        self.used = False  # whether a staged loop reads the two variables

    def plain(self, stmt: Stmt, trips) -> Stmt:
        """`stmt` with the unit variables bound to a whole tile (the schedule without stream-K)."""
        if not self.used:
            return stmt
        return substitute(stmt, {self.k_first: const(0), self.k_count: trips})


def stream_k_for(kernel: ThreadKernel, persistent: int | None) -> StreamK | None:
    """A StreamK for `kernel` when it calls T.stream_k and runs persistently on `persistent`
    blocks with a partial last wave; else None."""
    if not kernel.stream_k or persistent is None:
        return None
    tiles = 1
    for g in kernel.grid:
        tiles *= const_int(g)
    if tiles % persistent == 0:
        return None
    workspace, flags, loc = kernel.stream_k
    return StreamK(workspace, flags, loc or kernel.loc)


def applies(sk: StreamK | None, tiles: int, sms: int, trips) -> bool:
    """Whether the stream-K schedule is built: a constant trip count and at least one k step
    per block in the stream-K part."""
    n = const_int(trips)
    return sk is not None and sk.used and n is not None and (tiles % sms) * n >= sms


def _numel(buf: Buffer) -> int | None:
    total = 1
    for s in buf.shape:
        v = const_int(s) if not isinstance(s, int) else s
        if v is None:
            return None
        total *= v
    return total


def accumulators(consumer: Stmt) -> list:
    """The register buffers the staged loop's wgmma instructions accumulate into."""
    out: dict[int, Buffer] = {}
    for n in walk(consumer):
        if isinstance(n, IntrinsicCall) and n.intrinsic.kind == "wgmma":
            for spec, ref in zip(n.intrinsic.operands, n.operands):
                if spec.role == "out" and ref.buffer.scope == "local":
                    out.setdefault(id(ref.buffer), ref.buffer)
    return list(out.values())


def _main_loop(stmts: list) -> tuple[int, int] | None:
    """(index of the staged loop in `stmts`, index after it and its closing wgmma wait / last
    stage release), or None without one."""
    idx = next((i for i, s in enumerate(stmts)
                if isinstance(s, For) and s.annotation("warp_specialized")), None)
    if idx is None:
        return None
    j = idx + 1

    def closing(s) -> bool:
        if isinstance(s, AsyncWait):
            return s.queue == "wgmma"
        if isinstance(s, IfThenElse):
            return s.else_body is None and all(isinstance(x, MbarrierArrive) for x in flat_stmts(s.then_body))
        return isinstance(s, MbarrierArrive)

    while j < len(stmts) and closing(stmts[j]):
        j += 1
    return idx, j


def _restarts(before: list, loop: Stmt, accs: list) -> bool:
    """Whether every unit starts from a zero accumulator and repeating what precedes the main
    loop per unit changes nothing else: no global writes there, accumulator writes only zero
    stores, and the accumulators cleared that way or by the first k step's scale-d 0."""
    ids = {id(b) for b in accs}
    zeroed = False
    for n in (x for s in before for x in walk(s)):
        if isinstance(n, (Atomic, TmaStore)) or (isinstance(n, MemStore) and n.buffer.scope == "global"):
            return False
        if isinstance(n, MemStore) and id(n.buffer) in ids:
            if not (isinstance(n.value, Const) and n.value.value == 0):
                return False
            zeroed = True
    return zeroed or any(isinstance(n, IntrinsicCall) and n.scale_d is not None for n in walk(loop))


def build(kernel: ThreadKernel, sk: StreamK, split: int, base: Var, lets_of, hoist: list,
          producer: Stmt, consumer: Stmt, tiles: int, sms: int, trips, pid: Var):
    """(producer, consumer, extra registers) of the hybrid schedule (module docstring).
    `lets_of(t)` gives the LetStmts binding the original block indices of tile t."""
    n = const_int(trips)
    loc = sk.loc
    r = tiles % sms
    dp = tiles - r
    steps = r * n
    q, rem = steps // sms, steps % sms
    accs = accumulators(consumer)
    regs = sum(b.shape[0] for b in accs)
    need_w, have_w, have_f = sms * regs * split, _numel(sk.workspace), _numel(sk.flags)
    if have_w is not None and have_w < need_w:
        raise TileShapeError(f"T.stream_k workspace {sk.workspace.name} has {have_w} elements; this "
                             f"schedule needs {need_w} ({sms} blocks x {regs * split} accumulator "
                             "values)", loc, hint=f"allocate at least {need_w} float32 elements")
    if have_f is not None and have_f < r:
        raise TileShapeError(f"T.stream_k flags {sk.flags.name} has {have_f} elements; the last wave's "
                             f"{r} tiles need one each", loc, hint="allocate one int32 per output tile")
    stmts = flat_stmts(consumer)
    found = _main_loop(stmts)
    if not accs or found is None:
        return None
    idx, end = found
    if not _restarts(stmts[:idx], stmts[idx], accs):
        return None
    t = Var("tile")
    dp_loop = _dp_loop(sk, base, lets_of, hoist, t, pid, dp, sms, n, loc)

    s0 = binop("add", binop("mul", pid, const(q)), binop("min", pid, const(rem)))
    s1 = binop("add", binop("add", s0, const(q)), select(binop("lt", pid, const(rem)), 1, 0))
    run_lo, run_hi = Var("run_first"), Var("run_end")
    u_lo, u_hi = binop("div", run_lo, const(n)), binop("div", binop("sub", run_hi, const(1)), const(n))
    j, u = Var("unit"), Var("sk_tile")
    lo = binop("max", run_lo, binop("mul", u, const(n)))
    hi = binop("min", run_hi, binop("add", binop("mul", u, const(n)), const(n)))

    def unit_lets() -> list:
        return [LetStmt(u, binop("sub", u_hi, j), loc), LetStmt(t, binop("add", u, const(dp)), loc),
                *lets_of(t),
                LetStmt(sk.k_first, binop("sub", lo, binop("mul", u, const(n))), loc),
                LetStmt(sk.k_count, binop("sub", hi, lo), loc),
                LetStmt(base, binop("add", const(dp // sms * n), binop("sub", run_hi, hi)), loc)]

    def units(body: Stmt) -> Stmt:
        inner = SeqStmt(tuple(unit_lets()) + tuple(hoist) + (body,), loc)
        return SeqStmt((LetStmt(run_lo, s0, loc), LetStmt(run_hi, s1, loc),
                        For(j, const(0), binop("add", binop("sub", u_hi, u_lo), const(1)), 1, "serial",
                            inner, (), loc)), loc)

    seen = Buffer("sk_arrived", (1,), dt.int32, "local")
    fixed = _with_fixup(kernel, sk, stmts, end, accs, regs, split, pid, u, n, q, rem, seen, loc)
    mine = [t, base, u, j, run_lo, run_hi, sk.k_first, sk.k_count, *kernel.block_vars] + \
        [h.var for h in hoist]
    fresh = {v: Var(f"{v.name}_produce", v.dtype) for v in mine}
    prod = SeqStmt((dp_loop(producer), units(producer)), loc)
    cons = SeqStmt((dp_loop(consumer), units(fixed)), loc)
    return substitute(prod, fresh), cons, (seen,)


def _dp_loop(sk: StreamK, base: Var, lets_of, hoist: list, t: Var, pid: Var, dp: int, sms: int,
             n: int, loc):
    """The data-parallel part: tiles pid, pid + G, ... below `dp`, whole."""
    done = binop("mul", binop("div", binop("sub", t, pid), const(sms)), const(n))  # k steps before tile t

    def loop(body: Stmt) -> Stmt:
        lets = [*lets_of(t), LetStmt(base, done, loc),
                LetStmt(sk.k_first, const(0), loc), LetStmt(sk.k_count, const(n), loc)]
        inner = SeqStmt(tuple(lets) + tuple(hoist) + (body,), loc)
        return For(t, pid, const(dp), sms, "serial", inner, (), loc)
    return loop


def _with_fixup(kernel: ThreadKernel, sk: StreamK, stmts: list, end: int, accs: list, regs: int,
                split: int, pid: Var, u: Var, n: int, q: int, rem: int, seen: Buffer, loc) -> Stmt:
    """The consumer body of a unit: main loop, then a contributor's hand-over (store the
    partial, count in) or a finisher's collection (wait for the count, add the partials in
    block order, reset it), then the epilogue unless the unit contributes."""
    tx = kernel.thread_var
    w, flags = sk.workspace, sk.flags
    sync = Barrier("stream-K partials", loc, "named", 1, split)
    whole_end = binop("ge", binop("add", sk.k_first, sk.k_count), const(n))  # holds the tile's last step
    contributes = binop("lt", binop("add", sk.k_first, sk.k_count), const(n))
    finishes = binop("and", whole_end, binop("gt", sk.k_first, const(0)))

    # one 4-byte access per register, register-major (a warp's access covers 128 contiguous
    # bytes): 16-byte vector accesses of the accumulator registers made ptxas serialize every
    # wgmma of the kernel (a wait after each HGMMA; measured 15-22% slower on the H200)
    def slot(block, i: int):  # register i of thread tx in block `block`'s slot
        row = binop("add", binop("mul", block, const(regs)), const(i))
        return binop("add", binop("mul", row, const(split)), tx)

    stores, adds, i = [], [], 0
    c = Var("contributor")
    for acc in accs:
        for e in range(acc.shape[0]):
            stores.append(MemStore(w, slot(pid, i), MemLoad(acc, const(e)), None, loc))
            adds.append(MemStore(acc, const(e), binop("add", MemLoad(acc, const(e)), MemLoad(w, slot(c, i))),
                                 None, loc))
            i += 1
    one = binop("eq", tx, const(0))
    hand_over = SeqStmt((*stores, sync, Atomic("add", flags, u, const(1), one, loc, order="acq_rel")), loc)
    # the block holding tile u's first k step: block_of(u * n) over runs of q + 1 then q steps
    first = binop("mul", u, const(n))
    edge = rem * (q + 1)
    first_block = select(binop("lt", first, const(edge)), binop("div", first, const(q + 1)),
                         binop("add", const(rem), binop("div", binop("sub", first, const(edge)), const(q))))
    need = binop("sub", pid, first_block)
    poll = Atomic("add", flags, u, const(0), None, loc, seen, const(0), "acq_rel")
    wait = IfThenElse(one, SeqStmt((poll, While(binop("ne", MemLoad(seen, const(0)), need), poll, loc),
                                    MemStore(flags, u, const(0), None, loc)), loc), None, loc)
    collect = SeqStmt((wait, sync, For(c, first_block, pid, 1, "serial", SeqStmt(tuple(adds), loc), (), loc)),
                      loc)
    epilogue = SeqStmt(tuple(stmts[end:]), loc)
    return SeqStmt((*stmts[:end],
                    IfThenElse(contributes, hand_over, None, loc),
                    IfThenElse(finishes, collect, None, loc),
                    IfThenElse(whole_end, epilogue, None, loc)), loc)
