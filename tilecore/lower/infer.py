"""Layout inference: choose a layout for every fragment of a thread-lowered kernel.

Seeds: the accumulator of a tensorized gemm takes the mma instruction's C layout over the
plan's warp grid. Propagation, repeated until nothing changes: a T.Parallel nest gives the
fragments it indexes with exactly its loop variables the layout of the one that has a layout
(written before read), and the fragments it indexes with a subset of them (`m[i]` in a loop
over i, j) the slice of that layout; a reduction gives its destination the slice of its
source's layout; a whole-fragment copy between fragments of one shape shares the layout; a
fragment whose rows a nest writes through an inner serial/unrolled loop (`F[i, j, k]` in a loop
over i, j) takes the nest's layout extended by those rows (`tilecore.lower.inner_loops`), never a
default of its own.
When nothing propagates, one unconstrained fragment gets the default strided layout and
propagation resumes: reduction sources first, then the largest fragments of T.Parallel nests
(ties in program order), so the result does not depend on statement order -- a per-row vector
touched by an earlier loop must not take a layout of its own and force the reduction that
fills it through shared memory. Leftovers get their own default.

A default layout's runs are one vector access of the narrowest global/shared dtype moved
through it: over the fragments that will share the layout (those indexed by the same
T.Parallel nest with its loop variables, or copied whole into each other), the memory read
or written by those nests and by T.copy to or from them (`default_layout`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract import MmaPlan
from ..errors import TileError, TileInternalError, TileLayoutError
from ..ir.buffer import Buffer
from ..ir.index_layout import FRAGMENT_ANNOTATION
from ..ir.stmt import Copy, For, Gemm, KernelLaunch, Reduce
from ..ir.visit import walk
from .context import LayoutMap, loc_str
from .inner_loops import extend, inner_indexed_writes
from .layout import Layout, MmaLayout, TableLayout, default_layout, equivalent, slice_layout
from .parallel import (
    default_loop_layout,
    fragment_accesses,
    is_identity,
    memory_itemsize,
    parallel_nest,
    whole_fragment,
)
from .tensorize import gemm_answer

LAYOUTS_KEY = "layouts"  # the KernelLaunch annotation layout inference writes


@dataclass(frozen=True)
class FragmentLayouts:
    """The result of layout inference for one kernel launch, stored on the launch itself (its
    `annotations`, key "layouts"), so it travels with the IR through any later pass.

    `entries` are (fragment Buffer, Layout, what fixed it); buffers are matched by identity,
    the IR's identity for buffers. A leaf for the generic visitors: walking a launch never
    descends into its layouts."""

    IR_LEAF = True
    entries: tuple

    def layout_map(self) -> LayoutMap:
        """The layouts as the lowering's LayoutMap."""
        out = LayoutMap()
        for buf, lay, origin in self.entries:
            out.set(buf, lay, origin)
        return out

    @staticmethod
    def of(launch: KernelLaunch) -> FragmentLayouts | None:
        """The layouts stored on `launch`, or None when layout inference has not run on it."""
        for k, v in launch.annotations:
            if k == LAYOUTS_KEY:
                return v
        return None


def plan_gemms(launch: KernelLaunch, desc) -> dict:
    """id(Gemm) -> MmaPlan for the gemms of `launch` that `desc` tensorizes (answers the core
    asked before the pipeline ran; no hook is called here)."""
    plans = {}
    for n in walk(launch.body):
        if isinstance(n, Gemm):
            answer = gemm_answer(n, launch, desc)
            if isinstance(answer, MmaPlan):
                plans[id(n)] = answer
    return plans


def _first_difference(a: Layout, b: Layout) -> tuple:
    """(thread, register, element in a, element in b) of the first register the two layouts
    fill differently ("nothing" where one holds no element there)."""
    n = max(a.nregs, b.nregs)
    (ac, av), (bc, bv) = ((np.pad(c, ((0, 0), (0, n - c.shape[1]), (0, 0))),
                           np.pad(v, ((0, 0), (0, n - v.shape[1])))) for c, v in (a.table, b.table))
    t, r = (int(x) for x in np.argwhere((av != bv) | (av & np.any(ac != bc, axis=-1)))[0])
    show = lambda c, v: tuple(int(x) for x in c[t, r]) if v[t, r] else "nothing"  # noqa: E731
    return t, r, show(ac, av), show(bc, bv)


