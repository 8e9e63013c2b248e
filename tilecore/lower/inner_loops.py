"""Fragments indexed by the variables of serial/unrolled loops nested in a T.Parallel nest.

`for i, j in T.Parallel(a, b): for k in T.unroll(c): F[i, j, k] = ...` writes, in iteration
(i, j), a whole row F[i, j, :]. TileLang's rule (its `CompleteBufferFragment`) is that the
thread running iteration (i, j) holds that whole row: F's layout is the loop's layout over
(i, j) with the dimensions the inner loops index kept per thread, as consecutive registers
(`ExtendedLayout`). Layout inference gives F that layout; lowering partitions the loop by the
loop layout and addresses F[i, j, k] as register `r * E + k` of the thread's iteration r, an
index that may depend on k at run time (the loop stays a loop; T.unroll unrolls it later).

The same holds for a loop variable split by an inner one inside one index, as dequantization
writes it: `for i, j in T.Parallel(a, b): for v in T.unroll(E): F[i, j * E + v] = ...` (F of
shape (a, b * E)) writes F[i, j*E : j*E + E] in iteration (i, j); the thread holds those E
elements as consecutive registers (`ExtendedLayout.splits`). The inner loop must run 0..E with
step 1, so j * E + v names each element once.

Without this rule the lowering dealt the loop by F's own registers and guarded each with
`k == <coordinate>` before the loop that binds k: the "used before it is bound" failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TileError
from ..ir.buffer import Buffer
from ..ir.expr import BinOp, Expr, Load, Var, binop, const, const_int
from ..ir.stmt import For, Stmt, Store
from ..ir.visit import walk
from .layout import Layout, equivalent


@dataclass(frozen=True)
class ExtendedLayout(Layout):
    """`base` (a layout over a T.Parallel nest's extents) placed at the buffer dimensions
    `loop_dims` (loop dimension k at buffer dimension loop_dims[k], as coordinate
    `c * splits[k] + low` with `low` held by the thread when splits[k] > 1); every other
    dimension is held whole by the thread. Register r = rb * E + e for base register rb and the
    row-major number e of the held coordinates (`held`, E of them)."""

    base: Layout
    shape: tuple
    loop_dims: tuple
    splits: tuple = ()  # per loop dimension; () means 1 everywhere

    @property
    def threads(self) -> int:  # type: ignore[override]
        return self.base.threads

    @property
    def extra_dims(self) -> tuple[int, ...]:
        """The buffer dimensions held whole by each thread, in order."""
        return tuple(d for d in range(len(self.shape)) if d not in self.loop_dims)

    def split(self, k: int) -> int:
        """The split of loop dimension k (1: the loop variable is the whole index)."""
        return self.splits[k] if self.splits else 1

    @property
    def held(self) -> tuple[tuple[int, int], ...]:
        """(buffer dimension, size) of each coordinate the thread holds, in dimension order: the
        extra dimensions whole, the low part of each split loop dimension."""
        out = []
        for d in range(len(self.shape)):
            if d not in self.loop_dims:
                out.append((d, self.shape[d]))
            elif self.split(self.loop_dims.index(d)) > 1:
                out.append((d, self.split(self.loop_dims.index(d))))
        return tuple(out)

    @property
    def per_row(self) -> int:
        """E: registers per base register."""
        n = 1
        for _, size in self.held:
            n *= size
        return n

    @property
    def nregs(self) -> int:
        return self.base.nregs * self.per_row

    def _place(self, base_coords, e: int) -> tuple[Expr, ...]:
        out: list[Expr] = [const(0)] * len(self.shape)
        for k, d in enumerate(self.loop_dims):
            s = self.split(k)
            out[d] = base_coords[k] if s == 1 else binop("mul", base_coords[k], const(s))
        for d, size in reversed(self.held):
            low = const(e % size)
            e //= size
            out[d] = low if d not in self.loop_dims else binop("add", out[d], low)
        return tuple(out)

    def coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        return self._place(self.base.coords(tx, r // self.per_row), r % self.per_row)

    def raw_coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        return self._place(self.base.raw_coords(tx, r // self.per_row), r % self.per_row)

    def valid(self, tx: Var, r: int) -> Expr | None:
        return self.base.valid(tx, r // self.per_row)


@dataclass(frozen=True)
class RowWrite:
    """A fragment store that writes a whole row per iteration of its T.Parallel nest
    (`inner_indexed_writes`): loop dimension k at buffer dimension `dims[k]`, split `splits[k]`."""

    buf: Buffer
    dims: tuple
    splits: tuple
    loc: object


def inner_loop_vars(body: Stmt) -> set[int]:
    """ids of the variables of the non-parallel loops inside `body`."""
    return {id(n.var) for n in walk(body) if isinstance(n, For) and n.kind != "parallel"}


def _inner_loops(body: Stmt) -> dict[int, For]:
    """The non-parallel loops inside `body`, by the id of their variable."""
    return {id(n.var): n for n in walk(body) if isinstance(n, For) and n.kind != "parallel"}


def _uses(e: Expr, ids: set[int]) -> bool:
    return any(isinstance(n, Var) and id(n) in ids for n in walk(e))


def split_index(e: Expr, v: Var, inner: dict[int, For]) -> tuple[int, Var] | None:
    """(E, w) when `e` is `v * E + w` (either operand order) for an inner loop `w` over 0..E
    with step 1 and a constant E > 1, so the index names each of E elements once; else None."""
    if not isinstance(e, BinOp) or e.op != "add":
        return None
    for mul, w in ((e.a, e.b), (e.b, e.a)):
        if not isinstance(w, Var) or id(w) not in inner or not isinstance(mul, BinOp) or mul.op != "mul":
            continue
        for x, f in ((mul.a, mul.b), (mul.b, mul.a)):
            factor = const_int(f)
            loop = inner[id(w)]
            if x is v and factor is not None and factor > 1 and const_int(loop.start) == 0 \
                    and const_int(loop.stop) == factor and const_int(loop.step) == 1:
                return factor, w
    return None


def loop_dims_of(indices, vars_, inner: dict[int, For] | None = None):
    """(dims, splits): the index position of each loop variable, when each is one whole index
    (split 1) or, with `inner`, split by an inner loop inside one index (`split_index`), exactly
    once; else None."""
    dims, splits = [], []
    for v in vars_:
        hits = [(d, 1) for d, i in enumerate(indices) if i is v]
        if inner:
            hits += [(d, sp[0]) for d, i in enumerate(indices) if (sp := split_index(i, v, inner))]
        if len(hits) != 1:
            return None
        dims.append(hits[0][0])
        splits.append(hits[0][1])
    return tuple(dims), tuple(splits)


def inner_indexed_writes(body: Stmt, vars_) -> list[RowWrite]:
    """Each fragment store in the body of the T.Parallel nest over `vars_` that indexes each loop
    variable once, as a whole index or split by an inner loop (`split_index`), and indexes
    another dimension with a variable of a loop inside the body or splits one (so one iteration
    writes several elements)."""
    inner = _inner_loops(body)
    if not inner:
        return []
    ids = set(inner)
    out = []
    for n in walk(body):
        if not isinstance(n, Store) or n.buffer.scope != "fragment":
            continue
        found = loop_dims_of(n.indices, vars_, inner)
        if found is None or not all(isinstance(s, int) for s in n.buffer.shape):
            continue
        dims, splits = found
        if any(s > 1 for s in splits) or any(_uses(i, ids) for d, i in enumerate(n.indices) if d not in dims):
            out.append(RowWrite(n.buffer, dims, splits, n.loc))
    return out


def extend(base: Layout, w: RowWrite) -> ExtendedLayout | None:
    """The layout of `w.buf` whose loop dimensions follow `base` and whose other dimensions (and
    the low parts of split ones) each thread holds whole (see the module docstring); None when a
    split dimension's size is not the loop's extent times its split."""
    shape = tuple(w.buf.shape)
    if any(s > 1 and base.shape[k] * s != shape[d] for k, (d, s) in enumerate(zip(w.dims, w.splits))):
        return None
    splits = w.splits if any(s > 1 for s in w.splits) else ()
    return ExtendedLayout(base, shape, tuple(w.dims), splits)


def _split_patterns(body: Stmt, buf: Buffer, lay: ExtendedLayout, vars_) -> dict:
    """buffer dimension -> [(index expression, inner variable)] of the accesses of `buf` in
    `body` that index a split loop dimension as `split_index` reads it."""
    if not lay.splits:
        return {}
    inner = _inner_loops(body)
    out: dict = {}
    for n in walk(body):
        if not isinstance(n, (Store, Load)) or n.buffer is not buf:
            continue
        for k, d in enumerate(lay.loop_dims):
            sp = split_index(n.indices[d], vars_[k], inner) if lay.split(k) > 1 else None
            if sp is not None and sp[0] == lay.split(k):
                out.setdefault(d, []).append((n.indices[d], sp[1]))
    return out


def extended_fragments(ctx, body: Stmt, vars_, loop_layout: Layout) -> list[tuple]:
    """(fragment, loop_dims, split patterns) for the fragments `body` accesses whose layout
    extends `loop_layout` (so this loop's iteration owns their rows)."""
    from .parallel import fragment_accesses

    out, seen = [], set()
    for buf, _, _, _ in fragment_accesses(body):
        if id(buf) in seen:
            continue
        seen.add(id(buf))
        lay = ctx.layouts.get(buf)
        if isinstance(lay, ExtendedLayout) and len(lay.loop_dims) == len(vars_) \
                and equivalent(lay.base, loop_layout):
            out.append((buf, lay.loop_dims, _split_patterns(body, buf, lay, vars_)))
    return out


def bind_rows(bl, frags, coords, r: int) -> None:
    """Tell BodyLowerer `bl` (iteration register `r`, loop variables at `coords`) that it owns
    the rows of the extended fragments `frags` (from `extended_fragments`); a split dimension's
    index expressions are kept as this iteration computes them, each with its inner variable."""
    for buf, dims, patterns in frags:
        splits = {d: [(bl.expr(e), w) for e, w in pats] for d, pats in patterns.items()}
        bl.rows[id(buf)] = (dims, tuple(bl.ctx.simp(c) for c in coords), r, splits)


def row_register(bl, buf: Buffer, idx) -> Expr | None:
    """The register of `buf[idx]` (indices already substituted) when this iteration owns the row
    (`bind_rows`): r * E + the row-major number of the held coordinates; else None."""
    own = bl.rows.get(id(buf))
    if own is None:
        return None
    dims, coords, r, splits = own
    lay: ExtendedLayout = bl.ctx.layout(buf)
    low: dict[int, Expr] = {}
    for k, (d, c) in enumerate(zip(dims, coords)):
        if lay.split(k) == 1:
            if not (idx[d] is c or idx[d] == c):
                return None
            continue
        w = next((w for e, w in splits.get(d, ()) if idx[d] is e or idx[d] == e), None)
        if w is None:
            return None
        low[d] = w
    off: Expr = const(r * lay.per_row)
    stride = 1
    for d, size in reversed(lay.held):
        x = low.get(d, idx[d])
        off = off + (x if stride == 1 else binop("mul", x, stride))
        stride *= size
    return bl.ctx.simp(off)


def check_inner_writes(ctx, writes, loop_layout: Layout, origin: str) -> None:
    """A located TileError for an inner-indexed write (`inner_indexed_writes`) to a fragment whose
    layout, fixed elsewhere, does not keep this loop's rows in the threads that run them."""
    for w in writes:
        buf, loc = w.buf, w.loc
        lay = ctx.layouts.get(buf)
        same = isinstance(lay, ExtendedLayout) and lay.loop_dims == w.dims and \
            tuple(lay.split(k) for k in range(len(w.dims))) == w.splits
        if same and equivalent(lay.base, loop_layout):
            continue
        raise TileError(
            f"layout conflict: this T.Parallel loop, distributed by {origin}, writes whole rows of "
            f"fragment {buf.name} through an inner loop, but {buf.name}'s layout (fixed by "
            f"{ctx.layouts.origin(buf)}) spreads a row over several threads", loc,
            hint=f"write {buf.name} in a T.Parallel loop over all of its dimensions, or give the "
                 f"inner loop's results a fragment of their own")
