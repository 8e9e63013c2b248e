"""Thread-level IR: the per-thread SIMT program of one block, after lowering.

One `ThreadKernel` replaces the tile program's `KernelLaunch`. Its body runs once per thread of
every block, with `thread_var` (threadIdx.x, flattened) and `block_vars` (blockIdx.x/y/z) bound.
Memory is explicit and flat: every access names a buffer and a *flat element offset*:

- global tensors are the PrimFunc's parameters (row-major; symbolic dims are kernel arguments);
- shared buffers (scope "shared", 1-D) are listed in `ThreadKernel.shared`, one copy per block;
- register arrays (scope "local", 1-D) are listed in `ThreadKernel.registers`, one copy per
  thread. Lowering indexes them with compile-time constants wherever it can, so a C compiler
  keeps them in registers.

The tile-level `SeqStmt`, `LetStmt`, `For` (kinds serial and unroll only), and `IfThenElse` are
reused with per-thread meaning; scalar expressions are `tilecore.ir.expr` nodes, except that
memory is read with `MemLoad` (never `expr.Load`). Target instructions are data
(`IntrinsicCall` holding a `tilecore.ir.intrinsic.Intrinsic`), so an emulator executes them
without knowing any vendor.

Control flow that guards a `Barrier`, `Shuffle` or `IntrinsicCall` is uniform (the same for every
thread of the block, resp. of the warp): lowering guarantees it, and the emulator checks it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import SourceLoc
from .buffer import Buffer
from .expr import Expr, Var
from .stmt import Stmt

SHUFFLE_MODES = ("xor", "idx")
ATOMIC_OPS = ("add", "max", "min")
# Memory orders of an Atomic: "relaxed" (no ordering of other accesses), "acq_rel" (a
# device-scope fence on each side of the update: CUDA/HIP `__threadfence()`), what a block
# needs to publish data to, or take it from, other blocks through a counter.
ATOMIC_ORDERS = ("relaxed", "acq_rel")
BARRIER_SCOPES = ("block", "named", "warpgroup")
# The asynchronous memory model (docs/architecture.md): completion mechanisms and per-thread
# queues built so far; "mbarrier" (TMA) and the "wgmma" queue come with the Hopper path.
ASYNC_COMPLETIONS = ("group",)
# "bulk": the issuing thread's bulk-async groups of TMA stores (cp.async.bulk.commit_group)
ASYNC_QUEUES = ("cp.async", "wgmma", "bulk")
ASYNC_COPY_BYTES = (4, 8, 16)


def _check_expr(what: str, e) -> None:
    if not isinstance(e, Expr):
        raise TypeError(f"{what} must be an Expr, got {e!r}")


def _check_pred(p) -> None:
    if p is not None and (not isinstance(p, Expr) or not p.dtype.is_bool):
        raise TypeError(f"a predicate must be a bool Expr or None, got {p!r}")


# ----------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class MemLoad(Expr):
    """`buffer[offset]` at a flat element offset; when `pred` is false nothing is read and it is 0.

    `indices` (optional) are the user's multi-dimensional indices of an explicit element access,
    which emulators check against the buffer's shape; code generators ignore them."""

    buffer: Buffer
    offset: Expr
    pred: Expr | None = None
    dtype: DType = None  # type: ignore[assignment]
    indices: tuple = ()

    def __post_init__(self):
        if not isinstance(self.buffer, Buffer):
            raise TypeError("MemLoad.buffer must be a Buffer")
        _check_expr("MemLoad.offset", self.offset)
        _check_pred(self.pred)
        if self.dtype is None:
            object.__setattr__(self, "dtype", self.buffer.dtype)


