"""TMA + mbarrier stages for T.Pipelined loops (used by the `async-pipeline` pass).

On a target whose facts say `tma` (cuda:sm_90, sm_90a), a stage buffer of a `T.Pipelined`
loop (see tilecore.lower.async_pipeline) is filled by one bulk tensor copy per tile instead of
per-thread cp.async vectors when the tile-level `T.copy` that fills it qualifies:

- the copy moves a box of a global tensor (constant extents <= 256) into a whole shared buffer
  of the same dtype, at coordinates that read no memory;
- the tensor's rows are 16-byte multiples known at compile time (every dimension but the first
  is a constant), as the tensor map requires;
- the buffer's layout is one a TMA swizzle mode writes (`tma_swizzle_bytes`: row-major, or the
  32/64/128-byte swizzle with rows of exactly that span), or column panels of such boxes
  (`Panelled`, the wgmma operand layout: one copy per panel, `tma_boxes`).

lower-threads records the qualifying copies on the loop (`tile_copies`, annotation
TILE_COPIES), because the thread-level copies it emits no longer show the box. The pipeline
then uses one mbarrier per stage (the "full" ring, initialized by thread 0 at the kernel's
start): thread 0 arms stage j with the stage's total bytes (`MbarrierArrive(expect_tx)`) and
issues the stage's TMA copies on it; every thread waits for the phase of tile i,
`(i // stages) % 2`, before reading stage `i % stages`. The block barrier that
`insert-barriers` places before each refill orders the previous iteration's reads of that
stage before the copy (so no "empty" ring is needed while every thread is a consumer).
Tiles past the end are not issued (nobody waits for them); partial tiles at the tensor's edge
are zero-filled by TMA itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.buffer import Buffer
from ..ir.expr import Expr, Load, Var, binop, const
from ..ir.stmt import Copy, For, IfThenElse, LetStmt, SeqStmt, Stmt
from ..ir.thread import (
    MBARRIER_DTYPE,
    TMA_BOX_MAX,
    AsyncFence,
    MbarrierArrive,
    MbarrierInit,
    MbarrierWait,
    TmaLoad,
    tma_swizzle_bytes,
)
from ..ir.visit import substitute, walk

TILE_COPIES = "tma_tile_copies"  # For annotation: the loop body's qualifying tile copies


@dataclass(frozen=True)
class TileCopy:
    """A global -> shared `T.copy` at the top of a pipelined loop body, as lower-threads saw it:
    the thread-level shared buffer it fills, the tensor, the box origin (lowered expressions of
    the loop and block indices) and the box extents per tensor dimension."""

    shared: Buffer
    tensor: Buffer
    coords: tuple
    box: tuple
    loc: object = None
    cache_hint: str = ""  # the T.copy's L2 eviction priority (TmaLoad.cache_hint)


def tma_boxes(layout, box: tuple, itemsize: int) -> list | None:
    """How TMA writes a tile of extents `box` placed by `layout`: [(column offset, element
    offset in the buffer, box, layout of that box)], one box for a row-major or swizzled
    layout TMA writes itself, one per panel of a `Panelled` layout (each panel is a swizzled
    box); None when no TMA mode writes the layout."""
    if tma_swizzle_bytes(layout, itemsize) is not None:
        return [(0, 0, tuple(box), layout)]
    inner = getattr(layout, "inner", None)
    if inner is None or not hasattr(layout, "panel_offset") or tma_swizzle_bytes(inner, itemsize) is None:
        return None
    return [(p * layout.panel, layout.panel_offset(p), tuple(box[:-1]) + (layout.panel,), inner)
            for p in range(layout.panels)]


def box_ok(tensor: Buffer, box: tuple) -> bool:
    """Box extents TMA accepts and a tensor whose row strides are static 16-byte multiples."""
    if not all(1 <= n <= TMA_BOX_MAX for n in box):
        return False
    if not all(isinstance(n, int) for n in tensor.shape[1:]):
        return False
    stride = tensor.dtype.itemsize
    for n in reversed(tensor.shape[1:]):
        stride *= n
        if stride % 16:
            return False
    return True


def tile_copies(ctx, loop: For) -> tuple:
    """Annotations to add to the lowered `loop` (a tile-level For): (TILE_COPIES, copies) when
    the target has TMA and the loop is pipelined, listing the body's qualifying copies; else
    (). Called by lower-threads after the body is lowered (the shared buffers exist then)."""
    if not ctx.facts.get("tma") or int(loop.annotation("num_stages", 0) or 0) < 2:
        return ()
    body = loop.body.stmts if isinstance(loop.body, SeqStmt) else (loop.body,)
    out = []
    for s in body:
        if not isinstance(s, Copy):
            continue
        src, dst = s.src, s.dst
        if src.buffer.scope != "global" or dst.buffer.scope != "shared" or not dst.is_full:
            continue
        if src.buffer.dtype != dst.buffer.dtype or not ctx.has_shared(dst.buffer):
            continue
        if (src.squeezed_shape or (1,)) != (dst.squeezed_shape or (1,)):
            continue
        if any(isinstance(n, Load) for e in src.starts for n in walk(e)):
            continue
        if not box_ok(src.buffer, tuple(src.extents)):
            continue
        shared = ctx.shared(dst.buffer)
        if tma_boxes(shared.layout, tuple(src.extents), shared.dtype.itemsize) is None:
            continue
        coords = tuple(ctx.simp(e) for e in src.starts)
        out.append(TileCopy(shared, src.buffer, coords, tuple(src.extents), s.loc, s.cache_hint))
    return ((TILE_COPIES, tuple(out)),) if out else ()


def tma_buffers(loop: For, staged: dict, old: dict) -> dict:
    """buffer id -> TileCopy for the staged buffers of `loop` that TMA fills (one copy each)."""
    found: dict[int, list] = {}
    for tc in loop.annotation(TILE_COPIES, ()) or ():
        found.setdefault(id(tc.shared), []).append(tc)
    return {key: found[key][0] for key in staged if key in old and len(found.get(key, ())) == 1
            and tma_boxes(old[key].layout, found[key][0].box, old[key].dtype.itemsize) is not None}


class TmaRing:
    """The full-barrier ring of one pipelined loop: `stages` mbarriers, one per stage."""

    def __init__(self, name: str, stages: int, tx: Var, copies: dict, new: dict, stride: dict, loc):
        self.bar = Buffer(name, (stages,), MBARRIER_DTYPE, "shared")
        self.empty: Buffer | None = None  # the "empty" ring of a warp-specialized loop
        self.consumers = 0  # its arrivals per phase: every consumer thread
        self.stages = stages
        self.tx = tx
        self.copies = copies  # buffer id -> TileCopy
        self.new = new
        self.stride = stride
        self.loc = loc

    @property
    def nbytes(self) -> int:
        """Transaction bytes of one stage (every TMA copy of a tile)."""
        total = 0
        for tc in self.copies.values():
            n = tc.shared.dtype.itemsize
            for e in tc.box:
                n *= e
            total += n
        return total

    @property
    def buffers(self) -> tuple:
        """The ring's mbarrier buffers (to declare as shared memory)."""
        return (self.bar,) if self.empty is None else (self.bar, self.empty)

    def with_empty(self, name: str, consumers: int) -> None:
        """Add the "empty" ring: consumers release a stage by all arriving on its mbarrier."""
        self.empty = Buffer(name, (self.stages,), MBARRIER_DTYPE, "shared")
        self.consumers = consumers

    def init(self) -> Stmt:
        """Thread 0 initializes every stage's mbarrier for one arrival (its own expect-tx), and
        each "empty" one for every consumer's arrival."""
        body: list[Stmt] = [MbarrierInit(self.bar, const(j), 1, self.loc) for j in range(self.stages)]
        if self.empty is not None:
            body += [MbarrierInit(self.empty, const(j), self.consumers, self.loc) for j in range(self.stages)]
        body.append(AsyncFence("mbarrier_init", self.loc))
        return IfThenElse(binop("eq", self.tx, 0), SeqStmt(tuple(body), self.loc), None, self.loc)

    def arm(self, var: Var, tile: Expr, stage: Expr, simp) -> list:
        """Arm stage `stage` with its bytes and issue tile `tile` (substituted for `var`) into it."""
        body: list[Stmt] = [MbarrierArrive(self.bar, stage, self.nbytes, self.loc)]
        for key, tc in self.copies.items():
            coords = tuple(simp(substitute(c, {var: tile})) for c in tc.coords)
            for col, off, box, layout in tma_boxes(tc.shared.layout, tc.box, tc.shared.dtype.itemsize):
                at = coords[:-1] + (simp(coords[-1] + col),)
                body.append(TmaLoad(self.new[key], simp(stage * self.stride[key] + off), tc.tensor, at, box,
                                    layout, self.bar, stage, tc.loc, tc.cache_hint))
        return body

    def issue(self, var: Var, tile: Expr, stage: Expr, more: Expr | None, simp) -> Stmt:
        """Thread 0 arms stage `stage` and issues tile `tile` into it (`arm`); nothing when
        `more` is false (a tile past the end)."""
        cond = binop("eq", self.tx, 0)
        if more is not None:
            cond = binop("and", cond, more)
        body = SeqStmt(tuple(self.arm(var, tile, stage, simp)), self.loc)
        return IfThenElse(simp(cond), body, None, self.loc)

    def wait(self, index: Expr, stage: Expr, simp) -> Stmt:
        """Every thread waits until tile `index` (counted from the loop's start) has landed."""
        parity = simp(binop("mod", binop("div", index, const(self.stages)), const(2)))
        return MbarrierWait(self.bar, stage, parity, self.loc)


    def release(self, stage: Expr) -> Stmt:
        """Every consumer thread is done reading stage `stage` (warp-specialized loops)."""
        return MbarrierArrive(self.empty, stage, 0, self.loc)

    def producer(self, loop: For, names_fresh, simp, thread: int, base: Expr | None = None,
                 shift: Expr | None = None) -> Stmt:
        """The producer side of `loop`: thread `thread` waits until the consumers released
        stage `i % stages` (parity `(i // stages + 1) % 2`, which a fresh mbarrier passes at
        once), then arms it and issues tile i. Its own loop variable, so the emulator's two
        thread groups never share one. `base`: tiles the ring counted before this loop started
        (a persistent block's earlier tiles), added to i; `shift`: the first k tile of a
        stream-K unit (tilecore.lower.stream_k), added to the tile the copies read."""
        kp = Var(names_fresh(f"{loop.var.name}_produce"), loop.var.dtype)
        stage = Var(names_fresh("stage_fill"))
        i = kp - loop.start if base is None else simp(base + (kp - loop.start))
        free = simp(binop("mod", binop("add", binop("div", i, const(self.stages)), const(1)), const(2)))
        body = SeqStmt((
            LetStmt(stage, simp(binop("mod", i, const(self.stages))), self.loc),
            MbarrierWait(self.empty, stage, free, self.loc),
            *self.arm(loop.var, kp if shift is None else kp + shift, stage, simp),
        ), self.loc)
        produce = For(kp, loop.start, loop.stop, 1, "serial", body, (), self.loc)
        return IfThenElse(binop("eq", self.tx, thread), produce, None, self.loc)
