"""GPU scheduling hints of TileLang (issue 14, item 8): the register hints, applied where they
mean something, and the hints tilecore accepts without applying (`ignored_hint`: warned once
per source line with what was ignored and why). No hint here ever changes a value.

Register hints: each is a `RegAllocHint` statement of the kernel (tilecore.ir.reg_budget), which
the `register-hints` pass (tilecore.passes.reg_budget) gathers for the kernel's automatic warp
specialization on sm_90a (tilecore.lower.warp_specialize.register_split), as TileLang's
AnnotateWarpGroupRegAlloc does for its own:

- `T.annotate_producer_reg_dealloc(n)` / `T.annotate_consumer_reg_alloc(n)`: the producer
  warpgroup's `setmaxnreg.dec` count and the consumers' `setmaxnreg.inc` count (a multiple of 8
  in 24..256, else a located TileShapeError; counts the register file cannot hold too). The one
  not given keeps tilecore's choice (producer 40, consumers what is left, at most 240);
- `T.no_set_max_nreg()`, `T.disable_warp_group_reg_alloc()`: no setmaxnreg at all.

Where they have no effect they warn once at their line with the reason: targets without
setmaxnreg (interp, cpu, sm_80 / sm_90 cuda and emu, hip, metal), and sm_90a kernels tilecore
does not warp-specialize (in roles of your own, `T.set_max_nreg` sets a warpgroup's budget).

Accepted, not applied:

- `T.Pipelined(order=, stage=, group=, sync=)`: see `ops.Pipelined`;
- `T.copy(disable_tma=True)`, `T.gemm(k_pack=, wg_wait=N>0)`, `T.atomic_add(use_tma=)`: the
  lowering picks the copy engine, operand packing and wgmma waits (see the callers);
  `T.gemm(wg_wait=-1)` is honoured (an asynchronous gemm: tilecore.lower.wgmma_async).
"""

from __future__ import annotations

import warnings

from ..errors import TileConfigWarning, TileShapeError, TileSyntaxError
from ..ir.expr import as_expr, const_int
from ..ir.reg_budget import RegAllocHint
from .builder import builtin, current

_told: set = set()


def ignored_hint(what: str, why: str) -> None:
    """Warn once per (line, hint) that `what` is accepted but not applied, because `why`."""
    try:
        loc = current().loc
    except Exception:  # noqa: BLE001 - outside a kernel build there is no line to name
        loc = None
    key = (loc, what)
    if key in _told:
        return
    _told.add(key)
    file, line = (loc.file, loc.line) if loc is not None else ("<tilecore>", 0)
    warnings.warn_explicit(f"{what} is accepted but not applied: {why}", TileConfigWarning, file, line)


def _reg_hint(kind: str, count, call: str) -> None:
    """Emit one register hint (tilecore.ir.reg_budget.RegAllocHint) after checking `count`."""
    b = current()
    if b.kernel is None:
        raise TileSyntaxError(f"{call}() must be inside `with T.Kernel(...)`", b.loc,
                              hint=f"move {call}() into the kernel body")
    n = 0
    if kind != "off":
        n = const_int(as_expr(count))
        if n is None or not 24 <= n <= 256 or n % 8:
            raise TileShapeError(f"{call}({count}): the register count is a constant multiple of 8 in "
                                 "24..256 (setmaxnreg's range)", b.loc,
                                 hint=f"write e.g. {call}({24 if kind == 'producer' else 240})")
    b.emit(RegAllocHint(kind, n, call, b.loc))


@builtin
def disable_warp_group_reg_alloc():
    """TileLang's spelling of `T.no_set_max_nreg()` (module docstring)."""
    _reg_hint("off", 0, "T.disable_warp_group_reg_alloc")


@builtin
def no_set_max_nreg():
    """No setmaxnreg in this kernel's automatic warp specialization (module docstring)."""
    _reg_hint("off", 0, "T.no_set_max_nreg")


@builtin
def annotate_producer_reg_dealloc(reg_count=24):
    """The producer warpgroup's register budget (setmaxnreg.dec) when tilecore warp-specializes
    this kernel on sm_90a; a multiple of 8 in 24..256 (module docstring)."""
    _reg_hint("producer", reg_count, "T.annotate_producer_reg_dealloc")


@builtin
def annotate_consumer_reg_alloc(reg_count=240):
    """The consumer warpgroups' register budget (setmaxnreg.inc) when tilecore warp-specializes
    this kernel on sm_90a; a multiple of 8 in 24..256 (module docstring)."""
    _reg_hint("consumer", reg_count, "T.annotate_consumer_reg_alloc")


__all__ = ["ignored_hint", "disable_warp_group_reg_alloc", "no_set_max_nreg",
           "annotate_producer_reg_dealloc", "annotate_consumer_reg_alloc"]