@dataclass(frozen=True)
class Shuffle(Expr):
    """Warp shuffle: `value` as computed by lane `lane ^ arg` (xor) or by lane `arg` (idx).

    Lanes are counted within groups of `width` (a power of two <= the warp size); every lane of
    the warp executes it (uniform control flow)."""

    value: Expr
    mode: str
    arg: Expr
    width: int
    dtype: DType = None  # type: ignore[assignment]

    def __post_init__(self):
        if self.mode not in SHUFFLE_MODES:
            raise TypeError(f"unknown shuffle mode {self.mode}")
        _check_expr("Shuffle.value", self.value)
        _check_expr("Shuffle.arg", self.arg)
        if self.width < 1 or self.width & (self.width - 1):
            raise TypeError("Shuffle.width must be a power of two")
        if self.dtype is None:
            object.__setattr__(self, "dtype", self.value.dtype)


@dataclass(frozen=True)
class LaneTable(Expr):
    """`values[index]`: a constant integer table read per thread (lane maps no formula fits)."""

    values: tuple
    index: Expr
    dtype: DType = dt.int32

    def __post_init__(self):
        if not self.values or not all(isinstance(v, int) for v in self.values):
            raise TypeError("LaneTable.values must be a non-empty tuple of ints")
        _check_expr("LaneTable.index", self.index)


# ----------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class ThreadKernel(Stmt):
    """The lowered kernel: `body` runs for every thread of every block of `grid`.

    `num_threads` threads per block, flattened into `thread_var`; warps are consecutive groups of
    `warp_size` threads. `shared` lists the block's shared buffers, `registers` each thread's
    register arrays (all 1-D); `shared_plan` places shared buffers that may share bytes."""

    grid: tuple
    block_vars: tuple
    thread_var: Var
    num_threads: int
    warp_size: int
    shared: tuple
    registers: tuple
    body: Stmt
    loc: SourceLoc | None = None
    # tilecore.lower.smem_plan.SharedPlan: byte offsets where buffers with disjoint live ranges
    # share storage; None lays the buffers out one after another
    shared_plan: object = None
    # T.stream_k's (workspace, flags, source location), read by the async-pipeline pass's persistent
    # schedule (tilecore.lower.stream_k); () without the call
    stream_k: tuple = ()

    def __post_init__(self):
        if len(self.grid) != len(self.block_vars):
            raise TypeError("grid and block variables differ in number")
        for b in self.shared:
            if b.scope != "shared" or len(b.shape) != 1 or not isinstance(b.shape[0], int):
                raise TypeError(f"shared buffer {b.name} must be 1-D shared with a static size")
        for b in self.registers:
            if b.scope != "local" or len(b.shape) != 1 or not isinstance(b.shape[0], int):
                raise TypeError(f"register array {b.name} must be 1-D local with a static size")
        if self.num_threads < 1 or self.warp_size < 1:
            raise TypeError("num_threads and warp_size must be positive")


@dataclass(frozen=True)
class MemStore(Stmt):
    """`buffer[offset] = value` (rounded to the buffer's dtype); skipped when `pred` is false.

    `indices`: as for MemLoad, the user's indices for emulators' bounds checks (optional)."""

    buffer: Buffer
    offset: Expr
    value: Expr
    pred: Expr | None = None
    loc: SourceLoc | None = None
    indices: tuple = ()

    def __post_init__(self):
        _check_expr("MemStore.offset", self.offset)
        _check_expr("MemStore.value", self.value)
        _check_pred(self.pred)


# L2 eviction priorities a global access may carry ("" = the default, evict_normal)
CACHE_HINTS = ("", "evict_first", "evict_last")


