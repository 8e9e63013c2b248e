"""Lowering state for one kernel: the thread variable, buffers of the thread program, layouts.

`LowerCtx` maps every tile-level buffer to its thread-level storage (shared buffers flattened
to 1-D, fragments and locals to per-thread register arrays) and hands out scratch buffers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import dtypes as dt
from ..errors import SourceLoc, TileShapeError
from ..ir.buffer import Buffer
from ..ir.expr import Const, Expr, Var, binop, cast, const, const_int, linear
from ..ir.names import fresh_name
from ..ir.smem_layout import SharedLayout
from ..ir.stmt import KernelLaunch
from ..target import TargetDesc
from .indexing import simplify
from .layout import Layout
from .smem import planner
from .wide_offsets import offsets_are_wide, widen


@dataclass
class LayoutMap:
    """Fragment layouts by buffer identity, with the statement that fixed each (for errors)."""

    layouts: dict = field(default_factory=dict)
    origins: dict = field(default_factory=dict)
    keep: list = field(default_factory=list)

    def get(self, buf: Buffer) -> Layout | None:
        """The layout of `buf`, or None."""
        return self.layouts.get(id(buf))

    def set(self, buf: Buffer, layout: Layout, origin: str) -> None:
        """Fix the layout of `buf`; `origin` names the statement that decided it."""
        self.layouts[id(buf)] = layout
        self.origins[id(buf)] = origin
        self.keep.append(buf)

    def origin(self, buf: Buffer) -> str:
        """What fixed the layout of `buf`."""
        return self.origins.get(id(buf), "its default layout")


def flat_offset(buf: Buffer, indices, bounds: dict | None = None, wide: bool = False) -> Expr:
    """Row-major flat element offset of `indices` into `buf` (symbolic dims allowed).

    `wide` (`LowerCtx.wide`: a global buffer that may hold 2^31 elements or more; the pass
    `wide-offsets` widens its offsets later) guards what that pass cannot undo: int32 constant
    folding. Where a constant index meets a constant stride (`A[65536, j]` with 32768 columns)
    the int32 offset would fold `65536 * 32768` to -2^31, so such offsets are built in int64
    here, each index on its own (`_offset64`)."""
    idx = [i if isinstance(i, Expr) else const(int(i)) for i in indices]
    if wide and _folds_past_int32(buf, idx):
        return _offset64(buf, idx, bounds or {})
    off: Expr = const(0)
    for k, (i, s) in enumerate(zip(idx, buf.shape)):
        off = i if k == 0 else off * s + i
    return simplify(off, bounds or {})


_INT32 = (-(1 << 31), (1 << 31) - 1)


def _folds_past_int32(buf: Buffer, idx: list) -> bool:
    """Whether a constant of the int32 offset (an index's constant part or coefficient times a
    constant stride) leaves the int32 range."""
    stride = 1
    for i, s in zip(reversed(idx), reversed(buf.shape)):
        lin = linear(i)
        consts = [lin[1], *lin[0].values()] if lin is not None else []
        if any(not _INT32[0] <= c * stride <= _INT32[1] for c in consts):
            return True
        if not isinstance(s, int):
            return False  # outer strides are symbolic: their products are not folded
        stride *= s
    return False


def _offset64(buf: Buffer, idx: list, bounds: dict) -> Expr:
    """The row-major offset in int64: each index simplified in int32 (it is below its
    dimension), then widened (`widen`: tile-sized parts stay int32), combined in int64."""
    small = frozenset(k for k, r in bounds.items()
                      if r is not None and r[0] is not None and r[1] is not None
                      and -(1 << 15) <= r[0] and r[1] < 1 << 15)
    off: Expr | None = None
    for i, s in zip(idx, buf.shape):
        w = widen(simplify(i, bounds), small)
        if w.dtype != dt.int64:
            w = cast(w, dt.int64)
        if off is None:
            off = w
        else:
            stride = Const(int(s), dt.int64) if isinstance(s, int) else widen(s, small)
            off = binop("add", binop("mul", off, stride), w)
    return off if off is not None else Const(0, dt.int64)


def numel_expr(buf: Buffer) -> Expr:
    """The element count of `buf` as an expression (symbolic for dynamic shapes)."""
    n: Expr = const(1)
    for s in buf.shape:
        n = n * s
    return n


class LowerCtx:
    """Everything the lowering of one `KernelLaunch` shares."""

    def __init__(self, launch: KernelLaunch, desc: TargetDesc, layouts: LayoutMap, plans: dict):
        """`desc`: the target description (`ctx.facts` is its TargetFacts, `ctx.target` the
        compile target); `layouts`: the fragments' layouts; `plans`: id(Gemm) -> MmaPlan for
        the gemms of `launch` that are tensorized (ids of this launch's own nodes)."""
        facts = desc.facts
        self.launch = launch
        self.desc = desc
        self.facts = facts
        self.options = desc.options
        self.target = desc.target
        self.threads = launch.num_threads
        self.warp_size = max(1, facts.warp_size)
        self.tx = Var("tx")
        self.thread_level = False  # a thread-level kernel: block code is per-thread (thread_level.py)
        self.var_bounds: dict[int, tuple] = block_bounds(launch)
        self._simp_memo: dict[tuple, Expr] = {}
        self.find_reg_memo: dict[tuple, tuple] = {}  # BodyLowerer.find_reg's answers
        self.layouts = layouts
        self.plans = plans
        # id(Gemm) -> the scale-d of its first k step's wgmmas, where the accumulator's clear
        # before the loop was dropped (tilecore.lower.accum_zero)
        self.first_step_scale: dict[int, Expr] = {}
        self.gemm_uses: dict[int, int] = {}  # id(Gemm) -> occurrences in the body (accum_zero.py)
        self._shared: dict[int, Buffer] = {}
        self._regs: dict[int, Buffer] = {}
        self._scratch: dict[tuple, Buffer] = {}
        self.shared_list: list[Buffer] = []
        self.reg_list: list[Buffer] = []
        self._names: set[str] = set()
        self._counter = 0
        if self.threads > facts.max_threads:
            raise TileShapeError(f"T.Kernel asks for {self.threads} threads; {facts.target} allows at "
                                 f"most {facts.max_threads}", launch.loc,
                                 hint="use fewer threads per block")

    @property
    def bounds(self) -> dict:
        """Known ranges of variables: the thread index, block indices, enclosing loop counters."""
        out = dict(self.var_bounds)
        out[id(self.tx)] = (0, self.threads - 1)
        return out

    def simp(self, e: Expr) -> Expr:
        """`e` simplified with the known variable ranges."""
        bounds = self.bounds
        # the epilogue and copy lowerings simplify the same offsets again and again (a TMA-store
        # epilogue asks for about 250, 105 of them distinct); expressions hash in O(1)
        key = (e, tuple(sorted(bounds.items())))
        got = self._simp_memo.get(key)
        if got is None:
            got = self._simp_memo[key] = simplify(e, bounds)
        return got

    def fresh(self, base: str) -> str:
        """A name not used yet in this kernel."""
        return fresh_name(base, self._names)

    def fresh_var(self, base: str, dtype=None) -> Var:
        """A new variable with an unused name."""
        return Var(self.fresh(base)) if dtype is None else Var(self.fresh(base), dtype)

    def shared(self, buf: Buffer) -> Buffer:
        """The flat shared buffer backing the user's shared buffer `buf`; it carries the layout
        chosen for it (`tilecore.lower.smem`), which every access reads through `offset`."""
        out = self._shared.get(id(buf))
        if out is None:
            lay = planner(self).layout(buf)
            out = Buffer(self.fresh(buf.name), (lay.size,), buf.dtype, "shared", layout=lay)
            self._shared[id(buf)] = out
            self.shared_list.append(out)
        return out

    def has_shared(self, buf: Buffer) -> bool:
        """True when the flat storage of shared buffer `buf` is allocated already."""
        return id(buf) in self._shared

    def smem_layout(self, buf: Buffer) -> SharedLayout:
        """The layout of the user's shared buffer `buf` (deciding it allocates nothing)."""
        return planner(self).layout(buf)

    def vector_ok(self, buf: Buffer, vec: int) -> bool:
        """True when `vec` elements of shared buffer `buf` starting at a column that is a multiple
        of `vec` are one aligned vector access in its storage (always true off shared memory)."""
        return buf.scope != "shared" or self.smem_layout(buf).contiguous(vec)

    def wide(self, buf: Buffer) -> bool:
        """Whether offsets into `buf` are computed in int64 (tilecore.lower.wide_offsets: a
        global buffer that may hold 2^31 elements or more; `index_bitwidth` 32 never, 64 every
        global buffer)."""
        return offsets_are_wide(buf, self.options)

    def offset(self, buf: Buffer, indices) -> Expr:
        """The element offset of `indices` in the storage of `buf` (through its layout for
        shared buffers: leading dimensions are the layout's row, the last its column)."""
        if buf.scope != "shared":
            return flat_offset(buf, indices, self.bounds, self.wide(buf))
        idx = [i if isinstance(i, Expr) else const(int(i)) for i in indices]
        lay = self.smem_layout(buf)
        if hasattr(lay, "offset_index"):  # a user's index map reads the buffer's own indices
            return self.simp(lay.offset_index([self.simp(i) for i in idx]))
        row: Expr = const(0)
        for k, (i, s) in enumerate(zip(idx[:-1], buf.shape[:-1])):
            row = i if k == 0 else row * s + i
        col = idx[-1] if idx else const(0)
        return self.simp(lay.offset(self.simp(row), col))

    def layout(self, buf: Buffer) -> Layout:
        """The inferred layout of fragment `buf`."""
        lay = self.layouts.get(buf)
        if lay is None:
            raise KeyError(f"no layout for fragment {buf.name}")
        return lay

    def regs(self, buf: Buffer) -> Buffer:
        """The per-thread register array of a fragment (its layout's registers) or local buffer."""
        out = self._regs.get(id(buf))
        if out is None:
            n = self.layout(buf).nregs if buf.scope == "fragment" else buf.numel
            # is_var marks a block-uniform scalar (barrier placement relies on it); in a
            # thread-level kernel T.alloc_var holds a per-thread value
            out = Buffer(self.fresh(buf.name), (n,), buf.dtype, "local",
                         is_var=buf.is_var and not self.thread_level)
            self._regs[id(buf)] = out
            self.reg_list.append(out)
        return out

    def scratch_shared(self, key, name: str, n: int, dtype) -> Buffer:
        """A shared scratch buffer reused for the same `key` (staging of one fragment, ...)."""
        k = (key, n, dtype.name)
        out = self._scratch.get(k)
        if out is None:
            out = Buffer(self.fresh(name), (n,), dtype, "shared")
            self._scratch[k] = out
            self.shared_list.append(out)
        return out

    def new_regs(self, name: str, n: int, dtype) -> Buffer:
        """A fresh per-thread register array."""
        out = Buffer(self.fresh(name), (n,), dtype, "local")
        self.reg_list.append(out)
        return out

    def lane(self) -> Expr:
        """The lane index within the warp."""
        return self.simp(self.tx % self.warp_size)

    def warp(self) -> Expr:
        """The warp index within the block."""
        return self.simp(self.tx // self.warp_size)


def block_bounds(launch: KernelLaunch) -> dict[int, tuple]:
    """id(block var) -> (0, grid extent - 1), the upper bound unknown (None) where the extent is
    not a compile-time constant. Sound for every kernel: a block index never reaches its grid
    extent, and T.use_swizzle's remapped indices (`tilecore.lower.raster`) are new variables
    with their own bounds, a bijection of the same grid. With these bounds a predicate such as
    `bx * 128 + i < 4096` in a 32-block grid folds away (`simplify`)."""
    out: dict[int, tuple] = {}
    for k, v in enumerate(launch.block_vars):
        n = const_int(launch.grid[k]) if k < len(launch.grid) else None
        out[id(v)] = (0, n - 1 if n is not None and n >= 1 else None)
    return out


def all_of(conds) -> Expr | None:
    """The conjunction of the non-None conditions, or None."""
    out = None
    for c in conds:
        if c is None or (isinstance(c, Const) and c.value is True):
            continue
        out = c if out is None else binop("and", out, c)
    return out


def loc_str(loc: SourceLoc | None) -> str:
    """`file:line` for messages."""
    return str(loc) if loc is not None else "<unknown>"
