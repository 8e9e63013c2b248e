"""Target-neutral lowering from tile IR to thread IR, for targets whose facts say
`lowers_to_threads` (CUDA, HIP, Metal, and the `emu` emulator of them).

Passes, in order (their names are anchors for backends' `tile_passes`):

- ``reducer-partials``: `T.alloc_reducer` updates accumulate into partial fragments shaped like
  their T.Parallel nests, reduced into the reducer at `T.finalize_reducer` (tile IR to tile IR);
- ``layout-inference``: a layout for every fragment, stored on its KernelLaunch;
- ``lower-threads``: the KernelLaunch becomes a ThreadKernel (T.Parallel, copy, fill, reduce,
  cumsum, gemm, atomics partitioned over threads);
- ``async-pipeline``: T.Pipelined loops become multi-stage asynchronous-copy pipelines where
  the target has asynchronous copies (facts `async_copy_sizes`) and the copies qualify;
- ``prefetch-pipelined``: the other T.Pipelined loops load the next tile into registers during
  the math;
- ``insert-barriers``: block barriers wherever shared memory passes between threads (skipped
  under ``pass_configs={"tl.disable_thread_storage_sync": True}``);
- ``warpgroup-turns`` (option ``warpgroup_turns``): warp-specialized consumer warpgroups
  take turns issuing their gemms (FlashAttention-3's scheduler barrier);
- ``fragment-pipeline``: in asynchronous-copy pipelines of mma.sync gemms, the next k tile's
  first operand fragments load before this tile's last mmas;
- ``wide-offsets``: int64 offsets into global buffers that may hold 2^31 elements or more.

Every pass is ``(Module, TargetDesc) -> Module`` and reads the backend's answers (facts,
tensorization) from the description; none calls the plugin manager.
"""

from __future__ import annotations

from ..contract import Diagnostic, MmaPlan
from ..ir.module import Module
from ..ir.stmt import Gemm, KernelLaunch
from ..ir.thread import ThreadKernel
from ..ir.visit import rewrite, walk
from ..passes.base import Pass
from ..passes.reg_budget import unapplied_hints
from ..target import TargetDesc
from .async_pipeline import async_pipeline
from .barrier import insert_barriers
from .context import LayoutMap, LowerCtx
from .fragment_pipeline import fragment_pipeline
from .indexing import forget as forget_simplified
from .infer import annotate_layouts, plan_gemms, stored_layouts
from .layout import MmaLayout
from .pingpong import pingpong, suspend_hints
from .prefetch import prefetch
from .proxy_fences import prune_proxy_fences
from .reducers import reducer_partials
from .smem_plan import plan_kernel
from .tensorize import gemm_answer, layout_notes
from .threads import lower_launch
from .wg_turns import warpgroup_turns
from .wgmma_async import place_async_waits
from .wgmma_groups import merge_wgmma_waits
from .wide_offsets import wide_offsets

# The node each pass below rewrites, handed whole to its function (`rewrite(..., stop=...)`):
# kernels do not nest, so nothing inside one needs visiting to find it.
_LAUNCH = (KernelLaunch,)
_KERNEL = (ThreadKernel,)


def _lowers(desc: TargetDesc) -> bool:
    return desc.facts.lowers_to_threads


def _pipelines_fragments(desc: TargetDesc) -> bool:
    return desc.facts.lowers_to_threads and not desc.options.disable_fragment_pipeline


def _pingpongs(desc: TargetDesc) -> bool:
    return desc.facts.lowers_to_threads and getattr(desc.options, "ws_pingpong", False)


def _turns(desc: TargetDesc) -> bool:
    return desc.facts.lowers_to_threads and getattr(desc.options, "warpgroup_turns", False)


def _suspend_hinted(desc: TargetDesc) -> bool:
    return desc.facts.lowers_to_threads and getattr(desc.options, "mbarrier_suspend_hint", False)


def _syncs(desc: TargetDesc) -> bool:
    return desc.facts.lowers_to_threads and not desc.options.disable_thread_storage_sync


def layout_inference(module: Module, desc: TargetDesc) -> Module:
    """Invariant: every KernelLaunch carries, in its annotations ("layouts"), a layout for each
    of its fragments (seeded by the tensorized gemms' accumulators); conflicting gemm layouts
    raise a TileError."""

    def fn(n):
        return annotate_layouts(n, desc) if isinstance(n, KernelLaunch) else None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn, stop=_LAUNCH)))


