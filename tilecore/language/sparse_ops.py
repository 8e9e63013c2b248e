"""`T.gemm_sp`: TileLang's 2:4 structured-sparse gemm (issue 14; `gemm_sp/example_gemm_sp.py`).

`A_sparse` holds, per row, the kept values of each group of `group` consecutive K elements
(2 of 4 for 8- and 16-bit types, 1 of 2 for 32-bit ones), and `E` their positions as TileLang's
"natural row-major" metadata (`tilecore.cuda.intrinsics.sparse_layout`): one 4-bit chunk per
group, bits [1:0] the first kept element's index in the group of 4 and bits [3:2] the second's
(32-bit types count in 16-bit halves: chunk 0b0100 keeps element 0, 0b1110 element 1), the
chunks of `E.bits // 4` consecutive groups packed little-endian into one element of `E`.

    C (+)= dense(A_sparse, E) @ op(B)

tilecore writes it as what it means on every target: a `T.Parallel` loop rebuilds the dense A
tile in a shared scratch buffer (zeros where nothing is kept; if both indices of a group name
one element, the first value wins), then a `T.gemm`. On a GPU that costs a shared tile and
does not use sparse tensor cores (`mma.sp`): the values are exact, the speed-up is not had.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileShapeError, TileTypeError
from ..ir.buffer import Buffer, Region
from ..ir.expr import Expr, Load, Var, as_expr, binop, cast, const, select
from ..ir.stmt import For, SeqStmt, Store
from .builder import builtin, current
from .ops import GemmWarpPolicy, gemm
from .refs import region_of

BITS_PER_GROUP = 4  # one metadata chunk per group


def group_config(dtype) -> tuple[int, int]:
    """(kept, group): how many of each group of consecutive K elements `A_sparse` keeps."""
    d = dt.as_dtype(dtype)
    if d.bits == 32:
        return 1, 2
    if d.bits in (8, 16):
        return 2, 4
    raise TileTypeError(f"T.gemm_sp has no 2:4 sparsity for {d}", current().loc,
                        hint="use float16, bfloat16, int8, float8 or float32 operands")


def e_factor(a_dtype, meta_dtype) -> int:
    """How many dense K elements of A one metadata element describes."""
    return dt.as_dtype(meta_dtype).bits // BITS_PER_GROUP * group_config(a_dtype)[1]


def _plane(r: Region, what: str) -> tuple[int, int, tuple]:
    """(rows, cols, dims) of a 2-D tile region: the two non-unit dimensions (or the last two)."""
    dims = tuple(k for k, e in enumerate(r.extents) if e != 1)
    if len(dims) > 2:
        raise TileShapeError(f"T.gemm_sp {what} ({r.buffer.name}) must be a 2-D tile, got {r.extents}",
                             current().loc, hint="pass 2-D tiles")
    if len(dims) < 2:
        dims = tuple(range(len(r.extents)))[-2:]
    return r.extents[dims[0]], r.extents[dims[1]], dims


def _at(r: Region, dims: tuple, i: Expr, j: Expr) -> tuple:
    idx = list(r.starts)
    idx[dims[0]] = binop("add", idx[dims[0]], i)
    idx[dims[1]] = binop("add", idx[dims[1]], j)
    return tuple(idx)


@builtin
def gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False,
            policy=GemmWarpPolicy.Square, clear_accum=False, k_pack=1, wg_wait=0) -> None:
    """C (+)= dense(A_sparse, E) @ op(B): 2:4 structured-sparse A with TileLang's row-major
    metadata E (decoded into a shared tile, then T.gemm)."""
    b = current()
    for name, v in (("transpose_A", transpose_A), ("transpose_E", transpose_E)):
        if v:
            raise TileShapeError(f"T.gemm_sp({name}=True) is not supported", b.loc,
                                 hint="store A_sparse and E row-major (M rows) and transpose B instead")
    ra, re_ = region_of(A_sparse, None, "gemm_sp A_sparse"), region_of(E, None, "gemm_sp E")
    a, e = ra.buffer, re_.buffer
    if not e.dtype.is_int:
        raise TileTypeError(f"T.gemm_sp metadata {e.name} has dtype {e.dtype}", b.loc,
                            hint="E holds integer metadata (int8 / int16 / int32)")
    kept, group = group_config(a.dtype)
    m, ks, adims = _plane(ra, "A_sparse")
    me, ke, edims = _plane(re_, "E")
    k = ks * group // kept
    quad = e.dtype.bits // BITS_PER_GROUP  # groups per metadata element
    if me != m or ke * quad * group != k:
        raise TileShapeError(f"T.gemm_sp: E {e.name}{re_.extents} does not describe A_sparse "
                             f"{a.name}{ra.extents} ({m} x {k} dense, {k // (quad * group)} {e.dtype} "
                             "per row expected)", b.loc,
                             hint="E has K // e_factor columns (sparse_layout.get_e_factor)")
    dense = b.allocate(Buffer(b.unique_name(f"{a.name}_dense"), (m, k), a.dtype, "shared"))
    i, kk = Var(b.unique_name("sp_i"), dt.int32), Var(b.unique_name("sp_k"), dt.int32)
    g = binop("div", kk, group)  # the group of dense column kk, its position p inside it
    p = binop("mod", kk, group)
    # the group's 4-bit chunk with division and remainder (written when the cpu backend had no
    # bit operations): the element made non-negative, divided by 16^(g % quad)
    wide = dt.int64 if e.dtype.bits >= 32 else dt.int32
    meta = cast(Load(e, _at(re_, edims, i, binop("div", g, quad))), wide)
    if e.dtype.kind == "int":  # signed: the bit pattern as its unsigned value
        meta = select(binop("lt", meta, 0), binop("add", meta, const(1 << e.dtype.bits, wide)), meta)
    slot = binop("mod", g, quad)
    scale = const(1, wide)
    for j in range(1, quad):
        scale = select(binop("eq", slot, j), const(16 ** j, wide), scale)
    chunk = binop("mod", binop("div", meta, scale), 16)
    zero = cast(as_expr(0), a.dtype)
    if kept == 2:
        idx0, idx1 = binop("mod", chunk, 4), binop("div", chunk, 4)
        v0 = Load(a, _at(ra, adims, i, binop("mul", g, 2)))
        v1 = Load(a, _at(ra, adims, i, binop("add", binop("mul", g, 2), 1)))
        value = select(binop("eq", p, idx0), v0, select(binop("eq", p, idx1), v1, zero))
    else:  # 32-bit: indices count 16-bit halves, the kept element is idx0 // 2
        pos = binop("div", binop("mod", chunk, 4), 2)
        value = select(binop("eq", p, pos), Load(a, _at(ra, adims, i, g)), zero)
    loop = For(i, const(0), const(m), 1, "parallel",
               For(kk, const(0), const(k), 1, "parallel",
                   SeqStmt((Store(dense, (i, kk), value, b.loc),), b.loc), (), b.loc), (), b.loc)
    b.emit(loop)
    gemm(dense, B, C, transpose_B=transpose_B, policy=policy, clear_accum=clear_accum,
         k_pack=k_pack, wg_wait=wg_wait)


__all__ = ["gemm_sp", "group_config", "e_factor", "BITS_PER_GROUP"]