@dataclass(frozen=True)
class VecMove(Stmt):
    """Copy `lanes` consecutive elements `src[src_offset:+lanes]` to `dst[dst_offset:+lanes]` as
    one access of `lanes * itemsize` bytes (<= 16, offsets aligned to it).

    When `pred` is false nothing is read; the destination gets zeros if `zero_fill`, else it is
    left unchanged. Source and destination have the same dtype. `cache_hint` (CACHE_HINTS) is
    the cache priority of the global side's access, from the T.copy's `eviction_policy`: a
    performance hint only (a backend may ignore it), the values moved are the same."""

    dst: Buffer
    dst_offset: Expr
    src: Buffer
    src_offset: Expr
    lanes: int
    pred: Expr | None = None
    zero_fill: bool = False
    loc: SourceLoc | None = None
    cache_hint: str = ""

    def __post_init__(self):
        if self.cache_hint not in CACHE_HINTS:
            raise TypeError(f"VecMove.cache_hint {self.cache_hint!r} is not one of {CACHE_HINTS}")
        _check_expr("VecMove.dst_offset", self.dst_offset)
        _check_expr("VecMove.src_offset", self.src_offset)
        _check_pred(self.pred)
        if self.src.dtype != self.dst.dtype:
            raise TypeError("VecMove source and destination dtypes differ")
        if self.lanes < 1 or self.lanes & (self.lanes - 1) or self.lanes * self.src.dtype.itemsize > 16:
            raise TypeError("VecMove moves a power-of-two number of elements, at most 16 bytes")


@dataclass(frozen=True)
class Barrier(Stmt):
    """A barrier with an identity and a scope; `reason` says which access needs it.

    `scope` "block": every thread of the block (`__syncthreads()`, id 0). "named": hardware
    barrier `barrier_id` (1..15) over exactly `count` threads, a multiple of the warp size, namely
    those that execute it (`bar.sync id, count`). "warpgroup": every group of four consecutive
    warps synchronizes on barrier `barrier_id + warpgroup index`. A barrier orders the accesses
    of the threads taking part; it does not complete asynchronous operations."""

    reason: str = ""
    loc: SourceLoc | None = None
    scope: str = "block"
    barrier_id: int = 0
    count: int = 0

    def __post_init__(self):
        if self.scope not in BARRIER_SCOPES:
            raise TypeError(f"unknown barrier scope {self.scope!r}")
        if self.scope == "block" and (self.barrier_id or self.count):
            raise TypeError("a block barrier is barrier 0 over the whole block (no id or count)")
        if self.scope == "named" and (not 1 <= self.barrier_id <= 15 or self.count < 1):
            raise TypeError("a named barrier needs an id in 1..15 and a positive thread count")
        if self.scope == "warpgroup" and (self.barrier_id < 1 or self.count):
            raise TypeError("a warpgroup barrier needs a base id >= 1 and no count")


@dataclass(frozen=True)
class AsyncCopy(Stmt):
    """Asynchronous copy of `lanes` elements `src[src_offset:+lanes]` (global) to
    `dst[dst_offset:+lanes]` (shared), `lanes * itemsize` in ASYNC_COPY_BYTES, offsets aligned.

    Issued by this thread; it lands (writes the destination) at the wait that retires it, which
    `completion` names: "group" (the thread's open `cp.async` group, retired by AsyncCommit +
    AsyncWait). When `pred` is false nothing is read and the destination gets zeros if
    `zero_fill` (PTX's src-size 0), else it is not written. See docs/architecture.md, "The
    asynchronous memory model"."""

    dst: Buffer
    dst_offset: Expr
    src: Buffer
    src_offset: Expr
    lanes: int
    pred: Expr | None = None
    zero_fill: bool = True
    completion: str = "group"
    loc: SourceLoc | None = None

    def __post_init__(self):
        _check_expr("AsyncCopy.dst_offset", self.dst_offset)
        _check_expr("AsyncCopy.src_offset", self.src_offset)
        _check_pred(self.pred)
        if self.completion not in ASYNC_COMPLETIONS:
            raise TypeError(f"unknown completion mechanism {self.completion!r}")
        if self.src.scope != "global" or self.dst.scope != "shared":
            raise TypeError("AsyncCopy copies global memory into shared memory")
        if self.src.dtype != self.dst.dtype:
            raise TypeError("AsyncCopy source and destination dtypes differ")
        if self.lanes * self.src.dtype.itemsize not in ASYNC_COPY_BYTES:
            raise TypeError(f"AsyncCopy moves {ASYNC_COPY_BYTES} bytes, not "
                            f"{self.lanes * self.src.dtype.itemsize}")

    @property
    def queue(self) -> str:
        """The per-thread queue whose groups track this copy."""
        return "cp.async"


