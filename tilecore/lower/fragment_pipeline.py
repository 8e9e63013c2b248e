"""Fragment pipelining: the next k tile's first operand fragments load before this tile's last mmas.

A tensorized gemm inside a pipelined loop lowers, per 16-deep k step i, to loader
instructions L_i (ldmatrix: shared memory -> operand registers) followed by the mmas M_i that
read them, after the loop head H (wait for the tile, block barrier, issue the copies of a later
tile). Run as written, every k tile starts with a bubble: the first mma waits for the barrier
and for the latency of L_0, and the last mmas of the tile have no loads to hide behind. This
pass software-pipelines the steps by one across iterations (what CUTLASS's multistage mainloop
does):

    before:  H(0) L_0(0)
    loop k:  L_1 M_0  L_2 M_1 ... L_{n-1} M_{n-2}  [if k + 1 < n_k: H(k+1) L_0(k+1)]  M_{n-1}

Odd steps use a second set of operand registers so that L_{i+1} never overwrites what M_i
reads. Values are unchanged: every statement runs the same number of times with the same
operands; the only statements that move past others are mmas (register-only: they read the
operand and accumulator registers and touch no memory), and each moves past statements that
write neither its operands nor its accumulators. Shared memory hazards are unchanged: H(k+1)'s
barrier still precedes its copies, and every read of the tile it overwrites (L_1..L_{n-1} of
iteration k) still precedes that barrier. The pass needs an even number of steps (so that
L_0(k+1) writes the registers M_{n-1}(k) does not read) and a loop body of exactly
`lets, H, steps` with loader intrinsics for both operands; other loops are left alone.

Copy interleaving (with `interleave`, pass config `tilecore.enable_copy_interleave`; off by
default: on the H200 the burst was as fast at 128x128x64 s2 and 3-5% faster with 3 stages and
128x256 tiles, BENCHMARKS.md issue 9): H is split at its barrier into W (wait,
barrier) and C (the copies of a later tile, their commit). A warp issuing C in one burst issues
no mma for as long (16 copies and their addresses: ~90 instructions at 128x128x64), so C is
dealt out among the mmas of the last step, as CUTLASS's mainloop spreads its copies over the
warp-level k steps:

    loop k:  ... L_{n-1} M_{n-2}  [if k + 1 < n_k: W(k+1) L_0(k+1)]
             M_{n-1}[0] [if ..: C(k+1)[0]]  M_{n-1}[1] [if ..: C(k+1)[1]] ...

C moves past mmas only (register-only), still follows W's barrier (which orders every read
of the stage it refills), and writes a stage no loader between them reads (L_0(k+1) reads tile
k+1's stage; C fills tile k+1+d's, d < stages).

Copy spreading (`interleave="spread"`, pass config `tilecore.copy_spread`; off by default, and
the burst is kept below SPREAD_MIN_STAGES stages): C(k) is dealt out over iteration k's steps
but the last, each piece after the next step's loads and before this step's mmas, as CUTLASS's
multistage mainloop issues its copies; the guarded head keeps W(k+1) L_0(k+1) and the prologue
W(0) L_0(0):

    loop k:  L_1 C(k)[0] M_0  L_2 C(k)[1] M_1 ... L_{n-1} C(k)[n-2] M_{n-2}
             [if k + 1 < n_k: W(k+1) L_0(k+1)]  M_{n-1}

C(k) still follows W(k)'s barrier (end of iteration k - 1 or the prologue), fills a stage that
no loader of iteration k reads (tile k + d, 0 < d < stages), and is committed before W(k + 1)
waits, so the wait counts the same groups. Measured on the H200 (BENCHMARKS.md, "where the
128x256x64 GEMM's cycles go"): 3% faster than the burst with 3 stages, within the run's noise
band at the best configs, so it stays opt-in.
"""

from __future__ import annotations

from ..ir.buffer import Buffer
from ..ir.names import fresh_name
from ..ir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt
from ..ir.thread import AsyncCommit, AsyncCopy, Barrier, IntrinsicCall, OperandRef, ThreadKernel
from ..ir.visit import rewrite, substitute, walk
from .indexing import simplify
from .prefetch import flat_stmts, if_any_iteration, next_iteration_exists, rewrite_loops


