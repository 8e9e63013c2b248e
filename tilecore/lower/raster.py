"""Block rasterization (`T.use_swizzle`): the block indices remapped in panels for L2 reuse.

Blocks are launched in linear order `L = by * gx + bx`. With order "row" and panel size p, the
grid's rows are cut into panels of p rows (the last one may be shorter, h = min(p, gy - p * P)
rows); inside panel P the linear position o = L - P * p * gx walks down the panel's rows first:
`by' = P * p + o % h`, `bx' = o // h`. Consecutive blocks then cover p rows x a few columns of
the output instead of one long row, so they share A row-tiles and B column-tiles in L2. Every
panel maps its h * gx positions one to one onto its h rows x gx columns, so the remap is a
bijection of the grid for any gx, gy (ragged ones included). Order "col" cuts panels of p grid
columns instead (the launch order is the same). Further grid dimensions keep their indices.
"""

from __future__ import annotations

from ..errors import TileShapeError
from ..ir.expr import Expr, Var, binop, const_int
from ..ir.smem_layout import RASTER_ANNOTATION
from ..ir.stmt import KernelLaunch, LetStmt, SeqStmt
from ..ir.visit import substitute


def remap(bx: Expr, by: Expr, gx: Expr, gy: Expr, panel: int, order: str) -> tuple[Expr, Expr]:
    """(bx', by'): the rasterized block indices of block (bx, by) in a gx x gy grid."""
    lin = by * gx + bx  # the launch order
    across, along = (gy, gx) if order == "row" else (gx, gy)  # panels cut `across`
    per = along * panel
    p = binop("div", lin, per)
    o = lin - p * per
    h = binop("min", across - p * panel, panel)
    first, second = p * panel + binop("mod", o, h), binop("div", o, h)
    return (second, first) if order == "row" else (first, second)


def rasterize(launch: KernelLaunch, var_bounds: dict) -> KernelLaunch:
    """`launch` with its body reading rasterized block indices (new variables bound at the top of
    the body; `var_bounds` learns they are non-negative), or unchanged without `T.use_swizzle`."""
    spec = next((v for k, v in launch.annotations if k == RASTER_ANNOTATION), None)
    if spec is None:
        return launch
    panel, order, loc = spec
    if len(launch.grid) < 2:
        raise TileShapeError(f"T.use_swizzle rasterizes a 2-D grid; this T.Kernel has "
                             f"{len(launch.grid)} grid dimension", loc,
                             hint="launch a 2-D grid (T.Kernel(gx, gy, ...)) or drop T.use_swizzle")
    bx, by = launch.block_vars[:2]
    gx, gy = launch.grid[:2]
    if any(const_int(g) == 1 for g in (gx, gy)):
        return launch  # one row or column: the launch order is already a single panel
    nx, ny = remap(bx, by, gx, gy, panel, order)
    vx, vy = Var(f"{bx.name}_r", bx.dtype), Var(f"{by.name}_r", by.dtype)
    for v, n in ((vx, gx), (vy, gy)):
        hi = const_int(n)
        var_bounds[id(v)] = (0, None if hi is None else hi - 1)
    body = substitute(launch.body, {bx: vx, by: vy})
    new_body = SeqStmt((LetStmt(vx, nx, loc), LetStmt(vy, ny, loc), body), launch.body.loc)
    return KernelLaunch(launch.grid, launch.block_vars, launch.threads, launch.allocs, new_body,
                        launch.annotations, launch.loc)
