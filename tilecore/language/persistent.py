"""`T.Persistent(domain, wave_size, index, group_size=8)`: TileLang's persistent tile loop.

A persistent kernel launches `wave_size` blocks (one per SM) and each walks the tiles of
`domain` (a grid of tile coordinates) in waves: `for bx, by in T.Persistent([m, n], sms, bid)`.
Tile `t = w * wave_size + index` of wave `w` is decomposed in a grouped order (TileLang's): the
last dimension is cut into groups of `group_size` (at most its extent), and the tiles run
group by group, the other dimensions in order within a group, so neighbouring blocks share
rows of the first operand. Tiles past the (padded) domain are skipped.

The frontend lowers it to plain IR: a serial loop over the waves, the coordinates as let
bindings, and an `if` guarding the body; every target runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import TileBindingError, TileTypeError
from ..ir.expr import Var, as_expr, binop, const_int
from ..ir.stmt import For, IfThenElse, LetStmt, SeqStmt
from .builder import builtin


@dataclass(frozen=True)
class PersistentSpec:
    """The arguments of one `T.Persistent(...)` loop (see the module docstring)."""

    domain: tuple
    wave_size: object
    index: object
    group_size: object


@builtin
def Persistent(domain, wave_size, index, group_size=8) -> PersistentSpec:
    """A persistent loop over the tiles of `domain`: `for bx, by in T.Persistent([m, n], sms,
    block_id)` (see `tilecore.language.persistent`)."""
    dom = tuple(as_expr(d) for d in (domain if isinstance(domain, (list, tuple)) else [domain]))
    if not dom:
        raise TileTypeError("T.Persistent needs a non-empty domain", hint="pass [m_tiles, n_tiles]")
    return PersistentSpec(dom, as_expr(wave_size), as_expr(index), as_expr(group_size))


def lower(parser, node, spec: PersistentSpec, names: list, scope_cls) -> None:
    """Emit the waves loop for `for <names> in T.Persistent(...)` (called by the parser)."""
    if len(names) != len(spec.domain):
        raise TileBindingError(
            f"the loop binds {len(names)} name(s) but T.Persistent's domain has "
            f"{len(spec.domain)} dimension(s)", parser.loc(node.target),
            hint="bind one name per domain dimension: `for bx, by in T.Persistent([m, n], ...)`")
    b = parser.b
    dom = spec.domain
    last = dom[-1]
    g = spec.group_size
    gc, lc = const_int(g), const_int(last)
    if gc is not None and lc is not None:
        g = as_expr(max(1, min(gc, lc)))
    else:
        g = binop("max", as_expr(1), binop("min", g, last))
    grouped = [binop("div", binop("add", last, binop("sub", g, 1)), g)] + list(dom[:-1]) + [g]
    padded = grouped[0]
    for d in grouped[1:]:
        padded = binop("mul", padded, d)
    waves = binop("div", binop("add", padded, binop("sub", spec.wave_size, 1)), spec.wave_size)
    w = Var(b.unique_name("w"), dt.int32)
    loc = parser.loc(node)
    b.blocks.append([])
    parser.scopes.append(scope_cls("loop"))
    try:
        rem = binop("add", binop("mul", w, spec.wave_size), spec.index)
        tile = rem
        idxs = [None] * len(grouped)
        for i in range(len(grouped) - 1, 0, -1):
            idxs[i] = binop("mod", tile, grouped[i])
            tile = binop("div", tile, grouped[i])
        idxs[0] = tile
        coords = list(idxs[1:-1]) + [binop("add", binop("mul", idxs[0], g), idxs[-1])]
        guard = binop("and", binop("lt", rem, padded), binop("lt", coords[-1], last))
        b.blocks.append([])
        parser.scopes.append(scope_cls("if"))
        try:
            for n, c in zip(names, coords):
                var = Var(b.unique_name(n.id), dt.int32)
                parser.let_vars.add(var)
                b.let_values[id(var)] = (var, c)
                b.emit(LetStmt(var, c, loc))
                parser.scopes[-1].vars[n.id] = var
            for s in node.body:
                parser.stmt(s)
        finally:
            parser.scopes.pop()
            then = SeqStmt(tuple(b.blocks.pop()))
        b.emit(IfThenElse(guard, then, None, loc))
    finally:
        parser.scopes.pop()
        body = SeqStmt(tuple(b.blocks.pop()))
    b.emit(For(w, as_expr(0), waves, 1, "serial", body, (), loc))
