"""Tile-level statements: what the kernel author wrote, with named fields and source locations.

Every statement carries `loc` (the user's file:line) so any later error or fault can name it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import SourceLoc
from .buffer import Buffer, Region
from .expr import Expr, Var

LOOP_KINDS = ("serial", "parallel", "pipelined", "unroll")
# bitand / bitor / bitxor: integer and bool tiles only (T.reduce_bitand, ...)
REDUCE_KINDS = ("sum", "max", "min", "abssum", "absmax", "bitand", "bitor", "bitxor")
BIT_REDUCE_KINDS = ("bitand", "bitor", "bitxor")


class Stmt:
    """Base class of statements."""

    loc: SourceLoc | None


@dataclass(frozen=True)
class SeqStmt(Stmt):
    """Statements run in order."""

    stmts: tuple
    loc: SourceLoc | None = None

    def __post_init__(self):
        for s in self.stmts:
            if not isinstance(s, Stmt):
                raise TypeError(f"SeqStmt holds a non-statement {s!r}")


@dataclass(frozen=True)
class LetStmt(Stmt):
    """Binds `var` to `value` for the rest of the enclosing sequence."""

    var: Var
    value: Expr
    loc: SourceLoc | None = None


@dataclass(frozen=True)
class Store(Stmt):
    """`buffer[indices] = value` (the value is rounded to the buffer's dtype)."""

    buffer: Buffer
    indices: tuple
    value: Expr
    loc: SourceLoc | None = None

    def __post_init__(self):
        if len(self.indices) != len(self.buffer.shape):
            raise TypeError(f"store to {self.buffer.name} with the wrong number of indices")


@dataclass(frozen=True)
class AtomicAdd(Stmt):
    """`T.atomic_add(buffer[indices], value)`: an element-wise atomic accumulation; with
    `prev` (a local `T.alloc_var` buffer, thread-level kernels only) the element's value before
    the addition is written to `prev[0]` (`return_prev=True`). `op` "max" / "min" makes it
    `T.atomic_max` / `T.atomic_min` (the element becomes the max / min of itself and the value).
    `order` is "relaxed" or
    "acq_rel" (`memory_order=` other than relaxed: the executing thread's earlier memory
    accesses are ordered before the addition and its later ones after it, at device scope, so
    blocks can hand data to each other through a counter; see tilecore.ir.thread.ATOMIC_ORDERS)."""

    buffer: Buffer
    indices: tuple
    value: Expr
    loc: SourceLoc | None = None
    prev: Buffer | None = None
    order: str = "relaxed"
    op: str = "add"  # or "max" / "min": T.atomic_max / T.atomic_min (float: NaN propagates)

    def __post_init__(self):
        if self.op not in ("add", "max", "min"):
            raise TypeError(f"unknown atomic op {self.op}")


@dataclass(frozen=True)
class AtomicAddRegion(Stmt):
    """`T.atomic_add(dst[...], src_tile)`: atomically add a whole tile into a region.
    `use_tma`: the program asked for one bulk reduce-add of the tile (TileLang's
    `use_tma=True`; tilecore.lower.tma_reduce, per-element atomics where it does not apply)."""

    dst: Region
    src: Region
    loc: SourceLoc | None = None
    use_tma: bool = False


@dataclass(frozen=True)
class For(Stmt):
    """A loop `for var in range(start, stop, step)` of kind serial/parallel/pipelined/unroll.

    `annotations` keeps what the user asked for that does not change values (num_stages, ...).
    """

    var: Var
    start: Expr
    stop: Expr
    step: int
    kind: str
    body: Stmt
    annotations: tuple = ()
    loc: SourceLoc | None = None

    def __post_init__(self):
        if self.kind not in LOOP_KINDS:
            raise TypeError(f"unknown loop kind {self.kind}")
        if not isinstance(self.step, int) or self.step == 0:
            raise TypeError("loop step must be a non-zero int")

    def annotation(self, key: str, default=None):
        """The value of annotation `key`, or `default`."""
        for k, v in self.annotations:
            if k == key:
                return v
        return default


@dataclass(frozen=True)
class IfThenElse(Stmt):
    """`if cond: then_body else: else_body` on a kernel value."""

    cond: Expr
    then_body: Stmt
    else_body: Stmt | None = None
    loc: SourceLoc | None = None


@dataclass(frozen=True)
class Copy(Stmt):
    """`T.copy(src, dst)`: regions of equal squeezed shape; global reads outside the tensor give 0,
    global writes outside it are dropped (partial tiles)."""

    src: Region
    dst: Region
    loc: SourceLoc | None = None
    # L2 eviction priority of the global reads ("", "evict_first", "evict_last"): a hint the
    # TMA stage copies of pipelined loops honour (tilecore.lower.tma_pipeline); results are the
    # same without it
    cache_hint: str = ""


@dataclass(frozen=True)
class Gemm(Stmt):
    """`T.gemm(A, B, C)`: C (+)= op(A) @ op(B), accumulated in C's dtype."""

    a: Region
    b: Region
    c: Region
    transpose_a: bool = False
    transpose_b: bool = False
    clear_accum: bool = False
    policy: str = "square"
    loc: SourceLoc | None = None
    # `T.gemm(wg_wait=-1)`: on asynchronous tensor cores (wgmma) the product is left in flight
    # and its wait placed before the first statement that needs it
    # (tilecore.lower.wgmma_async); everywhere else the gemm is synchronous, the same values
    asynchronous: bool = False

    @property
    def mnk(self) -> tuple[int, int, int]:
        """(M, N, K) of the product."""
        am, ak = _last2(self.a.extents)
        if self.transpose_a:
            am, ak = ak, am
        bk, bn = _last2(self.b.extents)
        if self.transpose_b:
            bk, bn = bn, bk
        return am, bn, ak


def _last2(extents: tuple[int, ...]) -> tuple[int, int]:
    sq = [e for e in extents]
    while len(sq) > 2 and sq[0] == 1:
        sq = sq[1:]
    return sq[-2], sq[-1]


@dataclass(frozen=True)
class Fill(Stmt):
    """`T.fill(dst, value)` / `T.clear(dst)`."""

    dst: Region
    value: Expr
    loc: SourceLoc | None = None


@dataclass(frozen=True)
class Reduce(Stmt):
    """`T.reduce_<kind>(src, dst, dim, clear)`: reduce `src` along `dim` into `dst`.

    With clear=False the result is combined with dst's current contents.
    """

    src: Buffer
    dst: Buffer
    kind: str
    dim: int
    clear: bool = True
    loc: SourceLoc | None = None

    def __post_init__(self):
        if self.kind not in REDUCE_KINDS:
            raise TypeError(f"unknown reduction {self.kind}")


@dataclass(frozen=True)
class CumSum(Stmt):
    """`T.cumsum(src, dst, dim, reverse)`: inclusive prefix sum along `dim`."""

    src: Buffer
    dst: Buffer
    dim: int
    reverse: bool = False
    loc: SourceLoc | None = None


@dataclass(frozen=True)
class KernelLaunch(Stmt):
    """`with T.Kernel(*grid, threads=...) as block_vars`: the body runs once per block.

    `allocs` lists the shared/fragment/local buffers the body allocates (per block).
    """

    grid: tuple
    block_vars: tuple
    threads: tuple
    allocs: tuple
    body: Stmt
    annotations: tuple = field(default=())
    loc: SourceLoc | None = None

    def __post_init__(self):
        if len(self.grid) != len(self.block_vars):
            raise TypeError("grid and block variables differ in number")

    @property
    def num_threads(self) -> int:
        n = 1
        for t in self.threads:
            n *= t
        return n


TILE_OPS = (Copy, Gemm, Fill, Reduce, CumSum, AtomicAddRegion)