@dataclass(frozen=True)
class AsyncCommit(Stmt):
    """Close the issuing thread's open group of `queue` operations (`cp.async.commit_group`)."""

    queue: str = "cp.async"
    loc: SourceLoc | None = None

    def __post_init__(self):
        if self.queue not in ASYNC_QUEUES:
            raise TypeError(f"unknown asynchronous queue {self.queue!r}")


@dataclass(frozen=True)
class AsyncWait(Stmt):
    """Wait until all but the `pending` most recent committed groups of this thread's `queue`
    have landed (`cp.async.wait_group pending`). Makes them visible to this thread only."""

    queue: str = "cp.async"
    pending: int = 0
    loc: SourceLoc | None = None
    # the wait of an asynchronous `T.gemm(wg_wait=-1)`: tilecore.lower.wgmma_async may move it
    # later, up to the first statement touching what its group writes or reads
    deferred: bool = False

    def __post_init__(self):
        if self.queue not in ASYNC_QUEUES:
            raise TypeError(f"unknown asynchronous queue {self.queue!r}")
        if self.pending < 0:
            raise TypeError("AsyncWait.pending must be >= 0")


# --- wgmma (Hopper asynchronous tensor cores): fences of the wgmma queue --------------------
FENCE_KINDS = ("wgmma", "proxy_async", "mbarrier_init", "order")


@dataclass(frozen=True)
class AsyncFence(Stmt):
    """A fence of the asynchronous memory model, executed by every thread of a warpgroup.

    `kind` "wgmma" (`wgmma.fence`): the thread's earlier accesses to registers an asynchronous
    tensor-core op reads (its accumulator, an A fragment) are ordered before the wgmma ops
    issued after it; required before the first wgmma of a group whose registers were written
    by ordinary instructions. "proxy_async" (`fence.proxy.async.shared::cta`): the thread's
    earlier ordinary shared-memory writes become visible to the asynchronous proxy (the
    tensor cores' descriptor reads, TMA) after the next barrier. "mbarrier_init"
    (`fence.mbarrier_init.release.cluster`): the thread's mbarrier initializations become
    visible (before the barrier that lets other threads use them; executed by one thread).
    "order": orders nothing the program needs; it pins the wgmma wait after it in place
    (ptxas otherwise hoists a `wait_group` above the register-only work that precedes it, up
    to the previous partial wait: tilecore.lower.wgmma_async); CUDA renders it as
    `fence.acq_rel.cta`."""

    kind: str = "wgmma"
    loc: SourceLoc | None = None

    def __post_init__(self):
        if self.kind not in FENCE_KINDS:
            raise TypeError(f"unknown asynchronous fence {self.kind!r}")
# --- end wgmma -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Atomic(Stmt):
    """Atomic read-modify-write `buffer[offset] op= value`; skipped when `pred` is false. With
    `prev`, the executing thread's register `prev[prev_offset]` receives the element's value
    before its update (`T.atomic_add(..., return_prev=True)`). `order` is one of ATOMIC_ORDERS."""

    op: str
    buffer: Buffer
    offset: Expr
    value: Expr
    pred: Expr | None = None
    loc: SourceLoc | None = None
    prev: Buffer | None = None
    prev_offset: Expr | None = None
    order: str = "relaxed"

    def __post_init__(self):
        if self.op not in ATOMIC_OPS:
            raise TypeError(f"unknown atomic op {self.op}")
        if self.order not in ATOMIC_ORDERS:
            raise TypeError(f"unknown atomic memory order {self.order!r}")
        _check_expr("Atomic.offset", self.offset)
        _check_expr("Atomic.value", self.value)
        _check_pred(self.pred)


