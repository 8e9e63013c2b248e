"""Shared-memory layout choice: one `SharedLayout` per shared buffer, from the target's facts.

The target declares its shared-memory banks as facts (`shared_bank_bytes`, `shared_banks`; a
*line* is their product, e.g. 32 banks of 4 bytes) and its widest vector access
(`vector_bytes`). A warp's access is served in *phases* of one line each (8 lanes of 16 bytes,
or 32 lanes of 4 bytes); two words of one phase in the same bank but different lines conflict.
How a buffer is accessed is read from the tile program:

- rows of a gemm operand are read by the backend's loader intrinsic (`ldmatrix`): one phase
  reads `line / row_bytes` consecutive rows at the same column, where `row_bytes` is the
  loader's matrix row (its lane-map shape, never a constant here); an accumulator staged for
  an epilogue is written in the same column pattern;
- vector copies move `vector_bytes` per lane along rows (row-major order);
- a shared tile the program itself writes from a fragment (`T.copy(acc_o, O_shared)` before
  `O_shared` leaves by vector copies) is written in that same column pattern as an epilogue
  staging tile, so it may be swizzled too (row-major, its rows a multiple of 128 bytes apart,
  made those stores 8-way conflicted); `Options.disable_staged_swizzle` keeps such tiles to
  the copy-only choice (row-major), for A/B runs.

Candidates are tried in order — row-major, the XOR swizzles `Swizzle<bits, log2(chunk),
shift>` with 16-byte (vector-width) chunks, then padding one chunk per row — and the first with
the fewest conflicts (then the fewest padding bytes) wins, checked by tabulating the phases
with the layout's NumPy definition. Buffers only touched element-wise stay row-major.
`T.annotate_layout` overrides the choice (`LayoutRequest`, or an explicit `SharedLayout`, a
`T.Layout`'s `IndexMapped` included); a wgmma operand takes only the canonical placement, so a
gemm whose shared operand is annotated otherwise is offered to the backend with that operand in
`GemmQuery.fixed_layouts` (`descriptor_readable`), and the CUDA backend answers with mma.sync.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TileLayoutError
from ..ir.buffer import Buffer
from ..ir.smem_layout import (
    LAYOUT_ANNOTATION,
    LayoutRequest,
    Padded,
    RowMajor,
    SharedLayout,
    Swizzled,
    canonical_layout,
    tile_view,
)
from ..ir.stmt import Copy, Gemm
from ..ir.visit import walk


class SmemLayoutError(TileLayoutError):
    """A shared-memory layout the kernel asked for cannot be used for that buffer."""


@dataclass(frozen=True)
class BankModel:
    """Shared-memory banks: `banks` of `bank_bytes`; `vector_bytes` is the widest access."""

    bank_bytes: int
    banks: int
    vector_bytes: int

    @property
    def line(self) -> int:
        """Bytes one phase of a warp access covers without conflicts."""
        return self.bank_bytes * self.banks


def bank_model(facts) -> BankModel | None:
    """The bank geometry the target declares, or None when it declares none."""
    bb, nb = facts.get("shared_bank_bytes"), facts.get("shared_banks")
    if not bb or not nb:
        return None
    return BankModel(int(bb), int(nb), int(facts.vector_bytes))


@dataclass(frozen=True)
class Pattern:
    """One way the warps access a buffer: `kind` "column" (a phase reads consecutive rows at one
    column, `width` bytes each) or "row" (a phase reads consecutive `width`-byte pieces in
    row-major order)."""

    kind: str
    width: int


def phases(pattern: Pattern, rows: int, cols: int, itemsize: int, model: BankModel):
    """(row, col) starts of every lane of every phase, as arrays of shape (phases, lanes)."""
    we = max(1, pattern.width // itemsize)  # elements per lane access
    lanes = max(1, model.line // pattern.width)
    pieces = cols // we
    if pieces == 0:
        return None
    if pattern.kind == "column":
        lanes = min(lanes, rows)
        r0 = np.arange(0, rows - lanes + 1, lanes)
        r = r0[:, None, None] + np.arange(lanes)[None, None, :]
        c = np.broadcast_to((np.arange(pieces) * we)[None, :, None], (len(r0), pieces, lanes))
        r = np.broadcast_to(r, c.shape)
        return r.reshape(-1, lanes), c.reshape(-1, lanes)
    total = rows * pieces
    lanes = min(lanes, total)
    q = np.arange(total - total % lanes).reshape(-1, lanes)
    return q // pieces, q % pieces * we


def conflict_degree(layout: SharedLayout, itemsize: int, model: BankModel, patterns) -> int:
    """The worst number of distinct words one bank serves in one phase (1 = conflict-free)."""
    worst = 1
    for pat in patterns:
        ph = phases(pat, layout.rows, layout.cols, itemsize, model)
        if ph is not None:
            worst = max(worst, _phase_degree(layout, *ph, pat.width, itemsize, model))
    return worst


def _phase_degree(layout: SharedLayout, r, c, width: int, itemsize: int, model: BankModel) -> int:
    """The conflict degree of accesses of `width` bytes at (r, c), arrays of shape (phases,
    lanes): each row one phase."""
    addr = layout.offset_np(r, c) * itemsize  # byte address of each lane's access
    words = max(1, width // model.bank_bytes)
    w = (addr[:, :, None] // model.bank_bytes + np.arange(words)).reshape(addr.shape[0], -1)
    bank = w % model.banks
    ph_id = np.broadcast_to(np.arange(w.shape[0])[:, None], w.shape)
    # distinct (phase, bank, word) triples, then how many per (phase, bank): each triple as
    # one int64 key (np.unique over rows, axis=0, sorted row views: 10x slower)
    lo = int(w.min())
    span = int(w.max()) - lo + 1
    keys = np.unique((ph_id * model.banks + bank).ravel() * span + (w.ravel() - lo))
    _, counts = np.unique(keys // span, return_counts=True)
    return int(counts.max())


def store_degree(layout: SharedLayout, coords, valid, run: int, itemsize: int, model: BankModel,
                 warp: int) -> int:
    """The conflict degree of a fragment's stores into `layout`, exactly as they are issued:
    for each aligned run of `run` registers, every warp's threads store `run` elements at their
    (row, col) of `coords` [threads, nregs, 2] (`valid` [threads, nregs]), served in phases of
    `line / (run * itemsize)` lanes. A lane holding nothing is given a neighbour's address (a
    broadcast costs nothing)."""
    width = run * itemsize
    lanes = max(1, min(warp, model.line // width))
    threads = coords.shape[0] - coords.shape[0] % lanes
    rows, cols = [], []
    for reg in range(0, coords.shape[1], run):
        r = coords[:threads, reg, 0].reshape(-1, lanes)
        c = coords[:threads, reg, -1].reshape(-1, lanes)
        v = valid[:threads, reg].reshape(-1, lanes)
        keep = v.any(axis=1)
        first = np.argmax(v, axis=1)[:, None]
        r = np.where(v, r, np.take_along_axis(r, first, 1))[keep]
        c = np.where(v, c, np.take_along_axis(c, first, 1))[keep]
        rows.append(r)
        cols.append(c)
    if not rows or not sum(len(r) for r in rows):
        return 1
    return _phase_degree(layout, np.concatenate(rows), np.concatenate(cols), width, itemsize, model)


def _log2(n: int) -> int | None:
    return n.bit_length() - 1 if n >= 1 and n & (n - 1) == 0 else None


def swizzles(rows: int, cols: int, itemsize: int, model: BankModel) -> list[Swizzled]:
    """Every valid `Swizzled` layout of the tile with vector-width chunks, fewest bits first."""
    chunk = model.vector_bytes // itemsize
    base, line_chunks = _log2(chunk), _log2(model.line // model.vector_bytes)
    if base is None or line_chunks is None or line_chunks < 1 or cols % chunk:
        return []
    out = []
    top = (rows * cols).bit_length()
    for bits in range(1, line_chunks + 1):
        for shift in range(bits, max(bits, top - base - bits) + 1):
            try:
                out.append(Swizzled(rows, cols, bits, base, shift))
            except ValueError:
                continue
    return out


def choose(rows: int, cols: int, itemsize: int, model: BankModel | None, patterns,
           allow_swizzle: bool = True, allow_rowmajor: bool = True) -> SharedLayout | None:
    """The candidate with the fewest bank conflicts under `patterns`, then the least padding."""
    if model is None or not patterns:
        return RowMajor(rows, cols) if allow_rowmajor else None
    cands: list[SharedLayout] = [RowMajor(rows, cols)] if allow_rowmajor else []
    if allow_swizzle:
        cands += swizzles(rows, cols, itemsize, model)
    if allow_rowmajor:
        pad = model.vector_bytes // itemsize
        if pad >= 1 and rows > 1:
            cands.append(Padded(rows, cols, pad))
    best, best_key = None, None
    for k, lay in enumerate(cands):
        key = (conflict_degree(lay, itemsize, model, patterns), lay.size - rows * cols, k)
        if best_key is None or key < best_key:
            best, best_key = lay, key
        if key[0] == 1 and key[1] == 0:
            break  # conflict-free without padding: nothing later can be better
    return best


def layout_requests(launch) -> dict:
    """id(shared buffer) -> (the layout `T.annotate_layout` gives it, the annotation's location),
    from the annotations of `launch` (a KernelLaunch)."""
    out: dict = {}
    for key, value in launch.annotations:
        if key == LAYOUT_ANNOTATION:
            for buf, req, loc in value:
                out[id(buf)] = (req, loc)
    return out


def descriptor_readable(buf: Buffer, req) -> bool:
    """Whether the layout `req` that `T.annotate_layout` gives shared `buf` is one a matrix
    descriptor (wgmma) reads: `T.make_swizzled_layout` (made the canonical layout for such an
    operand) or a layout with the canonical placement (`canonical_layout`)."""
    if isinstance(req, LayoutRequest):
        return req.kind == "swizzled"
    try:
        rows, cols = tile_view(buf)
    except ValueError:  # a symbolic shape: no canonical layout to compare with
        return False
    want = canonical_layout(rows, cols, buf.dtype.itemsize)
    return want is not None and same_placement(req, want)


def same_placement(a, b: SharedLayout) -> bool:
    """True when layout `a` (any annotation value) stores every element of the tile where `b`
    does, in as many elements (a one-panel `Panelled` is a `Swizzled`; an index map may be
    either)."""
    if not isinstance(a, SharedLayout) or (a.rows, a.cols, a.size) != (b.rows, b.cols, b.size):
        return False
    r, c = np.indices((b.rows, b.cols))
    return bool(np.array_equal(a.offset_np(r, c), b.offset_np(r, c)))


# ----------------------------------------------------------------------------- per kernel


class SmemPlanner:
    """The layout decisions of one kernel launch: how each shared buffer is used (scanned
    once from the tile program), the user's annotations, and the chosen layouts."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.model = bank_model(ctx.facts)
        self.uses: dict[int, set] = {}
        self.loader_width: dict[int, int] = {}
        self.requests: dict[int, tuple] = {}
        self.chosen: dict[int, SharedLayout] = {}
        self.extra: dict = {}  # buffers lowering creates (staging tiles), by key
        self.wgmma_loc: dict = {}  # wgmma operand buffers -> the gemm's location (for errors)
        staged_swizzle = not getattr(ctx.options, "disable_staged_swizzle", False)
        for n in walk(ctx.launch.body):
            if isinstance(n, Gemm):
                plan = ctx.plans.get(id(n))
                for r in (n.a, n.b):
                    if r.buffer.scope == "shared" and plan is not None and plan.mma.kind == "wgmma":
                        # read by the tensor cores through a descriptor: a canonical layout
                        self._use(r.buffer, "wgmma")
                        self.wgmma_loc.setdefault(id(r.buffer), n.loc)
                    elif r.buffer.scope == "shared" and plan is not None:
                        self._use(r.buffer, "gemm")
                        for ld in getattr(plan, "loaders", ()) or ():
                            width = ld.shape[-1] * r.buffer.dtype.itemsize
                            self.loader_width[id(r.buffer)] = width
            elif isinstance(n, Copy):
                for r in (n.src, n.dst):
                    if r.buffer.scope == "shared":
                        self._use(r.buffer, "copy")
                if n.src.buffer.scope == "fragment" and n.dst.buffer.scope == "shared" and staged_swizzle:
                    # a tile the kernel stages itself (FlashAttention's O_shared): the fragment
                    # writes it in the accumulator's column pattern, as an epilogue staging tile
                    self._use(n.dst.buffer, "stage")
        self.requests.update(layout_requests(ctx.launch))

    def _use(self, buf: Buffer, kind: str) -> None:
        self.uses.setdefault(id(buf), set()).add(kind)

    def mark_staging(self, buf: Buffer) -> None:
        """Declare `buf` an accumulator staging tile (written in the column pattern of the
        accumulator layout, read by vector copies)."""
        self._use(buf, "stage")

    def patterns(self, buf: Buffer) -> list[Pattern]:
        """The access patterns the layout of `buf` must serve."""
        if self.model is None:
            return []
        uses = self.uses.get(id(buf), set())
        vec = self.model.vector_bytes
        out = []
        if "gemm" in uses:
            out.append(Pattern("column", self.loader_width.get(id(buf), vec)))
        if "stage" in uses:
            out.append(Pattern("column", vec))
        if uses:
            out.append(Pattern("row", vec))
        return out

    def layout(self, buf: Buffer) -> SharedLayout:
        """The layout of shared buffer `buf` (decided once)."""
        got = self.chosen.get(id(buf))
        if got is None:
            got = self._decide(buf)
            self.chosen[id(buf)] = got
        return got

    def _decide(self, buf: Buffer) -> SharedLayout:
        rows, cols = tile_view(buf)
        item = buf.dtype.itemsize
        req = self.requests.get(id(buf))
        if req is not None:
            return self._requested(buf, rows, cols, *req)
        uses = self.uses.get(id(buf), set())
        if "wgmma" in uses:
            return self._canonical(buf, rows, cols)
        if len(buf.shape) < 2:
            return RowMajor(rows, cols)
        swizzle = bool(uses & {"gemm", "stage"})
        return choose(rows, cols, item, self.model, self.patterns(buf), allow_swizzle=swizzle)

    def _canonical(self, buf: Buffer, rows: int, cols: int) -> SharedLayout:
        """The canonical (panelled, swizzled) layout a wgmma descriptor reads: the widest
        swizzle span that divides a row."""
        lay = canonical_layout(rows, cols, buf.dtype.itemsize)
        if lay is None:
            raise SmemLayoutError(
                f"{buf.name} ({rows}x{cols} {buf.dtype.name}) is a wgmma operand, but no canonical "
                f"shared layout fits it (rows must come in groups of 8 and a row must be a multiple "
                f"of 32 bytes)", self.wgmma_loc.get(id(buf)),
                hint="make the tile's last dimension a multiple of 32 bytes and the others of 8")
        return lay

    def _requested(self, buf: Buffer, rows: int, cols: int, req, loc) -> SharedLayout:
        item = buf.dtype.itemsize
        target = self.ctx.facts.target
        if "wgmma" in self.uses.get(id(buf), set()):
            # the gemm query named such an operand (GemmQuery.fixed_layouts), and a backend
            # with another instruction answers with it: this is reached only when none has
            want = self._canonical(buf, rows, cols)
            if descriptor_readable(buf, req):
                return want
            asked = req.describe() if isinstance(req, SharedLayout) else f"T.make_{req.kind}_layout"
            raise SmemLayoutError(
                f"T.annotate_layout gives {buf.name} a layout the tensor cores (wgmma) cannot read "
                f"through a descriptor on {target} ({asked}; a descriptor reads {want.describe()})",
                loc, hint=f"use T.make_swizzled_layout({buf.name}) (the canonical swizzle), a "
                          "T.Layout with that placement, or drop the annotation")
        if isinstance(req, SharedLayout):
            if (req.rows, req.cols) != (rows, cols):
                raise SmemLayoutError(
                    f"T.annotate_layout gives {buf.name} a {req.rows}x{req.cols} layout, but the "
                    f"buffer is {rows}x{cols} (leading dimensions flattened into rows)", loc,
                    hint="build the layout for the buffer's own shape")
            return req
        assert isinstance(req, LayoutRequest)
        if req.kind == "row_major":
            return RowMajor(rows, cols)
        if req.kind == "padded":
            pad = req.pad
            if pad is None:
                vec = self.model.vector_bytes if self.model else self.ctx.facts.vector_bytes
                pad = max(1, vec // item)
            return Padded(rows, cols, pad)
        if self.model is None:
            raise SmemLayoutError(
                f"T.make_swizzled_layout({buf.name}): {target} declares no shared-memory bank "
                f"geometry (facts shared_bank_bytes, shared_banks), so no swizzle can be chosen",
                loc, hint="pass an explicit tilecore.ir.smem_layout.Swizzled(rows, cols, bits, "
                          "base, shift), or drop the annotation")
        pats = [Pattern("column", self.loader_width.get(id(buf), self.model.vector_bytes)),
                Pattern("row", self.model.vector_bytes)]
        got = choose(rows, cols, item, self.model, pats, allow_rowmajor=False)
        if got is None:
            raise SmemLayoutError(
                f"T.make_swizzled_layout({buf.name}): a {rows}x{cols} {buf.dtype.name} tile cannot "
                f"be swizzled in {self.model.vector_bytes}-byte chunks on {target} (rows must be "
                f"whole chunks and the tile a whole number of swizzle periods)", loc,
                hint="use T.make_padded_layout, a tile whose rows are a multiple of "
                     f"{self.model.vector_bytes} bytes, or no annotation")
        return got


def planner(ctx) -> SmemPlanner:
    """The kernel's planner, made on first use (the lowering context keeps it)."""
    p = getattr(ctx, "_smem_planner", None)
    if p is None:
        p = SmemPlanner(ctx)
        ctx._smem_planner = p
    return p
