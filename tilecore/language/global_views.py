"""Views of global tensors and `T.im2col`: TileLang's convolution idiom.

- `T.Tensor(shape, dtype, buf.data)` inside a kernel is another shape for the elements of
  `buf` (row-major, the same element count and dtype): `kernel_flat = T.Tensor((KH * KW * C,
  F), dtype, kernel.data)`. Of a shared or fragment buffer it is `T.reshape`. Indexing the view
  reads or writes the base element at the same row-major position. `T.copy` between a tile and
  a region of a view that regroups the base's dimensions is lowered here, in the frontend, to a
  `T.Parallel` element copy through the view (reads outside the view give 0, writes outside it
  are dropped, as for any T.copy at a tensor edge); other tile operations take such a view
  element by element only. Every target runs it (no pointer arithmetic is involved).
- `T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)`: the im2col tile of an
  NHWC image for a `kernel` x `kernel` convolution, TileLang's SIMT definition: row
  `m = nhw_step * block_m + i` of the tile is output pixel (n, oh, ow), column
  `k = c_step * block_k + j` is (kh, kw, c) with `k = (kh * kernel + kw) * C + c`; the value is
  img[n, oh * stride + kh * dilation - pad, ow * stride + kw * dilation - pad, c], zero in the
  padding. Rows past the last pixel and columns past the last (kh, kw, c) are zero too (TileLang
  relies on its out-of-bounds guard there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import TileShapeError, TileTypeError
from ..ir.buffer import Buffer, BufferData
from ..ir.expr import Load, Var, as_expr, binop, cast, const_int, select
from ..ir.stmt import For, IfThenElse, SeqStmt, Store
from .builder import builtin, current
from .refs import Ref, SliceItem, region_of, squeezed
from .views import BufferView


@dataclass(frozen=True, eq=False)
class ViewRef(Ref):
    """`view[items]` of a view regrouping a global tensor: an element (then `buffer`/`items`
    are the base element, as for any Ref) or, with slices or as a tile's start corner, a region
    of the view that only `T.copy` accepts."""

    view: BufferView | None = None
    view_items: tuple = ()


def tensor_view(shape, dtype, data) -> BufferView:
    """`T.Tensor(shape, dtype, buf.data)` inside a kernel (see the module docstring)."""
    from .ops import _shape

    if not isinstance(data, BufferData):
        raise TileTypeError(f"T.Tensor(shape, dtype, data): data must be a buffer's `.data`, got "
                            f"{type(data).__name__}", hint="write T.Tensor(shape, dtype, buf.data)")
    base = data.buffer
    shape = _shape(shape, "T.Tensor(..., data)")
    d = dt.as_dtype(dtype)
    if d != base.dtype:
        raise TileTypeError(f"T.Tensor(..., {base.name}.data) as {d}: {base.name} holds {base.dtype}; "
                            "a view reinterpreting storage as another dtype is not provided",
                            hint=f"view it as {base.dtype} and convert the values")
    if base.static_shape is None:
        raise TileShapeError(f"T.Tensor(..., {base.name}.data): {base.name} has a symbolic shape",
                             hint="views need the base's element count at build time")
    n = math.prod(shape)
    if n != base.numel:
        raise TileShapeError(f"T.Tensor({shape}, ..., {base.name}.data) has {n} elements; "
                             f"{base.name}{tuple(base.shape)} has {base.numel}",
                             hint="a view must have the base's element count")
    return BufferView(base, shape)


def view_ref(view: BufferView, vals: list) -> Ref:
    """`view[vals]` for the parser: a plain base Ref where the view keeps the dimensions, a
    ViewRef where it regroups them."""
    if view.base.scope != "global" or view.unit_only:
        return Ref(view.base, view.base_items(vals))
    if any(isinstance(v, SliceItem) for v in vals):
        return ViewRef(view.base, tuple(vals), view, tuple(vals))
    return ViewRef(view.base, view.base_items(vals), view, tuple(vals))


def _view_region(r: ViewRef, other_shape) -> tuple[list, list]:
    """Starts and extents (view dimensions) of a ViewRef used as a tile."""
    shape = r.view.shape
    if all(not isinstance(v, SliceItem) for v in r.view_items):
        if other_shape is None:
            raise TileShapeError(f"cannot tell the extent of the view of {r.view.name} from a start "
                                 "corner alone", hint="give the other side of T.copy as a buffer")
        if len(other_shape) > len(shape):
            raise TileShapeError(f"the tile has shape {tuple(other_shape)} but the view of "
                                 f"{r.view.name} has {len(shape)} dimensions",
                                 hint="slice the view explicitly")
        ext = [1] * (len(shape) - len(other_shape)) + list(other_shape)
        return [as_expr(v) for v in r.view_items], ext
    starts, ext = [], []
    for dim, v in enumerate(r.view_items):
        if isinstance(v, SliceItem):
            start = as_expr(0 if v.start is None else v.start)
            stop = shape[dim] if v.stop is None else v.stop
            n = const_int(binop("sub", as_expr(stop), start))
            if n is None or n < 1:
                raise TileShapeError(f"slice {dim} of the view of {r.view.name} needs a constant "
                                     "positive extent", hint="write V[i * 64:(i + 1) * 64]")
            starts.append(start)
            ext.append(n)
        else:
            starts.append(as_expr(v))
            ext.append(1)
    return starts, ext


def copy_view(src, dst) -> None:
    """`T.copy` with a ViewRef on either side: a T.Parallel element copy through the view."""
    b = current()
    if isinstance(src, ViewRef) and isinstance(dst, ViewRef):
        raise TileTypeError("T.copy between two regrouping views of global tensors",
                            hint="copy through an on-chip tile")
    view_is_src = isinstance(src, ViewRef)
    vr, other = (src, dst) if view_is_src else (dst, src)
    if isinstance(other, BufferView):
        other = other.as_base("T.copy operand")
    o = region_of(other, None, "copy operand")
    vstarts, vext = _view_region(vr, o.squeezed_shape)
    if squeezed(vext) != o.squeezed_shape:
        raise TileShapeError(f"T.copy between a {tuple(vext)} region of the view of {vr.view.name} "
                             f"and a {tuple(o.extents)} region of {o.buffer.name}",
                             hint="give both sides the same tile shape")
    loop = [Var(b.unique_name(f"v{k}"), dt.int32) for k in range(len(o.squeezed_shape))]

    def indices(starts, extents):
        it = iter(loop)
        return [binop("add", s, next(it)) if e != 1 else s for s, e in zip(starts, extents)]

    vidx = indices(vstarts, vext)
    oidx = indices(list(o.starts), list(o.extents))
    inside = None
    for i, n in zip(vidx, vr.view.shape):
        c = binop("lt", i, as_expr(n))
        inside = c if inside is None else binop("and", inside, c)
    base_idx = tuple(as_expr(i) for i in vr.view.base_items(vidx))
    if view_is_src:
        val = cast(Load(vr.view.base, base_idx), o.buffer.dtype)
        zero = cast(as_expr(0), o.buffer.dtype)
        body = Store(o.buffer, tuple(oidx), select(inside, val, zero), b.loc)
    else:
        val = cast(Load(o.buffer, tuple(oidx)), vr.view.base.dtype)
        body = IfThenElse(inside, SeqStmt((Store(vr.view.base, base_idx, val, b.loc),)), None, b.loc)
    b.emit(_parallel(loop, o.squeezed_shape, body, b.loc))


def _parallel(loop: list, extents, body, loc):
    """Nested T.Parallel loops `loop` over `extents` around `body`."""
    for v, n in reversed(list(zip(loop, extents))):
        body = For(v, as_expr(0), as_expr(n), 1, "parallel", SeqStmt((body,)), (), loc)
    return body


@builtin
def im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None) -> None:
    """Fill tile `col` (block_m x block_k) with the im2col rows of NHWC image `img` (see the
    module docstring); `eviction_policy` is a cache hint and changes nothing."""
    b = current()
    if not isinstance(img, Buffer) or img.scope != "global" or len(img.shape) != 4:
        raise TileTypeError("T.im2col takes a 4-d NHWC global tensor as its image",
                            hint="pass the kernel's (N, H, W, C) input tensor")
    c = region_of(col, None, "T.im2col column tile")
    if len(c.extents) < 2 or c.buffer.scope == "global":
        raise TileTypeError("T.im2col writes an on-chip tile of at least 2 dimensions",
                            hint="pass a T.alloc_shared((block_M, block_K), dtype) buffer")
    if c.buffer.dtype != img.dtype:
        raise TileTypeError(f"T.im2col from {img.dtype} into {c.buffer.dtype}",
                            hint="the column tile must have the image's dtype")
    for name, v in (("kernel", kernel), ("stride", stride), ("dilation", dilation), ("pad", pad)):
        least = 0 if name == "pad" else 1
        if not isinstance(v, int) or isinstance(v, bool) or v < least:
            raise TileTypeError(f"T.im2col {name}={v!r} must be an int >= {least}",
                                hint="give the convolution's sizes as Python ints")
    n_, h_, w_, c_ = (as_expr(s) for s in img.shape)
    bm, bk = c.extents[-2], c.extents[-1]
    oh = binop("add", binop("div", binop("sub", binop("add", h_, 2 * pad), (kernel - 1) * dilation + 1),
                            stride), 1)
    ow = binop("add", binop("div", binop("sub", binop("add", w_, 2 * pad), (kernel - 1) * dilation + 1),
                            stride), 1)
    i, j = Var(b.unique_name("m"), dt.int32), Var(b.unique_name("k"), dt.int32)
    m = binop("add", binop("mul", as_expr(nhw_step), bm), i)
    k = binop("add", binop("mul", as_expr(c_step), bk), j)
    n = binop("div", m, binop("mul", oh, ow))
    kh = binop("div", k, binop("mul", as_expr(kernel), c_))
    kw = binop("mod", binop("div", k, c_), kernel)
    ih = binop("sub", binop("add", binop("mul", binop("div", binop("mod", m, binop("mul", oh, ow)), ow),
                                         stride), binop("mul", kh, dilation)), pad)
    iw = binop("sub", binop("add", binop("mul", binop("mod", m, ow), stride), binop("mul", kw, dilation)),
               pad)
    conds = [binop("lt", n, n_), binop("lt", kh, kernel), binop("ge", ih, 0), binop("lt", ih, h_),
             binop("ge", iw, 0), binop("lt", iw, w_)]
    inside = conds[0]
    for cnd in conds[1:]:
        inside = binop("and", inside, cnd)
    val = select(inside, Load(img, (n, ih, iw, binop("mod", k, c_))), cast(as_expr(0), img.dtype))
    idx = list(c.starts)
    idx[-2] = binop("add", idx[-2], i)
    idx[-1] = binop("add", idx[-1], j)
    b.emit(_parallel([i, j], (bm, bk), Store(c.buffer, tuple(idx), val, b.loc), b.loc))


def whole(x):
    """A bare view of a global tensor as a T.copy operand: the ref of all of it (`view[:, :]`)."""
    if isinstance(x, BufferView) and x.base.scope == "global":
        return view_ref(x, [SliceItem(None, None) for _ in x.shape])
    return x


def is_view_ref(x) -> bool:
    """Whether `x` is a region of a regrouping view of a global tensor (T.copy lowers it here)."""
    return isinstance(x, ViewRef) and isinstance(x.view, BufferView)


__all__ = ["ViewRef", "copy_view", "im2col", "is_view_ref", "tensor_view", "view_ref", "whole"]
