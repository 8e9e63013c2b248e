"""The thread-level escape hatches of TileLang: thread indices, explicit barriers, mbarriers,
warp-specialized regions and register budgets (nodes in `tilecore.ir.thread_level`).

Using any of them makes the kernel *thread-level*: its scalar statements run once per thread.
`T.sync_threads()` is the exception that keeps tile programs tile programs: in a kernel that
has not used a thread-level construct before it, it is TileLang's no-op hint (the compiler
places the barriers tile operations need); after one, it is a real barrier.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import TileShapeError, TileSyntaxError, TileTypeError
from ..ir.buffer import Buffer
from ..ir.expr import Expr, as_expr, binop, const_int
from ..ir.reg_budget import SetMaxNReg
from ..ir.thread_level import (
    BARRIER_DTYPE,
    WARPGROUP,
    BarrierArrive,
    BarrierInit,
    BarrierWait,
    ThreadIndex,
    ThreadSync,
    TmaCopy,
    WarpRole,
)
from .builder import builtin, current
from .refs import Ref

THREAD_LEVEL = "thread_level"  # KernelLaunch annotation: the kernel uses thread-level constructs
_DIMS = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}


def _frame(what: str):
    """The kernel being parsed, marked thread-level (`what` names the construct for errors)."""
    b = current()
    if b.kernel is None:
        raise TileSyntaxError(f"{what} must be inside `with T.Kernel(...)`", b.loc,
                              hint=f"move {what} into the kernel body")
    if b.parallel_depth:
        raise TileSyntaxError(f"{what} cannot be used inside T.Parallel", b.loc,
                              hint="a T.Parallel iteration is not a thread; use the thread index "
                                   "in block-level code")
    if (THREAD_LEVEL, True) not in b.kernel.annotations:
        b.kernel.annotations.append((THREAD_LEVEL, True))
    return b


def _dim(b, dim: int, what: str) -> int:
    threads = tuple(b.kernel.threads)
    if not isinstance(dim, int) or not 0 <= dim < len(threads):
        raise TileShapeError(f"{what}: thread dimension {dim!r} does not exist in a block of "
                             f"threads={threads if len(threads) > 1 else threads[0]}", b.loc,
                             hint="use dimension 0 (threadIdx.x), or give T.Kernel a tuple of threads")
    return dim


@builtin
def get_thread_binding(dim: int = 0) -> Expr:
    """The executing thread's index in its block along `dim` (threadIdx.x for 0)."""
    b = _frame("T.get_thread_binding")
    return ThreadIndex(dt.int32, _dim(b, dim, "T.get_thread_binding"))


@builtin
def get_block_binding(dim: int = 0) -> Expr:
    """The block's index along grid dimension `dim` (blockIdx.x for 0): the variable
    `with T.Kernel(...) as (bx, ...)` binds, usable in tile programs and thread-level ones."""
    b = current()
    if b.kernel is None:
        raise TileSyntaxError("T.get_block_binding outside `with T.Kernel(...)`", b.loc,
                              hint="call it inside the kernel body")
    bvars = b.kernel.block_vars
    if not isinstance(dim, int) or not 0 <= dim < len(bvars):
        raise TileShapeError(f"T.get_block_binding({dim!r}): the grid has {len(bvars)} "
                             "dimension(s)", b.loc, hint=f"use a dim in [0, {len(bvars) - 1}]")
    return bvars[dim]


@builtin
def thread_binding(start, stop=None, thread: str = "threadIdx.x", annotations=None) -> Expr:
    """TIR's `T.thread_binding(begin, end, thread="threadIdx.x")` used as a value: the thread
    index along that axis, which must cover the block's threads exactly (`0, threads`)."""
    b = _frame("T.thread_binding")
    if stop is None:
        start, stop = 0, start
    if thread not in _DIMS:
        raise TileSyntaxError(f"T.thread_binding(thread={thread!r}): only threadIdx.x/y/z bind "
                              "threads", b.loc, hint='write thread="threadIdx.x"')
    dim = _dim(b, _DIMS[thread], "T.thread_binding")
    n = b.kernel.threads[dim]
    lo, hi = const_int(as_expr(start)), const_int(as_expr(stop))
    if lo != 0 or hi != n:
        raise TileShapeError(f"T.thread_binding({start}, {stop}) must span the block's {n} threads "
                             f"of {thread}", b.loc, hint=f"write T.thread_binding(0, {n}, thread="
                                                          f"{thread!r}), or change T.Kernel's threads")
    if annotations:
        raise TileSyntaxError("T.thread_binding(annotations=...) is not supported", b.loc,
                              hint="drop the annotations")
    return ThreadIndex(dt.int32, dim)


