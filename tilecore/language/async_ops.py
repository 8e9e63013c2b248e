"""TileLang's explicit Hopper asynchrony in kernel bodies, mapped onto what tilecore already
schedules itself (issue 14, the warp-specialized MLA / sparse-MLA examples):

- `T.wgmma_gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum)`: TileLang's gemm
  "without an implicit wait" is tilecore's `T.gemm(..., wg_wait=-1)`: on wgmma targets the
  product stays in flight and `tilecore.lower.wgmma_async` places its wait before the first
  statement that needs the result; elsewhere it is synchronous (the same values).
- `T.wait_wgmma(n)`: the wait TileLang makes the user write. tilecore places that wait itself
  (no later than this statement: the wgmma-async pass stops at barriers, arrives and shared
  writes, and at the first use of the result), so it is checked and accepted with a one-time
  warning.
- `T.fence_proxy_async()`: the generic-to-async proxy fence; tilecore's lowering puts one before
  every wgmma that reads shared memory ordinary stores wrote (`tilecore.lower.proxy_fences`), so
  it is accepted with a one-time warning.
- `T.cp_async_barrier_noinc(bar)`: `cp.async.mbarrier.arrive.noinc`: when the executing
  thread's earlier `T.ptx_cp_async` copies have landed, one arrival on `bar` (counted against
  its expected arrivals). tilecore writes it as commit + `wait_group 0` + arrive: the thread
  waits for its own copies and then arrives, one of the schedules the hardware may produce (the
  copies complete before the arrival either way), so every consumer that waits on `bar` sees
  the data; the producer thread overlaps less.
"""

from __future__ import annotations

from ..errors import TileShapeError
from ..ir.expr import as_expr, const_int
from ..ir.thread_level import BarrierArrive, CpAsyncCommit, CpAsyncWait
from .builder import builtin
from .hints import ignored_hint
from .ops import GemmWarpPolicy, gemm
from .thread_level import _barrier, _frame


@builtin
def wgmma_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
               clear_accum=False) -> None:
    """TileLang's asynchronous Hopper gemm: `T.gemm(..., wg_wait=-1)`, its wait placed by the
    compiler before the result is needed (synchronous off wgmma targets)."""
    gemm(A, B, C, transpose_A=transpose_A, transpose_B=transpose_B, policy=policy,
         clear_accum=clear_accum, wg_wait=-1)


@builtin
def wait_wgmma(id) -> None:  # noqa: A002 - TileLang's parameter name
    """`wgmma.wait_group id`: checked (a constant >= 0) and accepted; tilecore places the waits
    of asynchronous gemms itself (module docstring)."""
    from .builder import current

    n = const_int(as_expr(id))
    if n is None or n < 0:
        raise TileShapeError(f"T.wait_wgmma({id!r}): the count of wgmma groups left in flight is a "
                             "constant >= 0", current().loc, hint="write T.wait_wgmma(0)")
    ignored_hint("T.wait_wgmma()", "tilecore waits for each asynchronous gemm (T.wgmma_gemm) "
                 "before the first statement that needs its result, and no later than the next "
                 "barrier or shared-memory write")


@builtin
def fence_proxy_async() -> None:
    """`fence.proxy.async`: accepted; tilecore's lowering places the proxy fences its wgmma
    reads of shared memory need (module docstring)."""
    ignored_hint("T.fence_proxy_async()", "tilecore puts a proxy fence before each wgmma that "
                 "reads shared memory written by ordinary stores (tilecore.lower.proxy_fences)")


@builtin
def cp_async_barrier_noinc(barrier) -> None:
    """`cp.async.mbarrier.arrive.noinc` on `barrier`: the executing thread arrives once its
    earlier `T.ptx_cp_async` copies have landed (commit, wait_group 0, arrive)."""
    b = _frame("T.cp_async_barrier_noinc")
    buf, idx = _barrier(barrier, "T.cp_async_barrier_noinc")
    b.emit(CpAsyncCommit(b.loc))
    b.emit(CpAsyncWait(0, b.loc))
    b.emit(BarrierArrive(buf, idx, b.loc))


__all__ = ["wgmma_gemm", "wait_wgmma", "fence_proxy_async", "cp_async_barrier_noinc"]
