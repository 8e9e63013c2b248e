"""T.print, T.print_format and T.device_assert: the debug statements of `tilecore.ir.debug`."""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileSyntaxError, TileTypeError
from ..ir.buffer import Buffer
from ..ir.expr import Var, as_expr, binop
from .builder import builtin, current
from .refs import Ref


def _debug_frame(what: str):
    """The builder, checked: inside a kernel, outside T.Parallel (for T.print)."""
    b = current()
    if b.kernel is None:
        raise TileSyntaxError(f"{what} must be inside `with T.Kernel(...)`", b.loc,
                              hint=f"move {what} into the body of `with T.Kernel(...)`")
    return b


def _block_head(b) -> tuple[str, tuple]:
    blk = tuple(b.kernel.block_vars)
    return "[block " + ", ".join("{}" for _ in blk) + "] ", blk


@builtin
def print(obj=None, msg="", warp_group_id=None, warp_id=None):  # noqa: A001 - mirrors T.print
    """Print a value, a buffer (every element, row-major, one line each) or a text, once per
    block, in the format of `tilecore.ir.debug`. TileLang's `warp_group_id` / `warp_id` (which
    threads print a fragment) do not apply: tilecore prints the whole fragment once."""
    from ..ir.debug import Print, escape
    from ..ir.stmt import For

    b = _debug_frame("T.print")
    if warp_group_id is not None or warp_id is not None:
        raise TileSyntaxError("T.print: warp_group_id / warp_id are not supported", b.loc,
                              hint="tilecore prints a whole fragment once per block; drop them")
    if b.parallel_depth:
        raise TileSyntaxError("T.print cannot be used inside T.Parallel", b.loc,
                              hint="print the buffer after the loop: T.print(buf, msg='...')")
    head, blk = _block_head(b)
    label = escape(str(msg))
    if obj is None or isinstance(obj, str):
        text = escape(obj) if isinstance(obj, str) else ""
        b.emit(Print(head + (f"{label}: {text}" if label and text else label or text), blk, b.loc))
        return
    prefix = f"{label}: " if label else ""
    if isinstance(obj, Buffer) and not obj.is_var:
        n_elems = as_expr(1)
        for s in obj.shape:
            n_elems = binop("mul", n_elems, s)
        e = Var(b.unique_name("print_i"), dt.int32)
        idx, stride = [], as_expr(1)
        for k in range(len(obj.shape) - 1, -1, -1):
            q = binop("div", e, stride) if k < len(obj.shape) - 1 else e
            idx.append(q if k == 0 else binop("mod", q, obj.shape[k]))
            stride = binop("mul", stride, obj.shape[k])
        idx = tuple(reversed(idx))
        fmt = head + prefix + escape(obj.name) + "[" + ", ".join("{}" for _ in idx) + "] = {}"
        from ..ir.expr import Load

        body = Print(fmt, blk + idx + (Load(obj, idx),), b.loc)
        b.emit(For(e, as_expr(0), n_elems, 1, "serial", body, (), b.loc))
        return
    if isinstance(obj, Buffer):  # T.alloc_var: its one value
        from ..ir.expr import Load

        obj = Load(obj, (as_expr(0),))
    if isinstance(obj, Ref) and not obj.is_element:
        raise TileTypeError("T.print of a region is not supported", b.loc,
                            hint="print the whole buffer, or one element like A[i, j]")
    value = as_expr(obj)
    b.emit(Print(head + prefix + "{}", blk + (value,), b.loc))


@builtin
def print_format(fmt, *args):
    """Print `fmt` with each `{}` replaced by one argument (what printed IR shows for
    T.print; `{{` / `}}` are braces). Formats as `tilecore.ir.debug.format_value`."""
    from ..ir.debug import Print, pieces

    b = _debug_frame("T.print_format")
    if b.parallel_depth:
        raise TileSyntaxError("T.print_format cannot be used inside T.Parallel", b.loc,
                              hint="move it outside the T.Parallel loop")
    if not isinstance(fmt, str) or len(pieces(fmt)) - 1 != len(args):
        raise TileSyntaxError(f"T.print_format({fmt!r}) has {len(pieces(str(fmt))) - 1} placeholders "
                              f"for {len(args)} argument(s)", b.loc,
                              hint="pass one argument per {} placeholder")
    b.emit(Print(fmt, tuple(as_expr(a) for a in args), b.loc))


@builtin
def device_assert(cond, msg=""):
    """Stop the kernel with `msg` (and the block's indices) when `cond` is false; inside
    T.Parallel, when it is false for any element. See `tilecore.ir.debug`."""
    from ..ir.debug import DeviceAssert

    b = _debug_frame("T.device_assert")
    c = as_expr(cond)
    if not c.dtype.is_bool:
        raise TileTypeError(f"T.device_assert needs a condition, got a {c.dtype} value", b.loc,
                            hint="compare it: T.device_assert(x > 0, 'x must be positive')")
    b.emit(DeviceAssert(c, str(msg), tuple(b.kernel.block_vars), b.loc))