@builtin
def sync_threads(barrier_id=None, arrive_count=None) -> None:
    """A barrier: the block's (`T.sync_threads()`) or named barrier `barrier_id` over
    `arrive_count` threads. A no-op hint in tile programs (see the module docstring)."""
    b = current()
    if b.kernel is None or (THREAD_LEVEL, True) not in b.kernel.annotations:
        if barrier_id is not None or arrive_count is not None:
            raise TileSyntaxError("T.sync_threads(barrier_id, arrive_count) needs a thread-level "
                                  "kernel", b.loc,
                                  hint="bind the thread index first (tx = T.get_thread_binding()); "
                                       "in tile programs the compiler places barriers itself")
        return None
    _frame("T.sync_threads")
    if (barrier_id is None) != (arrive_count is None):
        raise TileSyntaxError("T.sync_threads takes both barrier_id and arrive_count, or neither",
                              b.loc, hint="write T.sync_threads(1, 256) for named barrier 1 over 256 "
                                          "threads")
    if barrier_id is not None:
        bid, cnt = const_int(as_expr(barrier_id)), const_int(as_expr(arrive_count))
        total = 1
        for t in b.kernel.threads:
            total *= t
        if bid is None or cnt is None or not 1 <= bid <= 15 or not 1 <= cnt <= total or cnt % 32:
            raise TileShapeError(f"T.sync_threads({barrier_id}, {arrive_count}): a named barrier "
                                 f"has an id in 1..15 and a thread count that is a multiple of 32, at "
                                 f"most the block's {total}", b.loc,
                                 hint="barrier 0 is the block barrier: write T.sync_threads()")
        b.emit(ThreadSync(bid, cnt, b.loc))
        return None
    b.emit(ThreadSync(None, None, b.loc))
    return None


@builtin
def alloc_barrier(arrive_count) -> Buffer:
    """mbarriers in shared memory: one per entry of `arrive_count` (an int gives one), each
    completing a phase after that many arrivals (and the transaction bytes armed on it)."""
    b = _frame("T.alloc_barrier")
    counts = list(arrive_count) if isinstance(arrive_count, (list, tuple)) else [arrive_count]
    vals = [const_int(as_expr(c)) for c in counts]
    if not vals or any(v is None or v < 1 for v in vals):
        raise TileShapeError(f"T.alloc_barrier({arrive_count!r}): arrival counts are positive "
                             "compile-time ints", b.loc,
                             hint="write T.alloc_barrier(arrive_count=128) or a list of counts")
    name = b.unique_name(b.pending_name() or "mbar")
    buf = b.allocate(Buffer(name, (len(vals),), BARRIER_DTYPE, "shared"))
    b.emit(BarrierInit(buf, tuple(vals), b.loc))
    return buf


def _barrier(obj, what: str) -> tuple[Buffer, Expr]:
    """The mbarrier buffer and element index that `obj` (`bar`, `bar[i]`) names."""
    b = current()
    if isinstance(obj, Buffer) and obj.dtype == BARRIER_DTYPE and obj.scope == "shared":
        if obj.shape[0] != 1:
            raise TileTypeError(f"{what}: {obj.name} holds {obj.shape[0]} mbarriers", b.loc,
                                hint=f"name one of them: {obj.name}[i]")
        return obj, as_expr(0)
    if isinstance(obj, Ref) and obj.is_element and obj.buffer.dtype == BARRIER_DTYPE \
            and obj.buffer.scope == "shared" and len(obj.items) == 1:
        idx = as_expr(obj.items[0])
        k = const_int(idx)
        if k is not None and not 0 <= k < obj.buffer.shape[0]:
            raise TileShapeError(f"{what}: mbarrier {obj.buffer.name}[{k}] does not exist (it holds "
                                 f"{obj.buffer.shape[0]})", b.loc, hint="index below the count")
        return obj.buffer, idx
    raise TileTypeError(f"{what} needs an mbarrier from T.alloc_barrier, got {obj!r}", b.loc,
                        hint="write bar = T.alloc_barrier(arrive_count=128) and pass bar or bar[i]")


@builtin
def barrier_arrive(barrier) -> None:
    """Each executing thread arrives once on the mbarrier."""
    b = _frame("T.barrier_arrive")
    buf, idx = _barrier(barrier, "T.barrier_arrive")
    b.emit(BarrierArrive(buf, idx, b.loc))