def _simt_notes(launch: KernelLaunch, desc: TargetDesc, layouts: LayoutMap) -> list[Diagnostic]:
    """Why each gemm of `launch` that lowers to SIMT multiply-adds does not get tensor cores."""
    out = []
    for g in walk(launch.body):
        if not isinstance(g, Gemm):
            continue
        answer = gemm_answer(g, launch, desc)
        what = f"T.gemm({g.a.buffer.name}, {g.b.buffer.name}, {g.c.buffer.name})"
        if isinstance(answer, MmaPlan):
            lay = layouts.get(g.c.buffer)
            if isinstance(lay, MmaLayout) and lay.warps == tuple(answer.warps):
                continue
            reason = (f"the layout of {g.c.buffer.name} was fixed by {layouts.origin(g.c.buffer)}, not by "
                      "this gemm's instruction")
        else:
            reason = answer.reason
        out.append(Diagnostic("performance", f"{what} runs as SIMT multiply-adds, not tensor-core "
                                             f"instructions: {reason}", g.loc))
    return out


def lower_threads(module: Module, desc: TargetDesc) -> Module:
    """Invariant: no tile-level op, KernelLaunch or T.Parallel loop remains; the function body
    holds ThreadKernels whose memory accesses are flat MemLoad/MemStore/VecMove/Atomic nodes.
    Every gemm lowered without tensor cores adds a "performance" Diagnostic saying why, and so
    does every shared operand whose annotated layout made the backend pick a slower instruction
    (`tensorize.layout_notes`)."""
    notes: list[Diagnostic] = []

    def fn(n):
        if isinstance(n, KernelLaunch):
            layouts = stored_layouts(n, desc)
            notes.extend(_simt_notes(n, desc, layouts))
            notes.extend(layout_notes(n, desc))  # a slower instruction for a user's layout
            forget_simplified()  # the simplifier's memo holds one kernel's expressions at a time
            return lower_launch(n, LowerCtx(n, desc, layouts, plan_gemms(n, desc)))
        return None

    body = rewrite(module.func.body, fn, stop=_LAUNCH)
    out = module.with_func(module.func.with_body(body))
    return out.with_attrs(diagnostics=out.attrs.diagnostics + tuple(notes)) if notes else out


def async_pipelines(module: Module, desc: TargetDesc) -> Module:
    """Invariant: in T.Pipelined(num_stages=s >= 2) loops on targets with asynchronous copies,
    each stageable shared buffer has up to s stages filled by AsyncCopy s - 1 tiles ahead, with
    one AsyncCommit per iteration and an AsyncWait before the tile is read (same values; see
    tilecore.lower.async_pipeline). Such loops carry the annotation `async_stages`."""

    if not desc.options.enable_async_copy:  # pass_configs={"tl.enable_async_copy": False}
        return unapplied_hints(module, _not_specialized(desc))
    hints = module.func.attr("reg_alloc")

    def fn(n):
        if not isinstance(n, ThreadKernel):
            return None
        return async_pipeline(n, desc.facts, tma=not desc.options.disable_tma_lower,
                              warp_specialize=not desc.options.disable_warp_specialized,
                              persistent_any=getattr(desc.options, "ws_persistent_any", False),
                              early_prologue=getattr(desc.options, "early_tma_prologue", False),
                              hints=hints)

    out = module.with_func(module.func.with_body(rewrite(module.func.body, fn, stop=_KERNEL)))
    return unapplied_hints(out, _not_specialized(desc))


def _not_specialized(desc: TargetDesc) -> str:
    """Why a kernel got no producer warpgroup (the register hints' note, passes.reg_budget)."""
    for key, off in (("tl.enable_async_copy", not desc.options.enable_async_copy),
                     ("tl.disable_tma_lower", desc.options.disable_tma_lower),
                     ("tl.disable_warp_specialized", desc.options.disable_warp_specialized)):
        if off:
            return f"pass_configs {key} turns off the warp specialization whose registers it sets"
    return (f"tilecore did not warp-specialize this kernel for {desc.target} (it adds a producer "
            "warpgroup to T.Pipelined loops at the kernel's top whose copies are all TMA, when their "
            "stages take more than half the shared memory); in roles of your own, T.set_max_nreg sets "
            "a warpgroup's registers")


