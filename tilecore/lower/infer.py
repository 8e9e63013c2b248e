"""Layout inference: choose a layout for every fragment of a thread-lowered kernel.

Seeds: the accumulator of a tensorized gemm takes the mma instruction's C layout over the
plan's warp grid. Propagation, repeated until nothing changes: a T.Parallel nest gives the
fragments it indexes with exactly its loop variables the layout of the one that has a layout
(written before read), and the fragments it indexes with a subset of them (`m[i]` in a loop
over i, j) the slice of that layout; a reduction gives its destination the slice of its
source's layout; a whole-fragment copy between fragments of one shape shares the layout.
When nothing propagates, the first unconstrained fragment of a T.Parallel nest gets the
default strided layout and propagation resumes; leftovers get their own default.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..contract import MmaPlan
from ..errors import TileError, TileInternalError
from ..ir.buffer import Buffer
from ..ir.stmt import Copy, For, Gemm, KernelLaunch, Reduce
from ..ir.visit import walk
from .context import LayoutMap, loc_str
from .layout import Layout, MmaLayout, default_layout, slice_layout
from .parallel import fragment_accesses, parallel_nest
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
            answer = gemm_answer(n, launch.num_threads, desc)
            if isinstance(answer, MmaPlan):
                plans[id(n)] = answer
    return plans


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

    def assign(self, buf: Buffer, lay: Layout, origin: str) -> bool:
        """Give an unconstrained fragment `lay`; True when something changed."""
        if buf.scope != "fragment" or self.map.get(buf) is not None:
            return False
        if tuple(lay.shape) != tuple(buf.shape):
            return False
        self.map.set(buf, lay, origin)
        return True

    def seed(self) -> None:
        """Tensorized gemms fix their accumulators' layouts."""
        for n in walk(self.launch.body):
            if isinstance(n, Gemm) and id(n) in self.plans:
                plan = self.plans[id(n)]
                c = n.c.buffer
                lay = MmaLayout(tuple(c.shape), self.threads, tuple(plan.warps),
                                plan.mma.operand("C").map, self.facts.warp_size)
                old = self.map.get(c)
                if old is not None and old != lay:
                    raise TileError(
                        f"layout conflict: fragment {c.name} accumulates two gemms with different "
                        f"warp layouts (first {self.map.origin(c)})", n.loc,
                        hint="give both gemms the same shape and policy, or separate accumulators")
                if old is None:
                    self.map.set(c, lay, f"T.gemm at {loc_str(n.loc)}")

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
            if base is None:
                continue
            where = f"the T.Parallel loop at {loc_str(lp.loc)}"
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

    def default_one(self) -> bool:
        """Give the first unconstrained fragment of a T.Parallel nest the default layout."""
        for lp in self.loops:
            vars_, exts, body = parallel_nest(lp)
            for buf, idx, _, _ in fragment_accesses(body):
                if self.map.get(buf) is None and len(idx) == len(vars_) and \
                        all(i is v for i, v in zip(idx, vars_)) and tuple(buf.shape) == tuple(exts):
                    return self.assign(buf, default_layout(tuple(exts), self.threads),
                                       f"the T.Parallel loop at {loc_str(lp.loc)} (default layout)")
        return False

    def run(self) -> LayoutMap:
        """Seed, propagate to a fixpoint, default the rest."""
        self.seed()
        for _ in range(1000):
            while self.propagate_once():
                pass
            if not self.default_one():
                break
        for b in self.launch.allocs:
            if b.scope == "fragment" and self.map.get(b) is None:
                self.map.set(b, default_layout(tuple(b.shape), self.threads), "its default layout")
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