@dataclass(frozen=True)
class OperandRef:
    """Where an intrinsic operand lives: register elements `buffer[offset : offset + elems]`, or for
    a memory operand the flat element offset this lane addresses in `buffer`."""

    buffer: Buffer
    offset: Expr

    def __post_init__(self):
        _check_expr("OperandRef.offset", self.offset)


@dataclass(frozen=True)
class IntrinsicCall(Stmt):
    """A warp-wide target instruction; `operands` match `intrinsic.operands` one to one.

    Every lane of the warp executes it (uniform control flow); its meaning is the intrinsic's
    declared lane maps and operation (see tilecore.ir.intrinsic).

    `scale_d` (wgmma only; PTX's scale-d predicate): None or a nonzero value accumulates,
    D = A @ B + D; zero computes D = A @ B without reading D's registers, so an accumulator
    cleared right before its k loop needs no zeroing stores (tilecore.lower.wgmma). A
    per-thread expression, uniform over the warpgroup (a loop counter test, say)."""

    intrinsic: object  # tilecore.ir.intrinsic.Intrinsic (untyped here: it imports this module)
    operands: tuple
    loc: SourceLoc | None = None
    scale_d: Expr | None = None

    def __post_init__(self):
        if self.scale_d is not None:
            if self.intrinsic.kind != "wgmma":
                raise TypeError(f"scale_d is a wgmma operand; {self.intrinsic.name} has none")
            _check_expr("IntrinsicCall.scale_d", self.scale_d)
        ops = self.intrinsic.operands
        if len(ops) != len(self.operands):
            raise TypeError(f"{self.intrinsic.name} takes {len(ops)} operands, got {len(self.operands)}")
        for spec, ref in zip(ops, self.operands):
            if not isinstance(ref, OperandRef):
                raise TypeError("IntrinsicCall operands must be OperandRefs")
            want = {"reg": "local", "desc": "shared"}.get(spec.space, spec.space)
            if ref.buffer.scope != want:
                raise TypeError(f"operand {spec.name} of {self.intrinsic.name} must be in {want} memory, "
                                f"got {ref.buffer.name} ({ref.buffer.scope})")
            if ref.buffer.dtype != spec.dtype:
                raise TypeError(f"operand {spec.name} of {self.intrinsic.name} must be {spec.dtype}, "
                                f"got {ref.buffer.name} ({ref.buffer.dtype})")


# ----------------------------------------------------------------------------- Hopper: TMA, mbarrier
# docs/architecture.md, "Hopper: TMA, mbarrier, warp specialization". An mbarrier is one 8-byte
# element of a shared buffer of MBARRIER_DTYPE; its state (arrival count, pending arrivals,
# transaction bytes, phase) lives in hardware, so nothing but these nodes may touch that buffer.

MBARRIER_DTYPE = dt.int64
TMA_BOX_MAX = 256  # elements per box dimension (cuTensorMapEncodeTiled's limit)


def _check_mbarrier(what: str, bar, offset) -> None:
    if not isinstance(bar, Buffer) or bar.scope != "shared" or bar.dtype != MBARRIER_DTYPE:
        raise TypeError(f"{what} needs an mbarrier: a shared {MBARRIER_DTYPE} buffer element")
    _check_expr(f"{what}.offset", offset)


