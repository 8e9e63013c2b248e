"""The register passes: `register-budget` (`T.set_max_nreg` where the target cannot honour it)
and `register-hints` (TileLang's per-kernel register hints, tilecore.ir.reg_budget.RegAllocHint,
for the automatic warp specialization)."""

from __future__ import annotations

from ..errors import TileShapeError
from ..ir.module import Module
from ..ir.reg_budget import RegAllocHint, RegHints, SetMaxNReg
from ..ir.stmt import SeqStmt
from ..ir.visit import rewrite
from ..target import TargetDesc
from .base import tile_pass

_WHERE = ("setmaxnreg (a warpgroup's register budget) exists on thread-lowered sm_90a targets only "
          "(cuda:sm_90a, emu:sm_90a); registers are the compiler's here")


def _no_setmaxnreg(desc: TargetDesc) -> bool:
    return not desc.facts.get("setmaxnreg")


def _removed(module: Module, kind: type) -> tuple[Module, list]:
    """`module` without its `kind` statements, and those statements in program order."""
    found: list = []

    def fn(n):
        if isinstance(n, kind):
            found.append(n)
            return SeqStmt((), n.loc)
        return None

    body = rewrite(module.func.body, fn)
    return (module.with_func(module.func.with_body(body)) if found else module), found


def _noted(module: Module, notes) -> Module:
    from ..contract import Diagnostic

    extra = tuple(Diagnostic("config", message, loc) for message, loc in notes)
    return module.with_attrs(diagnostics=module.attrs.diagnostics + extra) if extra else module


@tile_pass("register-budget", when=_no_setmaxnreg)
def drop_register_budgets(module: Module, desc: TargetDesc) -> Module:
    """Invariant: on a target without the fact `setmaxnreg` (everything but thread-lowered sm_90a:
    interp, cpu, pre-sm_90a cuda and emu, hip, metal) no `SetMaxNReg` is left; each removed one
    is a "config" Diagnostic (the compiler warns once per process, TileConfigWarning, also on a
    compile-cache hit): there is no per-warpgroup register budget to set, and a budget changes
    no value."""
    out, found = _removed(module, SetMaxNReg)
    return _noted(out, [(f"T.set_max_nreg({n.count}, {int(n.inc)}) is accepted but not applied on "
                         f"{desc.target}: {_WHERE}", n.loc) for n in found])


def _line(h: RegAllocHint) -> str:
    return f"line {h.loc.line}" if h.loc is not None else "elsewhere"


@tile_pass("register-hints")
def collect_register_hints(module: Module, desc: TargetDesc) -> Module:
    """Invariant: no `RegAllocHint` is left. Two hints of one kind with different counts are a
    TileShapeError at the second. On targets with the fact `setmaxnreg` the function's attr
    "reg_alloc" holds them (`RegHints`) for the warp specialization (async-pipeline, ping-pong);
    `T.no_set_max_nreg()` there overrides the counts, each of which is then a "config"
    Diagnostic. Elsewhere every hint is a "config" Diagnostic (warned once): the target has no
    setmaxnreg, and a register budget changes no value."""
    out, found = _removed(module, RegAllocHint)
    if not found:
        return module
    kept: dict = {}
    for h in found:
        prev = kept.get(h.kind)
        if prev is not None and prev.count != h.count:
            raise TileShapeError(f"{h.text} contradicts {prev.text} ({_line(prev)}): a kernel has one "
                                 f"{h.kind} register count", h.loc, hint="keep one of the two")
        kept.setdefault(h.kind, h)
    if _no_setmaxnreg(desc):
        verb = {"off": "has nothing to turn off"}
        return _noted(out, [(f"{h.text} {verb.get(h.kind, 'is accepted but not applied')} on {desc.target}: "
                             f"{_WHERE}", h.loc) for h in kept.values()])
    off = kept.get("off")
    hints = RegHints(kept.get("producer"), kept.get("consumer"), off)
    out = out.with_func(out.func.with_attr("reg_alloc", hints))
    if off is None:
        return out
    return _noted(out, [(f"{h.text} is accepted but not applied: {off.text} ({_line(off)}) turns "
                         "setmaxnreg off for this kernel", h.loc) for h in (hints.producer, hints.consumer)
                        if h is not None])


def unapplied_hints(module: Module, why: str) -> Module:
    """`module` with a "config" Diagnostic for each register count of its attr "reg_alloc" when
    its kernel holds no automatic warp specialization (no setmaxnreg is emitted), `why` saying
    what kept it out. `T.no_set_max_nreg()` needs no note: it holds either way."""
    from ..ir.thread import WarpSpecialized
    from ..ir.visit import walk

    hints = module.func.attr("reg_alloc")
    if hints is None or hints.off is not None or any(isinstance(n, WarpSpecialized)
                                                      for n in walk(module.func.body)):
        return module
    return _noted(module, [(f"{h.text} is accepted but not applied: {why}", h.loc) for h in hints.given])
