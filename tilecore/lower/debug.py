"""Lowering of T.print / T.device_assert to thread IR (`tilecore.ir.debug` defines both).

The nodes stay the same; their arguments become thread-level loads (`BodyLowerer.expr`; a
fragment element is read from its shared staging copy). In block-level code thread 0 alone
prints or asserts (`if tx == 0`), so a block prints each line once; inside a T.Parallel
partition every thread checks its own elements. A buffer print (`for e: print(buf[e])`) stages
a fragment once, before the loop, not once per element.
"""

from __future__ import annotations

from ..ir.debug import DeviceAssert, Print
from ..ir.expr import binop
from ..ir.stmt import For, IfThenElse, SeqStmt, Stmt
from .body import BodyLowerer
from .context import LowerCtx


def is_debug_block(s: Stmt) -> bool:
    """A statement `lower_debug_block` lowers: a debug node, or a buffer print's loop."""
    return isinstance(s, (Print, DeviceAssert)) or (isinstance(s, For) and isinstance(s.body, Print))


def lower_debug(bl: BodyLowerer, s: Stmt) -> Stmt:
    """One debug node with `bl` (per-thread or uniform mode)."""
    if isinstance(s, Print):
        node: Stmt = Print(s.fmt, tuple(bl.expr(a) for a in s.args), s.loc)
    else:
        node = DeviceAssert(bl.expr(s.cond), s.msg, tuple(bl.expr(b) for b in s.block), s.loc)
    if bl.per_thread:
        return node
    return IfThenElse(binop("eq", bl.ctx.tx, 0), node, None, s.loc)


def lower_debug_block(ctx: LowerCtx, s: Stmt) -> Stmt:
    """A block-level debug statement (or buffer print loop), lowered; staging stores first."""
    bl = BodyLowerer(ctx, False, s.loc)
    if isinstance(s, For):
        out: Stmt = For(s.var, bl.expr(s.start), bl.expr(s.stop), s.step, "serial",
                        lower_debug(bl, s.body), (), s.loc)
    else:
        out = lower_debug(bl, s)
    return out if not bl.pre else SeqStmt(tuple(bl.pre) + (out,), s.loc)