def tma_swizzle_bytes(layout, itemsize: int) -> int | None:
    """The TMA swizzle span (0 = none, 32, 64, 128 bytes) whose placement of a box equals
    `layout`, or None when no TMA swizzle mode writes that layout.

    TMA swizzles the 16-byte chunk bits [4, 4+b) of the shared byte address with bits [7, 7+b);
    in elements that is `Swizzled(bits=b, base=log2(16/itemsize), shift=3)` on a dense row-major
    box whose row is exactly the 2**(4+b)-byte span. A row-major layout is swizzle mode none."""
    from .smem_layout import RowMajor, Swizzled

    if type(layout) is RowMajor:
        return 0 if (layout.cols * itemsize) % 16 == 0 else None
    if type(layout) is Swizzled and 16 % itemsize == 0:
        span = 1 << (4 + layout.bits)
        if (layout.bits <= 3 and layout.shift == 3 and (1 << layout.base) * itemsize == 16
                and layout.cols * itemsize == span):
            return span
    return None


@dataclass(frozen=True)
class MbarrierInit(Stmt):
    """`mbarrier.init`: the mbarrier `bar[offset]` expects `count` arrivals per phase, phase 0
    in progress, no transaction bytes. Executed by one thread; a block barrier (after an
    `AsyncFence("mbarrier_init")`) must order it before any other thread uses the mbarrier."""

    bar: Buffer
    offset: Expr
    count: int
    loc: SourceLoc | None = None

    def __post_init__(self):
        _check_mbarrier("MbarrierInit", self.bar, self.offset)
        if self.count < 1:
            raise TypeError("an mbarrier expects at least one arrival per phase")


@dataclass(frozen=True)
class MbarrierArrive(Stmt):
    """Each executing thread arrives once on `bar[offset]` in its current phase
    (`mbarrier.arrive`); with `expect_tx` > 0 it first adds that many transaction bytes the phase
    must also see completed (`mbarrier.arrive.expect_tx`). The phase completes when every
    expected arrival has happened and the transaction count is back at zero."""

    bar: Buffer
    offset: Expr
    expect_tx: int = 0
    loc: SourceLoc | None = None

    def __post_init__(self):
        _check_mbarrier("MbarrierArrive", self.bar, self.offset)
        if self.expect_tx < 0:
            raise TypeError("MbarrierArrive.expect_tx counts bytes (>= 0)")


@dataclass(frozen=True)
class MbarrierWait(Stmt):
    """Block until the phase of parity `phase` (0 or 1) of `bar[offset]` has completed
    (`mbarrier.try_wait.parity` in a loop). The TMA copies that completed on that phase land
    now, for this thread; the accesses every arriving thread made before its arrive are ordered
    before this thread's later ones. A phase that can never complete hangs a GPU (the emulator
    reports a deadlock). `suspend_ns` > 0 is the try-wait's suspend-time hint: how long the
    hardware may park the thread before the wait reports "not yet" (0: its own default limit);
    the meaning is the same, only how often a waiting warp re-polls changes."""

    bar: Buffer
    offset: Expr
    phase: Expr
    loc: SourceLoc | None = None
    suspend_ns: int = 0

    def __post_init__(self):
        _check_mbarrier("MbarrierWait", self.bar, self.offset)
        _check_expr("MbarrierWait.phase", self.phase)


def _check_box(what: str, smem: Buffer, tensor: Buffer, coords: tuple, box: tuple, layout) -> None:
    if tensor.scope != "global" or smem.scope != "shared":
        raise TypeError(f"{what} moves a box between a global tensor and shared memory")
    if tensor.dtype != smem.dtype:
        raise TypeError(f"{what} source and destination dtypes differ")
    if len(coords) != len(tensor.shape) or len(box) != len(tensor.shape):
        raise TypeError(f"{what} needs one coordinate and one box extent per tensor dimension")
    for c in coords:
        _check_expr(f"{what}.coords", c)
    if not all(isinstance(n, int) and 1 <= n <= TMA_BOX_MAX for n in box):
        raise TypeError(f"{what} box extents are constants in 1..{TMA_BOX_MAX}, got {box}")
    rows = 1
    for n in box[:-1]:
        rows *= n
    if (layout.rows, layout.cols) != (rows, box[-1]):
        raise TypeError(f"{what}: the shared layout {layout.describe()} is not the {rows}x{box[-1]} box")
    if tma_swizzle_bytes(layout, tensor.dtype.itemsize) is None:
        raise TypeError(f"{what}: no TMA swizzle mode writes the layout {layout.describe()}")


