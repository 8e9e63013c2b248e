"""Tile-IR nodes of the thread-level escape hatches (TileLang's `T.get_thread_binding`,
`T.alloc_barrier`, `T.barrier_arrive` / `T.barrier_wait`, `T.sync_threads`, `T.ws`, ...).

A kernel holding any of them is *thread-level*: its scalar statements run once per thread
(SIMT, as on a GPU), not once per block as in a tile program. Such a kernel has no tile-level
meaning, so every target executes it through the thread IR (docs/architecture.md, "Thread-level
kernels"): `interp` lowers it with the core's vendor-free description and runs the emulator,
`emu:*` and `cuda` lower it with their own backend; targets that do not lower to threads refuse
it naming the construct (`refusal`).

Nodes (frozen dataclasses, one per construct; statements print as the T.* call that made them):

- `ThreadIndex(dtype, dim)`: the executing thread's index along `dim` (threadIdx.x/y/z);
- `ThreadSync(barrier_id, count)`: `T.sync_threads()` (the block) or a named barrier over
  `count` threads;
- `BarrierInit(bar, counts)`: the mbarriers `bar[0..n)` of `T.alloc_barrier`, each expecting
  `counts[i]` arrivals per phase (initialized by thread 0 before any other statement runs);
- `BarrierArrive(bar, index)`, `BarrierWait(bar, index, parity)`: each executing thread
  arrives once; a wait blocks until the phase of that parity completed;
- `WarpRole(groups, body)`: `with T.ws(*groups):` the body runs in the threads of the listed
  warpgroups (128 threads each) only;
- `TmaCopy(copy, bar, index)`: `T.tma_copy`, a copy completing its bytes on an mbarrier;
- `Roles(arms)`: the concurrent roles of a warp-specialized tile program (interp);
- `CpAsync`, `CpAsyncCommit`, `CpAsyncWait`: `T.ptx_cp_async` (a per-thread asynchronous
  global -> shared copy of 4/8/16 bytes), `T.ptx_commit_group`, `T.ptx_wait_group`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import SourceLoc
from .buffer import Buffer
from .expr import Expr
from .stmt import Stmt
from .visit import walk

WARPGROUP = 128  # threads of one warpgroup (T.ws counts in warpgroups, as TileLang does)
BARRIER_DTYPE = dt.int64  # an mbarrier is one 64-bit word of shared memory


@dataclass(frozen=True)
class ThreadIndex(Expr):
    """The executing thread's index in its block along `dim` (0: threadIdx.x)."""

    dtype: DType = dt.int32
    dim: int = 0

    def __repr__(self) -> str:
        return "T.get_thread_binding()" if self.dim == 0 else f"T.get_thread_binding({self.dim})"


@dataclass(frozen=True)
class ThreadSync(Stmt):
    """`T.sync_threads()`: a barrier over the block, or named barrier `barrier_id` over
    `count` threads (those that execute it)."""

    barrier_id: int | None = None
    count: int | None = None
    loc: SourceLoc | None = None

    def print_lines(self, p) -> list[str]:
        """The T.* call that re-parses to this node."""
        if self.barrier_id is None:
            return ["T.sync_threads()"]
        return [f"T.sync_threads({self.barrier_id}, {self.count})"]


@dataclass(frozen=True)
class BarrierInit(Stmt):
    """The mbarriers of one `T.alloc_barrier`: `bar[i]` expects `counts[i]` arrivals."""

    bar: Buffer
    counts: tuple
    loc: SourceLoc | None = None

    def __post_init__(self):
        if self.bar.scope != "shared" or self.bar.dtype != BARRIER_DTYPE:
            raise TypeError("BarrierInit needs a shared int64 buffer")
        if len(self.counts) != self.bar.shape[0] or any(int(c) < 1 for c in self.counts):
            raise TypeError("BarrierInit needs one positive arrival count per mbarrier")

    def print_lines(self, p) -> list[str]:
        """The T.* call that re-parses to this node."""
        counts = list(self.counts) if len(self.counts) > 1 else self.counts[0]
        return [f"# {p.name(self.bar)} = T.alloc_barrier({counts})"]


@dataclass(frozen=True)
class BarrierArrive(Stmt):
    """Each executing thread arrives once on mbarrier `bar[index]`. `arrivals` > 0 (set by the
    `thread-level` pass when interp runs the kernel at the tile level) is how many threads
    execute it, so the statement counts for all of them."""

    bar: Buffer
    index: Expr
    loc: SourceLoc | None = None
    arrivals: int = 0

    def print_lines(self, p) -> list[str]:
        """The T.* call that re-parses to this node."""
        return [f"T.barrier_arrive({p.name(self.bar)}[{p.expr(self.index)}])"]


@dataclass(frozen=True)
class BarrierWait(Stmt):
    """Each executing thread waits until the phase of parity `parity` of `bar[index]` completed."""

    bar: Buffer
    index: Expr
    parity: Expr
    loc: SourceLoc | None = None

    def print_lines(self, p) -> list[str]:
        """The T.* call that re-parses to this node."""
        return [f"T.barrier_wait({p.name(self.bar)}[{p.expr(self.index)}], {p.expr(self.parity)})"]