def _subset_dims(indices, vars_) -> list[int] | None:
    """Positions of the loop variables `indices` uses, when it is an ordered subset of them."""
    pos = []
    for i in indices:
        hit = [k for k, v in enumerate(vars_) if v is i]
        if not hit:
            return None
        pos.append(hit[0])
    if pos != sorted(set(pos)):
        return None
    return pos


class _Inference:
    def __init__(self, launch: KernelLaunch, facts, plans: dict):
        self.launch = launch
        self.threads = launch.num_threads
        self.facts = facts
        self.plans = plans
        self.map = LayoutMap()
        self.items: dict[int, int] = {}  # id(fragment) -> narrowest memory itemsize (memory_items)
        self.loops = []
        for n in walk(launch.body):
            if isinstance(n, For) and n.kind == "parallel":
                self.loops.append(n)
        inner = set()
        for lp in self.loops:
            _, _, body = parallel_nest(lp)
            for m in walk(body):
                if isinstance(m, For) and m.kind == "parallel":
                    inner.add(id(m))
            s = lp.body
            while isinstance(s, For) and s.kind == "parallel":
                inner.add(id(s))
                s = s.body
        self.loops = [lp for lp in self.loops if id(lp) not in inner]
        # fragments whose rows a nest writes through an inner loop: their layout is that nest's,
        # extended (propagate_once), never a default picked before the nest's layout is known
        self.row_written: set[int] = set()
        for lp in self.loops:
            vars_, _, body = parallel_nest(lp)
            self.row_written.update(id(w.buf) for w in inner_indexed_writes(body, vars_))

    def assign(self, buf: Buffer, lay: Layout, origin: str) -> bool:
        """Give an unconstrained fragment `lay`; True when something changed."""
        if buf.scope != "fragment" or self.map.get(buf) is not None:
            return False
        if tuple(lay.shape) != tuple(buf.shape):
            return False
        self.map.set(buf, lay, origin)
        return True

    def seed(self) -> None:
        """Tensorized gemms fix their accumulators' layouts, then `T.Fragment` annotations
        theirs (checked against a gemm's)."""
        for n in walk(self.launch.body):
            if isinstance(n, Gemm) and id(n) in self.plans:
                plan = self.plans[id(n)]
                c = n.c.buffer
                lay = MmaLayout(tuple(c.shape), self.threads, tuple(plan.warps),
                                plan.mma.operand("C").map, plan.mma.lanes)
                old = self.map.get(c)
                if old is not None and old != lay:
                    raise TileError(
                        f"layout conflict: fragment {c.name} accumulates two gemms with different "
                        f"warp layouts (first {self.map.origin(c)})", n.loc,
                        hint="give both gemms the same shape and policy, or separate accumulators")
                if old is None:
                    self.map.set(c, lay, f"T.gemm at {loc_str(n.loc)}")
        for key, value in self.launch.annotations:
            if key == FRAGMENT_ANNOTATION:
                for buf, fmap, loc in value:
                    self.annotated(buf, fmap, loc)

    def annotated(self, buf: Buffer, fmap, loc) -> None:
        """A `T.Fragment` the kernel gives `buf` (T.annotate_layout): its layout as given, unless
        it names more threads than the block has or a gemm needs another accumulator layout."""
        if fmap.threads > self.threads:
            raise TileLayoutError(
                f"the T.Fragment of {buf.name} puts elements in thread {fmap.threads - 1}, but the "
                f"block has {self.threads} threads", loc,
                hint=f"map the elements to threads 0..{self.threads - 1}")
        lay = TableLayout.of(fmap, self.threads)
        old = self.map.get(buf)
        if old is not None and not equivalent(old, lay):
            t, r, need, got = _first_difference(old, lay)
            raise TileLayoutError(
                f"the T.Fragment of {buf.name} conflicts with the layout fixed by "
                f"{self.map.origin(buf)}: register {r} of thread {t} holds element {need} there, "
                f"{got} in the annotation ({old.nregs} vs {lay.nregs} registers per thread)", loc,
                hint=f"drop the T.Fragment of {buf.name} (a tensor-core gemm decides its "
                     "accumulator's layout), or T.copy the accumulator into a fragment that has "
                     "your layout")
        if old is None:
            self.map.set(buf, lay, f"T.annotate_layout at {loc_str(loc)}")

    def propagate_once(self) -> bool:
        """One sweep of the propagation rules; True when a layout was assigned."""
        changed = False
        for lp in self.loops:
            vars_, exts, body = parallel_nest(lp)
            acc = fragment_accesses(body)
            base = None
            for want_write in (True, False):
                for buf, idx, w, _ in acc:
                    if base is None and w == want_write and len(idx) == len(vars_) and \
                            all(i is v for i, v in zip(idx, vars_)) and self.map.get(buf) is not None \
                            and tuple(buf.shape) == tuple(exts):
                        base = self.map.get(buf)
            rows = inner_indexed_writes(body, vars_)
            if base is None and rows and not any(is_identity(idx, vars_) and tuple(b.shape) == tuple(exts)
                                                 for b, idx, _, _ in acc):
                # no fragment decides this nest: the lowering deals it by the strided default
                base = default_loop_layout(exts, self.threads, body, self.facts.vector_bytes)
            if base is None:
                continue
            where = f"the T.Parallel loop at {loc_str(lp.loc)}"
            for w in rows:  # rows written through inner loops (tilecore.lower.inner_loops)
                lay = extend(base, w)
                if lay is not None:
                    changed |= self.assign(w.buf, lay, f"{where} (whole rows)")
            for buf, idx, _, _ in acc:
                dims = _subset_dims(idx, vars_)
                if dims is None:
                    continue
                lay = base
                for d in reversed([k for k in range(len(vars_)) if k not in dims]):
                    lay = slice_layout(lay, d)
                changed |= self.assign(buf, lay, where)
        for n in walk(self.launch.body):
            if isinstance(n, Reduce) and n.src.scope == "fragment":
                src = self.map.get(n.src)
                if src is not None and n.dst.scope == "fragment":
                    changed |= self.assign(n.dst, slice_layout(src, n.dim),
                                           f"T.reduce_{n.kind} at {loc_str(n.loc)}")
            elif isinstance(n, Copy) and n.src.buffer.scope == "fragment" \
                    and n.dst.buffer.scope == "fragment" and n.src.is_full and n.dst.is_full \
                    and tuple(n.src.buffer.shape) == tuple(n.dst.buffer.shape):
                a, b = self.map.get(n.src.buffer), self.map.get(n.dst.buffer)
                where = f"T.copy at {loc_str(n.loc)}"
                if a is not None and b is None:
                    changed |= self.assign(n.dst.buffer, a, where)
                elif b is not None and a is None:
                    changed |= self.assign(n.src.buffer, b, where)
        return changed

    def memory_items(self) -> dict:
        """id(fragment) -> the narrowest itemsize of the global/shared memory moved through the
        layout it will share (see the module docstring); fragments touching none are absent."""
        parent: dict[int, int] = {}

        def find(b: int) -> int:
            while parent.setdefault(b, b) != b:
                b = parent[b]
            return b

        def union(a: Buffer, b: Buffer) -> None:
            parent[find(id(a))] = find(id(b))

        touched: list[tuple[Buffer, int]] = []
        for lp in self.loops:
            vars_, exts, body = parallel_nest(lp)
            members = [b for b, idx, _, _ in fragment_accesses(body)
                       if is_identity(idx, vars_) and tuple(b.shape) == tuple(exts)]
            for m in members[1:]:
                union(members[0], m)
            item = memory_itemsize(body)
            if members and item is not None:
                touched.append((members[0], item))
        for n in walk(self.launch.body):
            if not isinstance(n, Copy):
                continue
            src, dst = n.src, n.dst
            shape = src.squeezed_shape or (1,)
            if src.buffer.scope == dst.buffer.scope == "fragment":
                if src.is_full and dst.is_full and tuple(src.buffer.shape) == tuple(dst.buffer.shape):
                    union(src.buffer, dst.buffer)
                continue
            for frag, mem in ((src, dst), (dst, src)):
                if mem.buffer.scope in ("global", "shared") and whole_fragment(frag, shape):
                    touched.append((frag.buffer, mem.buffer.dtype.itemsize))
        best: dict[int, int] = {}
        for b, item in touched:
            root = find(id(b))
            best[root] = min(item, best.get(root, item))
        return {k: best[find(k)] for k in list(parent) if find(k) in best}

    def default_for(self, buf: Buffer) -> Layout:
        """The default layout of `buf`, its runs sized for the memory moved through it."""
        item = self.items.get(id(buf), buf.dtype.itemsize)
        return default_layout(tuple(buf.shape), self.threads, item, self.facts.vector_bytes)

    def default_one(self) -> bool:
        """Give one unconstrained fragment the default layout: a reduction source first, then
        the largest fragment of a T.Parallel nest indexed with the nest's loop variables
        (ties in program order). Reductions and large fragments decide the layouts of the per-row
        vectors they produce; the reverse would route the reduction through shared memory."""
        sources = {id(n.src) for n in walk(self.launch.body)
                   if isinstance(n, Reduce) and n.src.scope == "fragment"}
        best = None
        for order, lp in enumerate(self.loops):
            vars_, exts, body = parallel_nest(lp)
            for buf, idx, _, _ in fragment_accesses(body):
                if self.map.get(buf) is None and is_identity(idx, vars_) and tuple(buf.shape) == tuple(exts) \
                        and id(buf) not in self.row_written:
                    key = (id(buf) not in sources, -(buf.numel or 0), order)
                    if best is None or key < best[0]:
                        best = (key, buf, f"the T.Parallel loop at {loc_str(lp.loc)} (default layout)")
        for n in walk(self.launch.body):
            if isinstance(n, Reduce) and n.src.scope == "fragment" and self.map.get(n.src) is None \
                    and id(n.src) not in self.row_written:
                key = (False, -(n.src.numel or 0), len(self.loops))
                if best is None or key < best[0]:
                    best = (key, n.src, f"T.reduce_{n.kind} at {loc_str(n.loc)} (default layout of "
                                        "its source)")
        if best is None:
            return False
        _, buf, origin = best
        return self.assign(buf, self.default_for(buf), origin)

    def run(self) -> LayoutMap:
        """Seed, propagate to a fixpoint, default the rest."""
        self.seed()
        self.items = self.memory_items()
        for _ in range(1000):
            while self.propagate_once():
                pass
            if not self.default_one():
                break
        for b in self.launch.allocs:
            if b.scope == "fragment" and self.map.get(b) is None:
                self.map.set(b, self.default_for(b), "its default layout")
        return self.map