@dataclass(frozen=True)
class TmaLoad(Stmt):
    """Bulk tensor copy (TMA, `cp.async.bulk.tensor`) of the box `box` (extents per tensor
    dimension, outermost first) at element coordinates `coords` of global `tensor` into shared
    `dst` from `dst_offset`, placed by `layout` (rows = the product of the leading box extents,
    cols = the last). Elements outside the tensor arrive as zeros. Issued by each executing
    thread (lowering lets one elected thread execute it); its `nbytes` complete as transaction
    bytes on the mbarrier `bar[bar_offset]`, and it lands at the wait that observes that phase.
    The tensor's rows must be 16-byte multiples (the host's tensor map checks it)."""

    dst: Buffer
    dst_offset: Expr
    tensor: Buffer
    coords: tuple
    box: tuple
    layout: object  # tilecore.ir.smem_layout.SharedLayout
    bar: Buffer
    bar_offset: Expr
    loc: SourceLoc | None = None
    # L2 eviction priority of the read ("", "evict_first", "evict_last"; see CACHE_HINTS): a
    # performance hint only, the copied values are the same
    cache_hint: str = ""

    def __post_init__(self):
        _check_expr("TmaLoad.dst_offset", self.dst_offset)
        if self.cache_hint not in CACHE_HINTS:
            raise TypeError(f"TmaLoad.cache_hint {self.cache_hint!r} is not one of {CACHE_HINTS}")
        _check_box("TmaLoad", self.dst, self.tensor, self.coords, self.box, self.layout)
        _check_mbarrier("TmaLoad", self.bar, self.bar_offset)

    @property
    def nbytes(self) -> int:
        """The transaction bytes the copy completes (the whole box, zero-filled part included)."""
        return self.layout.rows * self.layout.cols * self.tensor.dtype.itemsize

    @property
    def swizzle(self) -> int:
        """The TMA swizzle span in bytes (0: none)."""
        return tma_swizzle_bytes(self.layout, self.tensor.dtype.itemsize)


@dataclass(frozen=True)
class TmaStore(Stmt):
    """Bulk tensor store (TMA) of the box `box` read from shared `src` at `src_offset` (placed by
    `layout`) to global `tensor` at `coords`; elements outside the tensor are not written.
    Joins the issuing thread's open "bulk" group: `AsyncCommit("bulk")` closes it and
    `AsyncWait("bulk", n)` waits until the older groups have finished reading shared memory
    (the source may be reused after it). The writes of every thread to `src` must be ordered
    before the issue by a barrier, after an `AsyncFence("proxy_async")` in the writing threads.
    `reduce="add"`: the box is added into the tensor instead (`cp.reduce.async.bulk.tensor`,
    each element atomically; tilecore.lower.tma_reduce), same groups and ordering rules."""

    src: Buffer
    src_offset: Expr
    tensor: Buffer
    coords: tuple
    box: tuple
    layout: object
    loc: SourceLoc | None = None
    reduce: str = ""  # "" stores the box, "add" adds it

    def __post_init__(self):
        _check_expr("TmaStore.src_offset", self.src_offset)
        _check_box("TmaStore", self.src, self.tensor, self.coords, self.box, self.layout)
        if self.reduce not in ("", "add"):
            raise TypeError(f"TmaStore.reduce is '' or 'add', got {self.reduce!r}")

    @property
    def swizzle(self) -> int:
        """The TMA swizzle span in bytes (0: none)."""
        return tma_swizzle_bytes(self.layout, self.tensor.dtype.itemsize)

    @property
    def queue(self) -> str:
        """The per-thread queue whose groups track this store."""
        return "bulk"