def _kind(s: Stmt) -> str | None:
    return s.intrinsic.kind if isinstance(s, IntrinsicCall) else None


def _steps(tail: list) -> list[tuple[list, list]] | None:
    """The (loaders, mmas) groups of a tail made only of ldmatrix and mma.sync calls."""
    steps: list[tuple[list, list]] = []
    i = 0
    while i < len(tail):
        loads, mmas = [], []
        while i < len(tail) and _kind(tail[i]) == "ldmatrix":
            loads.append(tail[i])
            i += 1
        while i < len(tail) and _kind(tail[i]) == "mma":
            mmas.append(tail[i])
            i += 1
        if not loads or not mmas:
            return None
        steps.append((loads, mmas))
    return steps


def _operand_regs(steps) -> dict | None:
    """The register buffers the loaders fill (by id), when every mma operand comes from them and
    no mma writes them (so renaming a step's registers is local)."""
    filled = {id(s.operands[0].buffer): s.operands[0].buffer for loads, _ in steps for s in loads}
    for _, mmas in steps:
        for m in mmas:
            a, b = m.operands[1].buffer, m.operands[2].buffer
            if id(a) not in filled or id(b) not in filled:
                return None
            if id(m.operands[0].buffer) in filled or id(m.operands[3].buffer) in filled:
                return None
    return filled


def _rename(stmts: list, mapping: dict) -> list:
    def fn(n):
        if isinstance(n, OperandRef) and id(n.buffer) in mapping:
            return OperandRef(mapping[id(n.buffer)], n.offset)
        return None

    return [rewrite(s, fn) for s in stmts]


# how many pieces the copies of a later tile are dealt out in among the last step's mmas
COPY_GROUPS = 4
# spreading needs a stage of slack: with 2 stages the copies of tile k + 1, issued during tile
# k's steps, must land by the wait at tile k's end, and the last pieces have only one step to
# (128x256x64 on the H200: 0.433 ms spread against 0.331 ms burst; 3 stages: 0.331 / 0.341)
SPREAD_MIN_STAGES = 3


def _split_head(head: list) -> tuple[list, list] | None:
    """(W, C): the head up to its last block barrier, and the copies and commit after it, when
    the rest is exactly asynchronous copies (maybe each under a guard) and commits."""
    last = max((i for i, s in enumerate(head) if isinstance(s, Barrier)), default=None)
    if last is None or last == len(head) - 1:
        return None
    wait, copies = head[:last + 1], head[last + 1:]
    for s in copies:
        inner = flat_stmts(s.then_body) if isinstance(s, IfThenElse) and s.else_body is None else [s]
        if not all(isinstance(x, (AsyncCopy, AsyncCommit)) for x in inner):
            return None
    return wait, copies


def _chunks(items: list, n: int) -> list[list]:
    """`items` in `n` consecutive pieces of near-equal length (the first ones longer)."""
    q, r = divmod(len(items), n)
    out, i = [], 0
    for j in range(n):
        k = q + (1 if j < r else 0)
        out.append(items[i:i + k])
        i += k
    return out