def infer_layouts(launch: KernelLaunch, desc) -> tuple[LayoutMap, dict]:
    """(layouts, gemm plans) for one kernel launch on `desc` (a TargetDesc)."""
    plans = plan_gemms(launch, desc)
    return _Inference(launch, desc.facts, plans).run(), plans


def annotate_layouts(launch: KernelLaunch, desc) -> KernelLaunch:
    """`launch` with its inferred fragment layouts stored in its annotations."""
    layouts, _ = infer_layouts(launch, desc)
    entries = tuple((b, layouts.get(b), layouts.origin(b)) for b in layouts.keep)
    notes = tuple((k, v) for k, v in launch.annotations if k != LAYOUTS_KEY)
    return KernelLaunch(launch.grid, launch.block_vars, launch.threads, launch.allocs, launch.body,
                        notes + ((LAYOUTS_KEY, FragmentLayouts(entries)),), launch.loc)


def stored_layouts(launch: KernelLaunch, desc) -> LayoutMap:
    """The layouts layout inference stored on `launch` (inferred now when none are stored).

    A fragment allocated by the launch with no stored layout means a pass between
    layout-inference and lower-threads added it: that is a pipeline bug, reported rather
    than lowered with a guess."""
    stored = FragmentLayouts.of(launch)
    if stored is None:
        return infer_layouts(launch, desc)[0]
    out = stored.layout_map()
    missing = [b.name for b in launch.allocs if b.scope == "fragment" and out.get(b) is None]
    if missing:
        raise TileInternalError(f"fragments {', '.join(missing)} of the kernel at {loc_str(launch.loc)} "
                                "have no layout: a pass after layout-inference allocated them; anchor "
                                "it before:layout-inference")
    return out