@builtin
def barrier_wait(barrier, parity) -> None:
    """Each executing thread waits until the mbarrier's phase of parity `parity` (0/1) completed."""
    b = _frame("T.barrier_wait")
    buf, idx = _barrier(barrier, "T.barrier_wait")
    p = as_expr(parity)
    if not p.dtype.is_int and not p.dtype.is_bool:
        raise TileTypeError("T.barrier_wait: the parity is an integer (0 or 1)", b.loc,
                            hint="write T.barrier_wait(bar, k % 2)")
    k = const_int(p)
    if k is not None and k not in (0, 1):
        raise TileShapeError(f"T.barrier_wait: parity {k} is neither 0 nor 1", b.loc,
                             hint="pass the phase count modulo 2")
    b.emit(BarrierWait(buf, idx, binop("mod", p, 2) if k is None else as_expr(k), b.loc))


@builtin
def mbarrier_arrive(mbarrier) -> None:
    """TileLang's `T.mbarrier_arrive(mbarrier=...)`: `T.barrier_arrive`."""
    barrier_arrive(mbarrier)


@builtin
def mbarrier_wait_parity(mbarrier, parity) -> None:
    """TileLang's `T.mbarrier_wait_parity(mbarrier=..., parity=...)`: `T.barrier_wait`."""
    barrier_wait(mbarrier, parity)


@dataclass(frozen=True)
class WsSpec:
    """`T.ws(*groups)` in a `with` statement: the parser builds the region (`tile_region`)."""

    groups: tuple

    def tile_region(self, body, loc) -> WarpRole:
        """The statement of `with T.ws(...): body`."""
        return WarpRole(self.groups, body, loc)


@builtin
def ws(*groups) -> WsSpec:
    """`with T.ws(0):` / `T.ws(0, 1)`: a region run only by the threads of those warpgroups
    (128 consecutive threads each: warpgroup g is threads 128*g .. 128*g+127)."""
    b = _frame("T.ws")
    if len(groups) == 1 and isinstance(groups[0], (list, tuple)):
        groups = tuple(groups[0])
    total = 1
    for t in b.kernel.threads:
        total *= t
    n = total // WARPGROUP
    if not groups or any(not isinstance(g, int) or isinstance(g, bool) or not 0 <= g < n for g in groups) \
            or len(set(groups)) != len(groups):
        raise TileShapeError(f"T.ws{tuple(groups)}: warpgroup ids are distinct ints in 0..{n - 1} "
                             f"(a block of {total} threads has {n} warpgroups of {WARPGROUP})", b.loc,
                             hint="give T.Kernel a multiple of 128 threads, one warpgroup per role")
    return WsSpec(tuple(sorted(groups)))


@builtin
def set_max_nreg(reg_count, is_inc) -> None:
    """TileLang's `T.set_max_nreg(count, is_inc)`: the executing warpgroup's register budget
    (`setmaxnreg.inc` / `.dec`), honoured on thread-lowered sm_90a targets (cuda:sm_90a,
    emu:sm_90a), accepted with a one-time warning elsewhere (tilecore.ir.reg_budget)."""
    b = _frame("T.set_max_nreg")
    n, inc = const_int(as_expr(reg_count)), const_int(as_expr(is_inc))
    if n is None or not 24 <= n <= 256 or n % 8 or inc not in (0, 1):
        raise TileShapeError(f"T.set_max_nreg({reg_count}, {is_inc}): the count is a multiple of 8 "
                             "in 24..256 and is_inc is 0 or 1", b.loc,
                             hint="write T.set_max_nreg(240, 1) for consumers, (40, 0) for producers")
    b.emit(SetMaxNReg(n, bool(inc), b.loc))


@builtin
def tma_copy(src, dst, barrier=None, eviction_policy=None, leader_scope_threads=None,
             cluster_mask=None, annotations=None) -> None:
    """TileLang's `T.tma_copy(src, dst, barrier=bar)`: a global -> shared tile copy issued by
    one of the executing threads whose bytes the mbarrier expects and completes (it does not
    arrive: the threads arrive with `T.barrier_arrive`); read `dst` after `T.barrier_wait`."""
    from ..ir.stmt import Copy
    from .ops import copy as tile_copy

    b = _frame("T.tma_copy")
    for name, v in (("leader_scope_threads", leader_scope_threads), ("cluster_mask", cluster_mask),
                    ("annotations", annotations)):
        if v is not None:
            raise TileSyntaxError(f"T.tma_copy({name}=...) is not supported", b.loc,
                                  hint=f"drop {name}")
    if eviction_policy is not None:
        from .hints import ignored_hint

        ignored_hint("T.tma_copy(eviction_policy=...)", "tilecore sets no cache eviction policy")
    if barrier is None:
        raise TileSyntaxError("T.tma_copy needs barrier=<an mbarrier from T.alloc_barrier>", b.loc,
                              hint="write T.tma_copy(src, dst, barrier=bar)")
    bar, idx = _barrier(barrier, "T.tma_copy")
    tile_copy(src, dst)
    node = b.blocks[-1].pop()
    if not isinstance(node, Copy) or node.src.buffer.scope != "global" or node.dst.buffer.scope != "shared":
        raise TileTypeError("T.tma_copy copies a global tensor region into a shared buffer", b.loc,
                            hint="use T.copy for other directions")
    b.emit(TmaCopy(node, bar, idx, b.loc))


