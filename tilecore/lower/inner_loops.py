"""Fragments indexed by the variables of serial/unrolled loops nested in a T.Parallel nest.

`for i, j in T.Parallel(a, b): for k in T.unroll(c): F[i, j, k] = ...` writes, in iteration
(i, j), a whole row F[i, j, :]. TileLang's rule (its `CompleteBufferFragment`) is that the
thread running iteration (i, j) holds that whole row: F's layout is the loop's layout over
(i, j) with the dimensions the inner loops index kept per thread, as consecutive registers
(`ExtendedLayout`). Layout inference gives F that layout; lowering partitions the loop by the
loop layout and addresses F[i, j, k] as register `r * E + k` of the thread's iteration r, an
index that may depend on k at run time (the loop stays a loop; T.unroll unrolls it later).

Without this rule the lowering dealt the loop by F's own registers and guarded each with
`k == <coordinate>` before the loop that binds k: the "used before it is bound" failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TileError
from ..ir.buffer import Buffer
from ..ir.expr import Expr, Var, binop, const
from ..ir.stmt import For, Stmt, Store
from ..ir.visit import walk
from .layout import Layout, equivalent


@dataclass(frozen=True)
class ExtendedLayout(Layout):
    """`base` (a layout over a T.Parallel nest's extents) placed at the buffer dimensions
    `loop_dims` (loop dimension k at buffer dimension loop_dims[k]); every other dimension is
    held whole by the thread, register r = rb * E + e for base register rb and the row-major
    number e of the remaining coordinates (E of them)."""

    base: Layout
    shape: tuple
    loop_dims: tuple

    @property
    def threads(self) -> int:  # type: ignore[override]
        return self.base.threads

    @property
    def extra_dims(self) -> tuple[int, ...]:
        """The buffer dimensions held whole by each thread, in order."""
        return tuple(d for d in range(len(self.shape)) if d not in self.loop_dims)

    @property
    def per_row(self) -> int:
        """E: registers per base register."""
        n = 1
        for d in self.extra_dims:
            n *= self.shape[d]
        return n

    @property
    def nregs(self) -> int:
        return self.base.nregs * self.per_row

    def _place(self, base_coords, e: int) -> tuple[Expr, ...]:
        out: list[Expr] = [const(0)] * len(self.shape)
        for k, d in enumerate(self.loop_dims):
            out[d] = base_coords[k]
        for d in reversed(self.extra_dims):
            out[d] = const(e % self.shape[d])
            e //= self.shape[d]
        return tuple(out)

    def coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        return self._place(self.base.coords(tx, r // self.per_row), r % self.per_row)

    def raw_coords(self, tx: Var, r: int) -> tuple[Expr, ...]:
        return self._place(self.base.raw_coords(tx, r // self.per_row), r % self.per_row)

    def valid(self, tx: Var, r: int) -> Expr | None:
        return self.base.valid(tx, r // self.per_row)


def inner_loop_vars(body: Stmt) -> set[int]:
    """ids of the variables of the non-parallel loops inside `body`."""
    return {id(n.var) for n in walk(body) if isinstance(n, For) and n.kind != "parallel"}


def _uses(e: Expr, ids: set[int]) -> bool:
    return any(isinstance(n, Var) and id(n) in ids for n in walk(e))


def loop_dims_of(indices, vars_) -> tuple[int, ...] | None:
    """The index position of each loop variable, when each is one whole index exactly once."""
    out = []
    for v in vars_:
        hits = [d for d, i in enumerate(indices) if i is v]
        if len(hits) != 1:
            return None
        out.append(hits[0])
    return tuple(out)


def inner_indexed_writes(body: Stmt, vars_) -> list[tuple[Buffer, tuple[int, ...], object]]:
    """(fragment, loop_dims, loc) of each fragment store in the body of the T.Parallel nest over
    `vars_` that indexes each loop variable once, as a whole index, and indexes another dimension
    with a variable of a loop inside the body (so one iteration writes several elements)."""
    inner = inner_loop_vars(body)
    if not inner:
        return []
    out = []
    for n in walk(body):
        if not isinstance(n, Store) or n.buffer.scope != "fragment":
            continue
        dims = loop_dims_of(n.indices, vars_)
        if dims is None or not all(isinstance(s, int) for s in n.buffer.shape):
            continue
        if any(_uses(i, inner) for d, i in enumerate(n.indices) if d not in dims):
            out.append((n.buffer, dims, n.loc))
    return out


def extend(base: Layout, buf: Buffer, loop_dims: tuple[int, ...]) -> ExtendedLayout:
    """The layout of `buf` whose loop dimensions follow `base` and whose other dimensions each
    thread holds whole (see the module docstring)."""
    return ExtendedLayout(base, tuple(buf.shape), tuple(loop_dims))


def extended_fragments(ctx, body: Stmt, vars_, loop_layout: Layout) -> list[tuple[Buffer, tuple]]:
    """(fragment, loop_dims) for the fragments `body` accesses whose layout extends
    `loop_layout` (so this loop's iteration owns their rows)."""
    from .parallel import fragment_accesses

    out, seen = [], set()
    for buf, _, _, _ in fragment_accesses(body):
        if id(buf) in seen:
            continue
        seen.add(id(buf))
        lay = ctx.layouts.get(buf)
        if isinstance(lay, ExtendedLayout) and len(lay.loop_dims) == len(vars_) \
                and equivalent(lay.base, loop_layout):
            out.append((buf, lay.loop_dims))
    return out


def bind_rows(bl, frags, coords, r: int) -> None:
    """Tell BodyLowerer `bl` (iteration register `r`, loop variables at `coords`) that it owns
    the rows of the extended fragments `frags` (from `extended_fragments`)."""
    for buf, dims in frags:
        bl.rows[id(buf)] = (dims, tuple(bl.ctx.simp(c) for c in coords), r)


def row_register(bl, buf: Buffer, idx) -> Expr | None:
    """The register of `buf[idx]` (indices already substituted) when this iteration owns the row
    (`bind_rows`): r * E + the row-major number of the other indices; else None."""
    own = bl.rows.get(id(buf))
    if own is None:
        return None
    dims, coords, r = own
    if any(not (idx[d] is c or idx[d] == c) for d, c in zip(dims, coords)):
        return None
    lay: ExtendedLayout = bl.ctx.layout(buf)
    off: Expr = const(r * lay.per_row)
    stride = 1
    for d in reversed(lay.extra_dims):
        off = off + (idx[d] if stride == 1 else binop("mul", idx[d], stride))
        stride *= lay.shape[d]
    return bl.ctx.simp(off)


def check_inner_writes(ctx, writes, loop_layout: Layout, origin: str) -> None:
    """A located TileError for an inner-indexed write (`inner_indexed_writes`) to a fragment whose
    layout, fixed elsewhere, does not keep this loop's rows in the threads that run them."""
    for buf, dims, loc in writes:
        lay = ctx.layouts.get(buf)
        if isinstance(lay, ExtendedLayout) and lay.loop_dims == dims and equivalent(lay.base, loop_layout):
            continue
        raise TileError(
            f"layout conflict: this T.Parallel loop, distributed by {origin}, writes whole rows of "
            f"fragment {buf.name} through an inner loop, but {buf.name}'s layout (fixed by "
            f"{ctx.layouts.origin(buf)}) spreads a row over several threads", loc,
            hint=f"write {buf.name} in a T.Parallel loop over all of its dimensions, or give the "
                 f"inner loop's results a fragment of their own")