@dataclass(frozen=True)
class WarpSpecialized(Stmt):
    """Warp specialization: threads `split` and up (whole warpgroups) run `producer`, the
    others run `consumer`, concurrently; the two talk only through mbarriers. `consumer` may
    use named barrier 1 over its `split` threads (never block barriers: the producer threads
    do not take part). With `producer_regs` / `consumer_regs` > 0 each side first sets its
    per-thread register budget (`setmaxnreg.dec` / `.inc`, sm_90a). `groups` > 1: the consumer
    threads are that many equal groups of whole warpgroups that run concurrently and
    independently of each other (ping-pong consumers, tilecore.lower.pingpong: each waits on
    its own mbarrier phases; the emulator runs each group as its own task)."""

    split: int
    producer: Stmt
    consumer: Stmt
    producer_regs: int = 0
    consumer_regs: int = 0
    loc: SourceLoc | None = None
    groups: int = 1

    def __post_init__(self):
        if self.split < 1 or self.split % 128:
            raise TypeError("WarpSpecialized.split must be a positive multiple of a warpgroup (128)")
        if self.groups < 1 or self.split % (128 * self.groups):
            raise TypeError("WarpSpecialized.groups must split the consumers into whole warpgroups")
        for r in (self.producer_regs, self.consumer_regs):
            if r and (not 24 <= r <= 256 or r % 8):
                raise TypeError("setmaxnreg counts are multiples of 8 in 24..256")


@dataclass(frozen=True)
class WarpgroupTurn(Stmt):
    """FlashAttention-3's warpgroup scheduler barrier: the `groups` consumer warpgroups of a
    warp-specialized kernel take turns issuing their tensor-core work, so one warpgroup's
    softmax runs while the tensor cores do another's products (tilecore.lower.wg_turns).

    kind "wait": warpgroup w waits on hardware barrier `base_id + w` until the previous
    warpgroup passed it the turn (`bar.sync id, 256`: its 128 threads and the passer's 128);
    "pass": warpgroup w hands the turn to warpgroup (w + 1) % groups (`bar.arrive`, no wait).
    `only` >= 0: only that warpgroup executes it (the first turn, handed to warpgroup 0 by the
    last, and warpgroup 0's closing wait that takes the last warpgroup's final pass). Orders
    no memory (a scheduling hint, like FA3's): the emulator checks only that every barrier
    gets as many passes as waits, since a mismatch hangs a GPU."""

    kind: str
    base_id: int
    groups: int = 2
    only: int = -1
    loc: SourceLoc | None = None

    def __post_init__(self):
        if self.kind not in ("wait", "pass"):
            raise TypeError(f"unknown warpgroup turn kind {self.kind!r}")
        if self.groups < 2 or not 1 <= self.base_id <= 16 - self.groups or self.only >= self.groups:
            raise TypeError("a warpgroup turn needs 2+ groups, ids base_id.. in 1..15, only < groups")


CONSUMER_BARRIER_ID = 1  # the named barrier of a WarpSpecialized consumer


HOPPER_STMTS = (MbarrierInit, MbarrierArrive, MbarrierWait, TmaLoad, TmaStore, AsyncFence, WarpSpecialized,
                WarpgroupTurn)

THREAD_STMTS = (ThreadKernel, MemStore, VecMove, Barrier, AsyncCopy, AsyncCommit, AsyncWait, Atomic,
                IntrinsicCall) + HOPPER_STMTS
THREAD_EXPRS = (MemLoad, Shuffle, LaneTable)


def find_kernel(body: Stmt) -> ThreadKernel | None:
    """The ThreadKernel inside a lowered function body, or None for a tile-level one."""
    from .visit import walk

    for n in walk(body):
        if isinstance(n, ThreadKernel):
            return n
    return None


def thread_printer(module) -> str:
    """Printer hook for lowered modules (`Module.attr("printer")`)."""
    from .thread_printer import print_thread_func

    return print_thread_func(module.func)