def _pipeline_loop(loop: For, new_regs: list, names: set, bounds: dict,
                   interleave: bool | str = False) -> Stmt | None:
    body = flat_stmts(loop.body)
    lets: list[LetStmt] = []
    while body and isinstance(body[0], LetStmt):
        lets.append(body.pop(0))
    first = next((i for i, s in enumerate(body) if isinstance(s, IntrinsicCall)), None)
    if first is None or first == 0:
        return None
    head, tail = body[:first], body[first:]
    if any(isinstance(n, (IntrinsicCall, LetStmt, For)) for s in head for n in walk(s)):
        return None
    steps = _steps(tail)
    if steps is None or len(steps) < 2 or len(steps) % 2:
        return None
    regs = _operand_regs(steps)
    if regs is None:
        return None
    # the let-bound names (stage = k % s, ...) are inlined into the statements that move to
    # another iteration, so that substituting the loop variable alone moves them
    env: dict = {}
    for let in lets:
        env[let.var] = substitute(let.value, env)
    twin = {}
    for key, b in regs.items():
        twin[key] = Buffer(fresh_name(f"{b.name}_odd", names), b.shape, b.dtype, b.scope)
        new_regs.append(twin[key])
    steps = [(loads, mmas) if i % 2 == 0 else (_rename(loads, twin), _rename(mmas, twin))
             for i, (loads, mmas) in enumerate(steps)]

    def at(stmts: list, it) -> list:
        """`stmts` of iteration `it` (lets inlined), simplified."""
        mapping = {v: substitute(e, {loop.var: it}) for v, e in env.items()}
        mapping[loop.var] = it
        return [simplify(substitute(s, mapping), bounds) for s in stmts]

    nxt = loop.var + loop.step
    n = len(steps)
    new: list[Stmt] = list(lets)
    for i in range(n - 1):
        new.extend(steps[i + 1][0])
        new.extend(steps[i][1])
    more = next_iteration_exists(loop)
    split = _split_head(head) if interleave else None
    if split is not None and interleave == "spread":
        # C(k) dealt out over this iteration's steps 0..n-2 (CUTLASS's mainloop): after W(k)'s
        # barrier (the end of iteration k - 1, or the prologue), before W(k + 1)'s wait
        wait, copies = split
        new = list(lets)
        for i, issue in enumerate(_chunks(copies, n - 1)):
            new.extend(steps[i + 1][0])
            new.extend(issue)
            new.extend(steps[i][1])
        new.append(IfThenElse(more, SeqStmt(tuple(at(wait + steps[0][0], nxt)), loop.loc), None, loop.loc))
        new.extend(steps[n - 1][1])
        head = wait  # the prologue: W(0) L_0(0); C(0) runs in iteration 0's body
    elif split is None:
        new.append(IfThenElse(more, SeqStmt(tuple(at(head + steps[0][0], nxt)), loop.loc), None, loop.loc))
        new.extend(steps[n - 1][1])
    else:
        wait, copies = split
        new.append(IfThenElse(more, SeqStmt(tuple(at(wait + steps[0][0], nxt)), loop.loc), None, loop.loc))
        groups = min(COPY_GROUPS, len(copies), len(steps[n - 1][1]))
        for mmas, issue in zip(_chunks(steps[n - 1][1], groups), _chunks(at(copies, nxt), groups)):
            new.extend(mmas)
            new.append(IfThenElse(more, SeqStmt(tuple(issue), loop.loc), None, loop.loc))
    new_loop = For(loop.var, loop.start, loop.stop, loop.step, loop.kind, SeqStmt(tuple(new), loop.loc),
                   loop.annotations + (("fragment_pipeline", n),), loop.loc)
    prologue = SeqStmt(tuple(at(head + steps[0][0], loop.start)), loop.loc)
    return SeqStmt((if_any_iteration(loop, prologue, bounds), new_loop), loop.loc)


def fragment_pipeline(kernel: ThreadKernel, interleave: bool | str = False) -> ThreadKernel:
    """`kernel` with its pipelined mma loops software-pipelined by one k step, the copies of a
    later tile dealt out among the last step's mmas when `interleave` is true, over the
    iteration's steps but the last when it is "spread" (module docstring)."""

    def wants(loop: For) -> bool:
        return bool(loop.annotation("async_stages") and not loop.annotation("tma_stages")
                    and not loop.annotation("fragment_pipeline"))

    def transform(loop: For, new_regs: list, names: set, bounds: dict):
        if wants(loop):
            mode = interleave
            if mode == "spread" and loop.annotation("async_stages") < SPREAD_MIN_STAGES:
                mode = False  # the burst: see SPREAD_MIN_STAGES
            return _pipeline_loop(loop, new_regs, names, bounds, mode)
        return None

    return rewrite_loops(kernel, transform, wants)