@builtin
def tvm_warp_shuffle(mask, value, src_lane, width, warp_size) -> Expr:
    """TVM's `tvm_warp_shuffle(mask, value, src_lane, width, warp_size)` (`__shfl_sync`): the
    `value` of lane `src_lane % width` of the executing thread's group of `width` lanes. Every
    lane of the warp executes it (mask 0xFFFFFFFF; a divergent shuffle is a located error on
    the emulator)."""
    from ..ir.thread import Shuffle

    b = _frame("T.tvm_warp_shuffle")
    m, w, ws_ = (const_int(as_expr(x)) for x in (mask, width, warp_size))
    if m is None or m & 0xFFFFFFFF != 0xFFFFFFFF:
        raise TileShapeError(f"T.tvm_warp_shuffle(mask={mask!r}, ...): only the full-warp mask "
                             "0xFFFFFFFF is supported", b.loc,
                             hint="shuffle in every lane and ignore the values you do not need")
    if ws_ != 32 or w is None or w < 1 or w & (w - 1) or w > 32:
        raise TileShapeError(f"T.tvm_warp_shuffle(width={width!r}, warp_size={warp_size!r}): the "
                             "warp size is 32 and the width a power of two <= 32", b.loc,
                             hint="pass width=32, warp_size=32 (or a smaller power-of-two width)")
    v = as_expr(value.as_expr() if isinstance(value, Ref) else value)
    lane = as_expr(src_lane.as_expr() if isinstance(src_lane, Ref) else src_lane)
    if not lane.dtype.is_int:
        raise TileTypeError(f"T.tvm_warp_shuffle lane has dtype {lane.dtype}", b.loc,
                            hint="the source lane is an integer")
    return Shuffle(v, "idx", binop("mod", lane, w), w)


@dataclass(frozen=True)
class AccessPtr:
    """`T.access_ptr(buf[i, j], "r" | "w" | "rw", ...)`: the address of one element of `buffer`
    (a frontend value: `T.ptx_cp_async` takes it; tilecore has no pointer arithmetic)."""

    buffer: Buffer
    indices: tuple
    mode: str
    extent: object = None


@builtin
def access_ptr(base, access_type="r", *extents, offset=0, extent=None, ignore_last_ndim=0) -> AccessPtr:
    """TileLang's `T.access_ptr(base, access_type, *extents, offset=0, extent=None)`: the
    address of `base` (an element `buf[i, j]`, a region's first element, or a buffer's first)
    plus `offset` elements, for `T.ptx_cp_async`."""
    from .refs import region_of

    b = current()
    if ignore_last_ndim:
        raise TileSyntaxError("T.access_ptr(ignore_last_ndim=...) is not supported", b.loc,
                              hint="index the element whose address you need")
    modes = {"r": "r", "w": "w", "rw": "rw", 1: "r", 2: "w", 3: "rw"}
    if access_type not in modes:
        raise TileSyntaxError(f"T.access_ptr access type {access_type!r}", b.loc,
                              hint='use "r", "w" or "rw" (or 1, 2, 3)')
    if isinstance(base, Ref) and base.is_element:
        buf, idx = base.buffer, tuple(as_expr(i) for i in base.items)
    elif isinstance(base, (Ref, Buffer)):
        r = region_of(base, None, "T.access_ptr base")
        buf, idx = r.buffer, tuple(r.starts)
    else:
        raise TileTypeError(f"T.access_ptr takes a buffer element or region, got {type(base).__name__}",
                            b.loc, hint="write T.access_ptr(buf[i, j], 'r')")
    if not (isinstance(offset, int) and offset == 0):
        # row-major offsets are linear: moving the last index moves the address by as much
        idx = idx[:-1] + (binop("add", idx[-1], offset),)
    n = extent
    if n is None and extents:
        n = 1
        for e in extents:
            n = binop("mul", as_expr(n), e)
    return AccessPtr(buf, idx, modes[access_type], n)


