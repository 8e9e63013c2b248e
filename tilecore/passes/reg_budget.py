"""The `register-budget` pass: `T.set_max_nreg` where the target cannot honour it."""

from __future__ import annotations

from ..ir.module import Module
from ..ir.reg_budget import SetMaxNReg
from ..ir.stmt import SeqStmt
from ..ir.visit import rewrite
from ..target import TargetDesc
from .base import tile_pass


def _no_setmaxnreg(desc: TargetDesc) -> bool:
    return not desc.facts.get("setmaxnreg")


@tile_pass("register-budget", when=_no_setmaxnreg)
def drop_register_budgets(module: Module, desc: TargetDesc) -> Module:
    """Invariant: on a target without the fact `setmaxnreg` (everything but thread-lowered sm_90a:
    interp, cpu, pre-sm_90a cuda and emu, hip, metal) no `SetMaxNReg` is left; each removed one
    is a "config" Diagnostic (the compiler warns once per process, TileConfigWarning, also on a
    compile-cache hit): there is no per-warpgroup register budget to set, and a budget changes
    no value."""
    found: list[SetMaxNReg] = []

    def fn(n):
        if isinstance(n, SetMaxNReg):
            found.append(n)
            return SeqStmt((), n.loc)
        return None

    body = rewrite(module.func.body, fn)
    if not found:
        return module
    from ..contract import Diagnostic

    notes = tuple(Diagnostic(
        "config", f"T.set_max_nreg({n.count}, {int(n.inc)}) is accepted but not applied on {desc.target}: "
        "setmaxnreg (a warpgroup's register budget) exists on thread-lowered sm_90a targets only "
        "(cuda:sm_90a, emu:sm_90a); registers are the compiler's here", n.loc) for n in found)
    out = module.with_func(module.func.with_body(body))
    return out.with_attrs(diagnostics=out.attrs.diagnostics + notes)