def prefetch_pipelined(module: Module, desc: TargetDesc) -> Module:
    """Invariant: in loops the user marked T.Pipelined(num_stages >= 2), global-to-shared vector
    copies at the top of the body read the next iteration's tile into registers before the
    body's computation (same values; see tilecore.lower.prefetch)."""

    def fn(n):
        return prefetch(n) if isinstance(n, ThreadKernel) else None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn, stop=_KERNEL)))


def barriers(module: Module, desc: TargetDesc) -> Module:
    """Invariant: between a shared-memory write by one thread and a read or write of that buffer
    by another there is a Barrier on every path (uniform control flow permitting); a proxy
    fence precedes a wgmma only where it reads generically written shared data
    (tilecore.lower.proxy_fences, pruned first so barriers follow the fences kept); independent
    back-to-back wgmma groups share one wait (tilecore.lower.wgmma_groups); the waits of
    asynchronous gemms sit before the first use of their results (tilecore.lower.wgmma_async)."""

    def fn(n):
        if not isinstance(n, ThreadKernel):
            return None
        return insert_barriers(prune_proxy_fences(merge_wgmma_waits(place_async_waits(n))))

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn, stop=_KERNEL)))


def pingpong_consumers(module: Module, desc: TargetDesc) -> Module:
    """Invariant (option `ws_pingpong`): a persistent warp-specialized kernel with one consumer
    warpgroup has two, on alternate tiles, their main loops ordered by mbarriers (see
    tilecore.lower.pingpong); other kernels are unchanged."""
    hints = module.func.attr("reg_alloc")

    def fn(n):
        return pingpong(n, desc.facts, hints) if isinstance(n, ThreadKernel) else None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn, stop=_KERNEL)))


def warpgroup_turn_barriers(module: Module, desc: TargetDesc) -> Module:
    """Invariant (option `warpgroup_turns`): the consumer warpgroups of a warp-specialized
    kernel take turns issuing each loop iteration's gemms (FlashAttention-3's scheduler
    barrier, tilecore.lower.wg_turns); other kernels are unchanged."""

    def fn(n):
        return warpgroup_turns(n) if isinstance(n, ThreadKernel) else None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn, stop=_KERNEL)))


def mbarrier_suspend_hints(module: Module, desc: TargetDesc) -> Module:
    """Invariant (option `mbarrier_suspend_hint`): every mbarrier wait of a warp-specialized
    kernel carries a suspend-time hint (tilecore.lower.pingpong.suspend_hints)."""

    def fn(n):
        return suspend_hints(n) if isinstance(n, ThreadKernel) else None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn)))


def fragment_pipelines(module: Module, desc: TargetDesc) -> Module:
    """Invariant: in asynchronous-copy pipelined loops whose body is the loop head and a
    tensorized mma.sync gemm with an even number of k steps, step i + 1's operand loads precede
    step i's mmas and the next iteration's head and first loads precede the last mmas (same
    values; see tilecore.lower.fragment_pipeline). Such loops carry `fragment_pipeline`."""

    def fn(n):
        if not isinstance(n, ThreadKernel):
            return None
        opts = desc.options
        return fragment_pipeline(n, "spread" if opts.copy_spread else opts.copy_interleave)

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn, stop=_KERNEL)))


def plan_shared(module: Module, desc: TargetDesc) -> Module:
    """Invariant: shared buffers whose live ranges (top-level statements of the kernel body) are
    disjoint may share bytes, recorded in `ThreadKernel.shared_plan`; a block barrier precedes
    every reuse not already ordered by one (see tilecore.lower.smem_plan)."""

    def fn(n):
        return plan_kernel(n) if isinstance(n, ThreadKernel) else None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn, stop=_KERNEL)))


LOWERING_PASSES: list[Pass] = [
    Pass("reducer-partials", reducer_partials, _lowers),
    Pass("layout-inference", layout_inference, _lowers),
    Pass("lower-threads", lower_threads, _lowers),
    Pass("async-pipeline", async_pipelines, _lowers),
    Pass("prefetch-pipelined", prefetch_pipelined, _lowers),
    Pass("insert-barriers", barriers, _syncs),
    Pass("pingpong-consumers", pingpong_consumers, _pingpongs),
    Pass("warpgroup-turns", warpgroup_turn_barriers, _turns),
    Pass("mbarrier-suspend-hint", mbarrier_suspend_hints, _suspend_hinted),
    Pass("fragment-pipeline", fragment_pipelines, _pipelines_fragments),
    Pass("wide-offsets", wide_offsets, _lowers),
    Pass("plan-shared", plan_shared, _lowers),
]