@dataclass(frozen=True)
class WarpRole(Stmt):
    """`with T.ws(*groups):` the body runs only in the threads of warpgroups `groups`."""

    groups: tuple
    body: Stmt
    loc: SourceLoc | None = None

    def print_lines(self, p) -> list[str]:
        """The `with T.ws(...)` block (the body printed one level deeper)."""
        start = len(p.lines)
        p.stmt(self.body, 0)
        body = ["    " + line for line in p.lines[start:]]
        del p.lines[start:]
        return [f"with T.ws({', '.join(str(g) for g in self.groups)}):"] + body


@dataclass(frozen=True)
class TmaCopy(Stmt):
    """`T.tma_copy(src, dst, barrier=bar[i])`: the global -> shared `copy` (a `Copy` node) issued
    by one thread of the executing ones, its bytes expected and completed on mbarrier
    `bar[index]` (no arrival: the threads arrive with `T.barrier_arrive`); the data may be read
    after a wait that observes the phase."""

    copy: Stmt
    bar: Buffer
    index: Expr
    loc: SourceLoc | None = None

    def print_lines(self, p) -> list[str]:
        """The T.* call that re-parses to this node."""
        src, dst = p.region(self.copy.src), p.region(self.copy.dst)
        return [f"T.tma_copy({src}, {dst}, barrier={p.name(self.bar)}[{p.expr(self.index)}])"]


@dataclass(frozen=True)
class Roles(Stmt):
    """The roles of a warp-specialized tile program, running concurrently (made by the
    `thread-level` pass for interp): `arms` are `(threads, groups, body)`: the warpgroups
    `groups` (`threads` threads) run `body`, their projection of the kernel body."""

    arms: tuple
    loc: SourceLoc | None = None

    def print_lines(self, p) -> list[str]:
        """Each arm as a `with T.ws(...)` block (comment: they run concurrently)."""
        out = ["# concurrent roles:"]
        for _, groups, body in self.arms:
            out += WarpRole(tuple(groups), body, self.loc).print_lines(p)
        return out


@dataclass(frozen=True)
class CpAsync(Stmt):
    """`T.ptx_cp_async(T.access_ptr(dst[..], "w"), T.access_ptr(src[..], "r"), n)`: this thread
    issues an asynchronous copy of `lanes` consecutive elements from global `src` at
    `src_indices` to shared `dst` at `dst_indices` (4, 8 or 16 bytes), into its open cp.async
    group; with `pred` false it writes zeros instead of reading (PTX's src-size 0)."""

    dst: Buffer
    dst_indices: tuple
    src: Buffer
    src_indices: tuple
    lanes: int
    pred: Expr | None = None
    loc: SourceLoc | None = None

    def print_lines(self, p) -> list[str]:
        """The T.* call that re-parses to this node."""
        d = ", ".join(p.expr(i) for i in self.dst_indices)
        s = ", ".join(p.expr(i) for i in self.src_indices)
        pred = "" if self.pred is None else f", predicate={p.expr(self.pred)}"
        return [f'T.ptx_cp_async(T.access_ptr({p.name(self.dst)}[{d}], "w"), '
                f'T.access_ptr({p.name(self.src)}[{s}], "r"), {self.lanes}{pred})']


@dataclass(frozen=True)
class CpAsyncCommit(Stmt):
    """`T.ptx_commit_group()`: close this thread's open cp.async group."""

    loc: SourceLoc | None = None

    def print_lines(self, p) -> list[str]:
        """The T.* call that re-parses to this node."""
        return ["T.ptx_commit_group()"]


@dataclass(frozen=True)
class CpAsyncWait(Stmt):
    """`T.ptx_wait_group(pending)`: wait until at most `pending` of this thread's committed
    cp.async groups are in flight; the landed data is visible to this thread only."""

    pending: int
    loc: SourceLoc | None = None

    def print_lines(self, p) -> list[str]:
        """The T.* call that re-parses to this node."""
        return [f"T.ptx_wait_group({self.pending})"]


THREAD_LEVEL_STMTS = (ThreadSync, BarrierInit, BarrierArrive, BarrierWait, WarpRole, TmaCopy, Roles,
                      CpAsync, CpAsyncCommit, CpAsyncWait)

CONSTRUCT_NAMES = {
    ThreadIndex: "T.get_thread_binding", ThreadSync: "T.sync_threads", BarrierInit: "T.alloc_barrier",
    BarrierArrive: "T.barrier_arrive", BarrierWait: "T.barrier_wait", WarpRole: "T.ws",
    TmaCopy: "T.tma_copy", Roles: "T.ws", CpAsync: "T.ptx_cp_async",
    CpAsyncCommit: "T.ptx_commit_group", CpAsyncWait: "T.ptx_wait_group",
}


def first_construct(node) -> tuple[str, SourceLoc | None] | None:
    """The first thread-level construct in `node` (its T.* name and the statement's line), or
    None for a tile program."""
    loc = None
    for n in walk(node):
        if isinstance(n, Stmt) and getattr(n, "loc", None) is not None:
            loc = n.loc
        if isinstance(n, (ThreadIndex,) + THREAD_LEVEL_STMTS):
            return CONSTRUCT_NAMES[type(n)], getattr(n, "loc", None) or loc
    return None


def is_thread_level(node) -> bool:
    """Whether `node` (a launch, a function body) uses a thread-level construct."""
    return first_construct(node) is not None
