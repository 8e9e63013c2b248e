"""Deliberately broken backends for the acceptance tests: each is interp with one bug, so the
suite has something real to catch. Registered at run time with `tilecore.plugins.register`."""

from __future__ import annotations

from tilecore_conformance.values import ulp_rel

from tilecore import plugins
from tilecore.hookspec import hookimpl
from tilecore.ir.buffer import Region
from tilecore.ir.expr import BinOp, Const, Unary
from tilecore.ir.stmt import Fill, Gemm, SeqStmt
from tilecore.ir.visit import rewrite
from tilecore.passes.base import Pass
from tilecore.target import Target, TargetInfo


class InterpWithABug:
    """Builds like interp after one extra pass (`bug`) that miscompiles something."""

    kind = "broken"

    def bug(self, node):
        """Return a replacement for `node`, or None to keep it."""
        raise NotImplementedError

    @hookimpl
    def tile_targets(self):
        """This fixture's one target kind."""
        return [TargetInfo(self.kind, f"interp with a deliberate bug ({type(self).__name__})", priority=-100)]

    @hookimpl
    def tile_passes(self, target):
        """Insert the miscompiling pass after the core simplifier."""
        if target.kind != self.kind:
            return None

        def miscompile(module, facts):
            """Apply the deliberate bug everywhere it matches."""
            return module.with_func(module.func.with_body(rewrite(module.func.body, self.bug)))

        return [("after:simplify", Pass(f"{self.kind}_bug", miscompile))]

    @hookimpl
    def tile_build(self, target, module):
        """Delegate the build to interp through the hook (no backend imports another)."""
        if target.kind != self.kind:
            return None
        return plugins.manager().hook.tile_build(target=Target("interp"), module=module)


class Exp2OneUlpHigh(InterpWithABug):
    """exp2 comes out one ulp high: x * (1 + ulp) in the operation's dtype."""

    kind = "broken_exp2"

    def bug(self, node):
        if isinstance(node, Unary) and node.op == "exp2":
            d = node.dtype
            return BinOp("mul", node, Const(1.0 + ulp_rel(d), d), d)
        return None


class GemmDropsKTail(InterpWithABug):
    """gemm works through K in steps of 16 and silently drops the last K % 16 columns."""

    kind = "broken_gemm"
    step = 16

    def bug(self, node):
        if not isinstance(node, Gemm):
            return None
        k = node.mnk[2]
        keep = k // self.step * self.step
        if keep == k:
            return None
        if keep == 0:
            return Fill(node.c, Const(0, node.c.buffer.dtype), node.loc) if node.clear_accum else SeqStmt(())
        a_axis = -2 if node.transpose_a else -1
        b_axis = -1 if node.transpose_b else -2
        return Gemm(_shrink(node.a, a_axis, keep), _shrink(node.b, b_axis, keep), node.c, node.transpose_a,
                    node.transpose_b, node.clear_accum, node.policy, node.loc)


def _shrink(r: Region, axis: int, n: int) -> Region:
    ext = list(r.extents)
    ext[axis] = n
    return Region(r.buffer, r.starts, tuple(ext))
