"""Fragment layouts: which thread holds which element of a `fragment` buffer, in which register.

A layout maps (thread `tx`, register `r`) to the element coordinates it holds, as index
expressions in `tx` for every compile-time `r` (`coords`). Every layout can also be tabulated
for all threads at once (`table`), which is how lowering checks that two uses agree, finds the
register holding a wanted element, and plans reductions, without symbolic reasoning.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..ir.expr import Const, Expr, Var, binop, const
from ..ir.intrinsic import LaneMap, bit_linear, lane_expr
from .indexing import evaluate, simplify

_TX = Var("tx")


def unravel(e: Expr, shape: tuple[int, ...], bounds: dict | None) -> tuple[Expr, ...]:
    """Row-major coordinates of flat element index `e` in `shape` (the first one unbounded),
    simplified with `bounds` (left as built when None)."""
    out = []
    stride = 1
    strides = []
    for s in reversed(shape):
        strides.append(stride)
        stride *= s
    strides.reverse()
    for k, (s, st) in enumerate(zip(shape, strides)):
        c = e if st == 1 else e // st
        if k > 0:
            c = c % s
        out.append(c if bounds is None else simplify(c, bounds))
    return tuple(out)


class Layout:
    """Base class: `shape`, `threads`, `nregs` and the mapping (tx, r) -> coordinates."""

    shape: tuple
    threads: int

    @property
    def nregs(self) -> int:
        raise NotImplementedError

    def coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        """Coordinates of the element register `r` of thread `tx` holds."""
        raise NotImplementedError

    def valid(self, tx: Var, r: int) -> Expr | None:
        """When register `r` holds no element for some threads, the condition that it does."""
        return None

    def raw_coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        """`coords` before range simplification: the same values for every thread, cheaper to
        build; `table` evaluates these numerically, where simplifying first would be wasted."""
        return self.coords(tx, r)

    @functools.cached_property
    def table(self) -> tuple[np.ndarray, np.ndarray]:
        """(coords[T, nregs, rank], valid[T, nregs]) for every thread and register."""
        t = np.arange(self.threads, dtype=np.int64)
        env = {id(_TX): t}
        rank = len(self.shape)
        coords = np.zeros((self.threads, self.nregs, rank), dtype=np.int64)
        valid = np.ones((self.threads, self.nregs), dtype=bool)
        memo: dict = {}  # the registers' coordinates share their thread-dependent parts
        for r in range(self.nregs):
            for k, c in enumerate(self.raw_coords(_TX, r)):
                coords[:, r, k] = np.broadcast_to(evaluate(c, env, memo), (self.threads,))
            v = self.valid(_TX, r)
            if v is not None:
                valid[:, r] = np.broadcast_to(evaluate(v, env, memo), (self.threads,))
        return coords, valid

    @functools.cached_property
    def replicated(self) -> bool:
        """True when some element is held by more than one (thread, register)."""
        coords, valid = self.table
        flat = self.flat_index(coords)[valid]
        return len(np.unique(flat)) != len(flat)

    @functools.cached_property
    def writers(self) -> np.ndarray:
        """valid[T, nregs] keeping only the first (register, thread) holder of each element: the
        one that writes it when the fragment is stored to memory (a replicated element written
        by all of its holders in one statement is a write-write race)."""
        coords, valid = self.table
        writer = valid.copy()
        if not self.replicated:
            return writer
        # the first holder in (register, thread) order: the valid entries taken register-major,
        # each element's first occurrence among them (a loop over every (register, thread) in
        # Python was a tenth of flash attention's lowering)
        flat_t = self.flat_index(coords).T  # (nregs, T)
        held = np.argwhere(valid.T)  # register-major, as the boolean index below orders them
        _, first = np.unique(flat_t[valid.T], return_index=True)
        out_t = np.zeros_like(valid.T)
        out_t[held[first, 0], held[first, 1]] = True
        return np.ascontiguousarray(out_t.T)

    def flat_index(self, coords: np.ndarray) -> np.ndarray:
        """Row-major flat element numbers of a coordinate array (last axis = rank)."""
        out = np.zeros(coords.shape[:-1], dtype=np.int64)
        for k, s in enumerate(self.shape):
            out = out * s + coords[..., k]
        return out

    def find_reg(self, want: np.ndarray, active: np.ndarray | None = None) -> int | None:
        """The register r with coords(tx, r) == want[tx] for every (active) thread, or None."""
        coords, valid = self.table
        match = np.all(coords == want[:, None, :], axis=-1) & valid
        if active is not None:
            match = match | ~active[:, None]
        ok = np.nonzero(np.all(match, axis=0))[0]
        return int(ok[0]) if len(ok) else None


@dataclass(frozen=True)
class StridedLayout(Layout):
    """Row-major elements dealt to threads in runs of `vec`: element (r // vec * T + tx) * vec + r % vec."""

    shape: tuple
    threads: int
    vec: int = 1

    @property
    def numel(self) -> int:
        """Elements of the laid-out buffer."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nregs(self) -> int:
        per = self.threads * self.vec
        return -(-self.numel // per) * self.vec

    def _flat(self, tx: Var, r: int) -> Expr:
        base = (r // self.vec) * self.threads * self.vec + r % self.vec
        return const(base) + (tx * self.vec if self.vec != 1 else tx)

    def coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        bounds = {id(tx): (0, self.threads - 1)}
        return unravel(self._flat(tx, r), self.shape, bounds)

    def raw_coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        return unravel(self._flat(tx, r), self.shape, None)

    def valid(self, tx: Var, r: int) -> Expr | None:
        base = (r // self.vec) * self.threads * self.vec + r % self.vec
        if base + self.vec * (self.threads - 1) < self.numel:
            return None
        # base + vec * tx < numel  <=>  tx < ceil((numel - base) / vec)
        limit = -(-(self.numel - base) // self.vec)
        return binop("lt", tx, limit)


@dataclass(frozen=True)
class MmaLayout(Layout):
    """The tensor-core accumulator layout: a (wm x wn) grid of warps, each holding
    (M / wm) x (N / wn) as tiles of the instruction's C operand, spread by its lane map."""

    shape: tuple
    threads: int
    warps: tuple  # (wm, wn)
    cmap: LaneMap
    warp_size: int = 32

    @property
    def tiles(self) -> tuple[int, int]:
        """Instruction tiles per warp along M and N."""
        m, n = self.shape
        wm, wn = self.warps
        return m // wm // self.cmap.rows, n // wn // self.cmap.cols

    @property
    def nregs(self) -> int:
        mt, nt = self.tiles
        return mt * nt * self.cmap.elems

    def split(self, r: int) -> tuple[int, int, int]:
        """Register r as (m tile, n tile, element of the instruction's C operand)."""
        mt, nt = self.tiles
        e = self.cmap.elems
        return r // (nt * e), (r // e) % nt, r % e

    def reg(self, mi: int, ni: int, e: int) -> int:
        """The register holding element e of C tile (mi, ni)."""
        return (mi * self.tiles[1] + ni) * self.cmap.elems + e

    def coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        bounds = {id(tx): (0, self.threads - 1)}
        return tuple(simplify(c, bounds) for c in self.raw_coords(tx, r))

    def raw_coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        m, n = self.shape
        wm, wn = self.warps
        ws = self.warp_size
        lane = tx % ws
        warp_m = tx // (ws * wn) if wm > 1 else Const(0, tx.dtype)
        warp_n = (tx // ws) % wn if wn > 1 else Const(0, tx.dtype)
        mi, ni, e = self.split(r)
        row = warp_m * (m // wm) + mi * self.cmap.rows + self.cmap.coord(lane, e, 0)
        col = warp_n * (n // wn) + ni * self.cmap.cols + self.cmap.coord(lane, e, 1)
        return row, col


@dataclass(frozen=True)
class ReplicatedLayout(Layout):
    """Every thread holds every element (small fragments no other layout fits)."""

    shape: tuple
    threads: int

    @property
    def nregs(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        out = []
        for s in reversed(self.shape):
            out.append(const(r % s))
            r //= s
        return tuple(reversed(out))


@dataclass(frozen=True, eq=False)
class TableLayout(Layout):
    """A layout given element by element (a user's `T.Fragment`, tilecore.ir.index_layout):
    register r of thread t holds element `cells[t, r]` where `held[t, r]`. Coordinates are a sum
    of bit fields of the thread index where they are linear in its bits (the usual maps), else a
    constant table read per thread (`LaneTable`). Compared by identity."""

    shape: tuple
    threads: int
    cells: np.ndarray  # (threads, nregs, rank) int64
    held: np.ndarray  # (threads, nregs) bool

    @staticmethod
    def of(fmap, threads: int) -> TableLayout:
        """The layout of a `FragmentMap` in a block of `threads` threads (threads it names no
        element of hold none)."""
        shape = tuple(fmap.shape)
        cells = np.zeros((threads, fmap.nregs, len(shape)), dtype=np.int64)
        held = np.zeros((threads, fmap.nregs), dtype=bool)
        coords = np.indices(shape, dtype=np.int64).reshape(len(shape), -1).T
        for rep in range(fmap.replicate):
            t, r = fmap.thread[rep].reshape(-1), fmap.index.reshape(-1)
            cells[t, r] = coords
            held[t, r] = True
        return TableLayout(shape, threads, cells, held)

    @property
    def nregs(self) -> int:
        return int(self.cells.shape[1])

    @property
    def table(self) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[override]
        return self.cells, self.held

    def coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        # fitted on the threads holding register r when they are the first n (a power of two):
        # the others are masked by `valid`, as a strided layout's past-the-end registers are
        col = self.held[:, r]
        n = int(col.sum())
        prefix = 0 < n < self.threads and n & (n - 1) == 0 and col[:n].all()
        out = []
        for k in range(len(self.shape)):
            values = self.cells[:, r, k]
            terms = bit_linear([int(v) for v in values[:n]]) if prefix else None
            out.append(lane_expr(values[:n], tx, terms) if terms is not None else lane_expr(values, tx))
        return tuple(out)

    def valid(self, tx: Var, r: int) -> Expr | None:
        col = self.held[:, r]
        if col.all():
            return None
        n = int(col.sum())
        if col[:n].all():  # the first n threads
            return binop("lt", tx, n)
        return binop("ne", lane_expr(col.astype(np.int64), tx), 0)


@dataclass(frozen=True)
class SliceLayout(Layout):
    """`parent` with dimension `dim` removed: each thread keeps one register per distinct
    remaining coordinate it holds (replicated over the threads that shared the removed dim)."""

    parent: Layout
    dim: int

    @property
    def shape(self) -> tuple:  # type: ignore[override]
        return tuple(s for k, s in enumerate(self.parent.shape) if k != self.dim)

    @property
    def threads(self) -> int:  # type: ignore[override]
        return self.parent.threads

    @functools.cached_property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        """Parent registers per slice register (the same grouping for every thread)."""
        g = slice_groups(self.parent, self.dim)
        if g is None:
            raise ValueError("no uniform slice")
        return g

    @property
    def nregs(self) -> int:
        return len(self.groups)

    def coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        c = self.parent.coords(tx, self.groups[r][0])
        return tuple(x for k, x in enumerate(c) if k != self.dim)

    def raw_coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        c = self.parent.raw_coords(tx, self.groups[r][0])
        return tuple(x for k, x in enumerate(c) if k != self.dim)


def slice_groups(parent: Layout, dim: int) -> tuple[tuple[int, ...], ...] | None:
    """Group the parent's registers by their coordinates without `dim`, when the grouping is the
    same for every thread and every register is valid; else None."""
    coords, valid = parent.table
    if not valid.all():
        return None
    keep = [k for k in range(coords.shape[-1]) if k != dim]
    sub = coords[:, :, keep]
    groups: dict[tuple, list[int]] = {}
    order: list[tuple] = []
    for r in range(parent.nregs):
        key = tuple(sub[0, r])
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(r)
    out = tuple(tuple(groups[k]) for k in order)
    reps = [g[0] for g in out]
    for g in out:
        for r in g[1:]:
            if not np.array_equal(sub[:, r], sub[:, g[0]]):
                return None
    for i, a in enumerate(reps):
        for b in reps[i + 1:]:
            if np.any(np.all(sub[:, a] == sub[:, b], axis=-1)):
                return None
    return out


def equivalent(a: Layout, b: Layout) -> bool:
    """True when both layouts put the same element in the same register of the same thread."""
    if a == b:
        return True
    if a.threads != b.threads or a.nregs != b.nregs or tuple(a.shape) != tuple(b.shape):
        return False
    (ca, va), (cb, vb) = a.table, b.table
    return bool(np.array_equal(va, vb) and np.array_equal(ca[va], cb[vb]))


def slice_layout(parent: Layout, dim: int) -> Layout:
    """The layout of `parent` reduced along `dim`: a SliceLayout, else replicated everywhere."""
    if len(parent.shape) == 1:
        return ReplicatedLayout((1,), parent.threads)
    if slice_groups(parent, dim) is not None:
        return SliceLayout(parent, dim)
    shape = tuple(s for k, s in enumerate(parent.shape) if k != dim)
    return ReplicatedLayout(shape, parent.threads)


def run_length(shape: tuple, threads: int, itemsize: int, vector_bytes: int) -> int:
    """Elements per thread run of the default layout: one `vector_bytes` access of the
    narrowest memory dtype (`itemsize` bytes) moved through it, halved until the runs tile the
    last dimension and every thread gets whole runs (1 when nothing fits)."""
    n = 1
    for s in shape:
        n *= s
    vec = max(1, vector_bytes // max(1, itemsize))
    while vec > 1 and (shape[-1] % vec or n % (threads * vec)):
        vec //= 2
    return vec


def default_layout(shape: tuple, threads: int, itemsize: int = 4, vector_bytes: int = 16) -> Layout:
    """The layout of a fragment no gemm or loop constrains: strided, in runs of `run_length`.

    `itemsize` is the narrowest dtype of the global/shared memory read or written through this
    layout (the fragment's own dtype when none is): each run is then one widest access of that
    memory; a register-side dtype wider than it (fp32 values of fp16 data) is never the limit,
    since registers are not accessed as vectors (`vectorize_group` splits wider memory runs)."""
    return StridedLayout(tuple(shape), threads, run_length(tuple(shape), threads, itemsize, vector_bytes))


def has_runs(layout: Layout, vec: int) -> bool:
    """True when every thread's registers come in aligned runs of `vec` consecutive elements
    along the last dimension (strided layouts with vec, tensor-core accumulators with 2)."""
    key = (layout, vec)
    if key not in _RUNS:
        coords, valid = layout.table
        ok = layout.nregs % vec == 0
        for r in range(0, layout.nregs, vec) if ok else ():
            base, v = coords[:, r], valid[:, r]
            if np.any(base[v, -1] % vec != 0):
                ok = False
                break
            for k in range(1, vec):
                want = base.copy()
                want[:, -1] += k
                if not np.array_equal(valid[:, r + k], v) or not np.array_equal(coords[v, r + k], want[v]):
                    ok = False
                    break
            if not ok:
                break
        _RUNS[key] = ok
    return _RUNS[key]


_RUNS: dict = {}
