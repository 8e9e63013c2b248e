"""Accumulators cleared right before their k loop start with wgmma's scale-d = 0 instead.

    T.clear(C)                                 for k in T.Pipelined(n):
    for k in T.Pipelined(n):           ->          ...
        ...                                        T.gemm(A_s, B_s, C)   # first k step: scale-d = (k != 0)
        T.gemm(A_s, B_s, C)

and a clear followed, in the same statement list, by a gemm into it (FlashAttention's
backward: `T.clear(s_t)` ... `T.gemm(K_s, Q_s, s_t)`) becomes that gemm with scale-d 0 on its
first k step, as `clear_accum=True` would.

A wgmma with scale-d 0 computes D = A @ B without reading D, so on the loop's first iteration
the first k step of every accumulator tile writes the whole accumulator and the 64-128
register zeroings per thread and tile (`CS2R` in SASS) go; in a persistent kernel they sat
between one tile's epilogue and the next tile's first wgmma. `T.gemm(..., clear_accum=True)`
gets a constant scale-d 0 on its first k step the same way (`tilecore.lower.wgmma`). (Outside a
loop ptxas already folds zero stores followed by a wgmma into `HGMMA ..., RZ, !UPT` itself, so
there the SASS does not change; it cannot for the loop-carried accumulator. Measured on the
H200: GEMM timing neutral, BENCHMARKS.md "wgmma scale-d".)

The clear goes only when the values cannot differ: the fill writes zero into the whole
fragment; the next statement that names the fragment is the gemm into it, or a loop with a
compile-time trip count of at least one whose body has the gemm into it as a top-level
statement (so it runs on every iteration, unconditionally) and names the fragment nowhere
else; the gemm lowers to wgmma and its first k step's instructions write every register of
the accumulator (`wgmma_zeroes_accumulator`). Everything else keeps its clear, and so does every
accumulator under the option `tilecore.disable_wgmma_scale_d` (for A/B timing).
"""

from __future__ import annotations

from ..ir.expr import Cast, Const, Expr, binop, const, const_int
from ..ir.stmt import Fill, For, Gemm, SeqStmt, Stmt
from ..ir.visit import walk
from .context import LowerCtx


def drop_accumulator_clears(ctx: LowerCtx, stmts: tuple) -> tuple:
    """`stmts` (one statement list of the kernel body) without the accumulator clears the
    first k step's scale-d replaces (module docstring); each such gemm's scale-d expression is
    recorded in `ctx.first_step_scale` (by id of the Gemm) for the wgmma lowering."""
    if getattr(ctx.options, "disable_wgmma_scale_d", False):
        return stmts
    drop: set[int] = set()
    for i, s in enumerate(stmts):
        if not _zero_fill(s):
            continue
        buf = s.dst.buffer
        for t in stmts[i + 1:]:
            if isinstance(t, Gemm) and t.c.buffer is buf:  # the clear's own gemm, no loop
                if wgmma_zeroes_accumulator(ctx, t):
                    ctx.first_step_scale[id(t)] = const(False)
                    drop.add(i)
                break
            if isinstance(t, For) and t.kind != "parallel":
                g = _loop_gemm(t, buf)
                if g is not None and _runs(t) and wgmma_zeroes_accumulator(ctx, g):
                    # accumulate on every iteration but the first
                    ctx.first_step_scale[id(g)] = binop("ne", t.var, t.start)
                    drop.add(i)
                break
            if _mentions(t, buf):
                break
    return tuple(s for i, s in enumerate(stmts) if i not in drop)


def gemm_uses(body: Stmt) -> dict[int, int]:
    """How often each Gemm node object occurs in `body` (a node a pass shared between two
    places, say a peeled and an unpeeled copy, occurs twice: its scale-d, recorded by
    identity, would apply to both, so such gemms keep their clears)."""
    out: dict[int, int] = {}
    for n in walk(body):
        if isinstance(n, Gemm):
            out[id(n)] = out.get(id(n), 0) + 1
    return out


def wgmma_zeroes_accumulator(ctx: LowerCtx, g: Gemm) -> bool:
    """Whether `g` occurs once in the kernel, lowers to wgmma, and its first k step's
    instructions (one per accumulator tile) together write every register of the
    accumulator."""
    from .gemm import wgmma_plan  # gemm.py imports this package's modules

    if ctx.gemm_uses.get(id(g)) != 1:
        return False
    found = wgmma_plan(ctx, g)
    if found is None:
        return False
    plan, clay = found
    d = plan.mma.operand("D")
    im, in_, _ = plan.mma.shape
    M, N, _ = g.mnk
    wm, wn = plan.warps
    written: set[int] = set()
    for mi in range((M // wm) // im):
        for ni in range((N // wn) // in_):
            base = clay.reg(mi, ni, 0)
            written.update(range(base, base + d.elems))
    return written == set(range(clay.nregs))


def _zero_fill(s: Stmt) -> bool:
    """T.clear / T.fill(.., 0) of a whole fragment."""
    if not isinstance(s, Fill) or s.dst.buffer.scope != "fragment" or not s.dst.is_full:
        return False
    v: Expr = s.value
    while isinstance(v, Cast):
        v = v.value
    return isinstance(v, Const) and v.value == 0


def _top_level(s: Stmt) -> list:
    if isinstance(s, SeqStmt):
        return [y for x in s.stmts for y in _top_level(x)]
    return [s]


def _loop_gemm(loop: For, buf) -> Gemm | None:
    """The loop body's one top-level gemm into `buf`, when nothing else in the body names it."""
    found = None
    for s in _top_level(loop.body):
        if isinstance(s, Gemm) and s.c.buffer is buf and found is None and not s.clear_accum:
            found = s
        elif _mentions(s, buf):
            return None
    return found


def _runs(loop: For) -> bool:
    """At least one iteration, known at compile time."""
    lo, hi = const_int(loop.start), const_int(loop.stop)
    return lo is not None and hi is not None and loop.step > 0 and hi > lo


def _mentions(s: Stmt, buf) -> bool:
    return any(n is buf for n in walk(s))