@builtin
def ptx_cp_async(dst_access_ptr, src_access_ptr, num_elems, predicate=None) -> None:
    """`cp.async` of `num_elems` consecutive elements (4, 8 or 16 bytes) from global memory to
    shared memory, issued by the executing thread into its open group; `predicate` false
    writes zeros instead. Retire it with `T.ptx_commit_group()` + `T.ptx_wait_group(n)`."""
    from ..ir.thread import ASYNC_COPY_BYTES
    from ..ir.thread_level import CpAsync

    b = _frame("T.ptx_cp_async")
    for name, p, scope in (("destination", dst_access_ptr, "shared"), ("source", src_access_ptr, "global")):
        if not isinstance(p, AccessPtr):
            raise TileTypeError(f"T.ptx_cp_async {name} must be a T.access_ptr, got {type(p).__name__}",
                                b.loc, hint=f"write T.access_ptr({scope}_buf[i], ...)")
        if p.buffer.scope != scope:
            raise TileTypeError(f"T.ptx_cp_async {name} {p.buffer.name} is {p.buffer.scope} memory; "
                                "cp.async copies global memory into shared memory", b.loc,
                                hint="use a plain store for other directions")
    d, s = dst_access_ptr, src_access_ptr
    if d.buffer.dtype != s.buffer.dtype:
        raise TileTypeError(f"T.ptx_cp_async from {s.buffer.dtype} to {d.buffer.dtype}", b.loc,
                            hint="cp.async copies bytes: give both buffers one dtype")
    n = const_int(as_expr(num_elems))
    if n is None or n * d.buffer.dtype.itemsize not in ASYNC_COPY_BYTES:
        raise TileShapeError(f"T.ptx_cp_async of {num_elems} {d.buffer.dtype} elements: cp.async "
                             f"moves {' / '.join(map(str, ASYNC_COPY_BYTES))} bytes", b.loc,
                             hint="copy 4, 8 or 16 bytes per call")
    pred = None
    if predicate is not None:
        pred = as_expr(predicate.as_expr() if isinstance(predicate, Ref) else predicate)
        if not pred.dtype.is_bool:
            pred = binop("ne", pred, 0)
    b.emit(CpAsync(d.buffer, d.indices, s.buffer, s.indices, n, pred, b.loc))


@builtin
def ptx_commit_group() -> None:
    """`cp.async.commit_group`: close the executing thread's open group of `T.ptx_cp_async`s."""
    from ..ir.thread_level import CpAsyncCommit

    b = _frame("T.ptx_commit_group")
    b.emit(CpAsyncCommit(b.loc))


@builtin
def ptx_wait_group(num) -> None:
    """`cp.async.wait_group num`: wait until at most `num` of the executing thread's committed
    groups are in flight. The data is then visible to this thread; other threads read it after
    a barrier (`T.sync_threads()`)."""
    from ..ir.thread_level import CpAsyncWait

    b = _frame("T.ptx_wait_group")
    n = const_int(as_expr(num))
    if n is None or n < 0:
        raise TileShapeError(f"T.ptx_wait_group({num!r}): the count of groups left in flight is a "
                             "constant >= 0", b.loc, hint="write T.ptx_wait_group(0)")
    b.emit(CpAsyncWait(n, b.loc))


def per_thread_fragments(launch):
    """`launch` (a thread-level kernel) with every fragment that no tile operation or
    `T.Parallel` loop touches made a local buffer: used only by per-thread statements
    (`pref[r] = Indices[...]` in a producer role), TileLang gives it one copy per thread, which
    is what a local is; a fragment is laid out over the block's threads. Other kernels unchanged."""
    from dataclasses import replace

    from ..ir.stmt import TILE_OPS, For
    from ..ir.thread_level import TmaCopy
    from ..ir.visit import rewrite, walk

    if (THREAD_LEVEL, True) not in launch.annotations:
        return launch
    frags = {id(b): b for b in launch.allocs if isinstance(b, Buffer) and b.scope == "fragment"}
    if not frags:
        return launch
    collective: set[int] = set()
    for n in walk(launch.body):
        if isinstance(n, (*TILE_OPS, TmaCopy)) or (isinstance(n, For) and n.kind == "parallel"):
            collective.update(id(x) for x in walk(n) if isinstance(x, Buffer))
    swap = {k: replace(b, scope="local") for k, b in frags.items() if k not in collective}
    if not swap:
        return launch
    return rewrite(launch, lambda n: swap.get(id(n)) if isinstance(n, Buffer) else None)
