"""The questions lowering asks a backend about `gemm`, and the shape of its answer.

The types live in `tilecore.contract` (re-exported here for backends written against this
module). The core asks once per distinct gemm, before the pipeline runs, through the
`tile_gemm_tensorize` hook (see `tilecore.plugins.describe`); the backend answers with
instructions as data (`tilecore.ir.intrinsic.Intrinsic`), so the core never names a vendor.
"""

from __future__ import annotations

from ..contract import Declined, GemmQuery, MmaPlan
from ..ir.stmt import Gemm, KernelLaunch
from ..ir.visit import walk

__all__ = ["Declined", "GemmQuery", "MmaPlan", "fixed_layouts", "gemm_answer", "gemm_queries",
           "gemm_query", "layout_notes", "warp_grid"]


def gemm_query(g: Gemm, threads: int, warp_size: int, requests: dict | None = None) -> GemmQuery:
    """The tensorization question for one gemm of a block of `threads` threads; `requests` are
    the launch's `T.annotate_layout` layouts (`smem.layout_requests`), which name the operands a
    descriptor cannot read (`GemmQuery.fixed_layouts`)."""
    m, n, k = g.mnk
    return GemmQuery(g.a.buffer.dtype, g.b.buffer.dtype, g.c.buffer.dtype, m, n, k, g.transpose_a,
                     g.transpose_b, g.a.buffer.scope, g.b.buffer.scope, threads, warp_size, g.policy,
                     fixed_layouts(g, requests or {}))


def fixed_layouts(g: Gemm, requests: dict) -> tuple:
    """The shared operands ("A", "B") of `g` whose annotated layout no matrix descriptor reads."""
    from .smem import descriptor_readable

    return tuple(name for name, r in (("A", g.a), ("B", g.b))
                 if r.buffer.scope == "shared" and id(r.buffer) in requests
                 and not descriptor_readable(r.buffer, requests[id(r.buffer)][0]))


def core_decline(g: Gemm) -> Declined | None:
    """Why the core lowers `g` without tensor cores whatever the backend offers, or None."""
    c = g.c.buffer
    if c.scope != "fragment" or not g.c.is_full:
        return Declined(f"the accumulator {c.name} is not a whole fragment")
    for name, r in (("A", g.a), ("B", g.b)):
        if r.buffer.scope not in ("shared", "fragment"):
            return Declined(f"operand {name} ({r.buffer.name}) is in {r.buffer.scope} memory; tensor "
                            "cores read shared memory or fragments (T.copy it to T.alloc_shared first)")
    return None


def gemm_queries(func, warp_size: int) -> list[GemmQuery]:
    """The query of every gemm of `func` (a PrimFunc) the core would offer to a backend."""
    from .smem import layout_requests

    out = []
    for launch in walk(func.body):
        if isinstance(launch, KernelLaunch):
            for g in walk(launch.body):
                if isinstance(g, Gemm) and core_decline(g) is None:
                    out.append(gemm_query(g, launch.num_threads, warp_size, layout_requests(launch)))
    return out


_WGMMA_WARNED: set = set()


def gemm_answer(g: Gemm, launch: KernelLaunch, desc) -> MmaPlan | Declined:
    """How `g` (in `launch`) is lowered on `desc` (a TargetDesc): a plan from the answers asked
    before the pipeline, or the reason it is not tensorized.

    `tl.disable_wgmma` (Options.disable_wgmma) cannot pick another instruction here: the
    backend answered the query before the pipeline, without the options. A wgmma answer under
    that option is therefore kept with a TileConfigWarning (once per target) rather than
    silently dropping the user's setting; `tl.disable_tma_lower` / `disable_warp_specialized`
    are honoured by the pipeline."""
    from .smem import layout_requests

    answer = core_decline(g) or desc.tensorize(
        gemm_query(g, launch.num_threads, desc.facts.warp_size, layout_requests(launch)))
    options = getattr(desc, "options", None)
    if getattr(options, "disable_wgmma", False) and isinstance(answer, MmaPlan) \
            and answer.mma.kind == "wgmma" and str(desc.target) not in _WGMMA_WARNED:
        import warnings

        from ..errors import TileConfigWarning

        _WGMMA_WARNED.add(str(desc.target))
        loc = g.loc
        warnings.warn_explicit(
            f"pass_configs key 'tl.disable_wgmma' is not honoured on {desc.target}: the backend "
            "tensorizes this gemm with wgmma (compile for cuda:sm_80 for mma.sync)",
            TileConfigWarning, loc.file if loc else "<tilecore>", loc.line if loc else 0)
    return answer


def layout_notes(launch: KernelLaunch, desc) -> list:
    """A "performance" Diagnostic, at the `T.annotate_layout` line, for every shared operand whose
    annotated layout made the backend answer a gemm of `launch` with a slower instruction than
    it has (`MmaPlan.note`): the buffer, the gemm's line, and the fix."""
    from ..contract import Diagnostic
    from ..ir.smem_layout import LayoutRequest
    from .smem import layout_requests

    requests = layout_requests(launch)
    out = []
    for g in walk(launch.body):
        if not isinstance(g, Gemm):
            continue
        answer = gemm_answer(g, launch, desc)
        if not isinstance(answer, MmaPlan) or not answer.note:
            continue
        for name in fixed_layouts(g, requests):
            buf = (g.a if name == "A" else g.b).buffer
            req, loc = requests[id(buf)]
            asked = (f"T.make_{req.kind}_layout({buf.name})" if isinstance(req, LayoutRequest)
                     else req.describe())
            at = f" (line {g.loc.line})" if g.loc is not None else ""
            out.append(Diagnostic(
                "performance",
                f"T.annotate_layout gives {buf.name} {asked}: T.gemm({g.a.buffer.name}, "
                f"{g.b.buffer.name}, {g.c.buffer.name}){at} runs on {answer.mma.name} on "
                f"{desc.target}, reading {buf.name} through that layout, because {answer.note}; "
                f"use T.make_swizzled_layout({buf.name}) or drop the annotation", loc))
    return out


def warp_grid(policy: str, num_warps: int, m: int, n: int, tile_m: int, tile_n: int) -> tuple | None:
    """(wm, wn) with wm * wn == num_warps dividing M into tile_m rows and N into tile_n columns:
    `full_row` prefers wn = 1, `full_col` prefers wm = 1, `square` the most square warp tiles.
    None when no split divides the block tile."""
    cands = []
    for wm in range(1, num_warps + 1):
        if num_warps % wm:
            continue
        wn = num_warps // wm
        if m % (wm * tile_m) == 0 and n % (wn * tile_n) == 0:
            cands.append((wm, wn))
    if not cands:
        return None
    if policy == "full_row":
        return max(cands, key=lambda c: c[0])
    if policy == "full_col":
        return max(cands, key=lambda c: c[1])
    return min(cands, key=lambda c: (abs(m // c[0] - n // c[1]), c[1]))
