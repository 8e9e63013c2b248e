"""Target-neutral lowering from tile IR to thread IR, for targets whose facts say
`lowers_to_threads` (CUDA, HIP, Metal, and the `emu` emulator of them).

Passes, in order (their names are anchors for backends' `tile_passes`):

- ``layout-inference``: a layout for every fragment, and the gemm tensorization plans;
- ``lower-threads``: the KernelLaunch becomes a ThreadKernel (T.Parallel, copy, fill, reduce,
  cumsum, gemm, atomics partitioned over threads);
- ``async-pipeline``: T.Pipelined loops become multi-stage asynchronous-copy pipelines where
  the target has asynchronous copies (facts `async_copy_sizes`) and the copies qualify;
- ``prefetch-pipelined``: the other T.Pipelined loops load the next tile into registers during
  the math;
- ``insert-barriers``: block barriers wherever shared memory passes between threads.
"""

from __future__ import annotations

from ..ir.module import Module
from ..ir.stmt import KernelLaunch
from ..ir.thread import ThreadKernel, thread_printer
from ..ir.visit import rewrite, walk
from ..passes.base import Pass
from ..target import TargetFacts
from .async_pipeline import async_pipeline
from .barrier import insert_barriers
from .context import LowerCtx
from .infer import infer_layouts
from .prefetch import prefetch
from .threads import lower_launch


def _lowers(facts: TargetFacts) -> bool:
    return facts.lowers_to_threads


def _launches(module: Module) -> list[KernelLaunch]:
    return [n for n in walk(module.func.body) if isinstance(n, KernelLaunch)]


def layout_inference(module: Module, facts: TargetFacts) -> Module:
    """Invariant: every fragment of every kernel launch has a layout (module attr "layouts",
    id(launch) -> (LayoutMap, gemm plans)); conflicting gemm layouts raise a TileError."""
    out = {}
    for launch in _launches(module):
        out[id(launch)] = (launch, *infer_layouts(launch, facts))
    return module.with_attr("layouts", out)


def lower_threads(module: Module, facts: TargetFacts) -> Module:
    """Invariant: no tile-level op, KernelLaunch or T.Parallel loop remains; the function body
    holds ThreadKernels whose memory accesses are flat MemLoad/MemStore/VecMove/Atomic nodes."""
    table = module.attr("layouts") or {}
    if not table:
        table = layout_inference(module, facts).attr("layouts")

    def fn(n):
        if isinstance(n, KernelLaunch):
            entry = table.get(id(n))
            if entry is None:
                return None
            _, layouts, plans = entry
            ctx = LowerCtx(n, facts, layouts, plans, module.attr("target"))
            return lower_launch(n, ctx)
        return None

    body = rewrite(module.func.body, fn)
    return module.with_func(module.func.with_body(body)).with_attr("printer", thread_printer)


def async_pipelines(module: Module, facts: TargetFacts) -> Module:
    """Invariant: in T.Pipelined(num_stages=s >= 2) loops on targets with asynchronous copies,
    each stageable shared buffer has up to s stages filled by AsyncCopy s - 1 tiles ahead, with
    one AsyncCommit per iteration and an AsyncWait before the tile is read (same values; see
    tilecore.lower.async_pipeline). Such loops carry the annotation `async_stages`."""

    def fn(n):
        return async_pipeline(n, facts) if isinstance(n, ThreadKernel) else None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn)))


def prefetch_pipelined(module: Module, facts: TargetFacts) -> Module:
    """Invariant: in loops the user marked T.Pipelined(num_stages >= 2), global-to-shared vector
    copies at the top of the body read the next iteration's tile into registers before the
    body's computation (same values; see tilecore.lower.prefetch)."""

    def fn(n):
        return prefetch(n) if isinstance(n, ThreadKernel) else None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn)))


def barriers(module: Module, facts: TargetFacts) -> Module:
    """Invariant: between a shared-memory write by one thread and a read or write of that buffer
    by another there is a Barrier on every path (uniform control flow permitting)."""

    def fn(n):
        return insert_barriers(n) if isinstance(n, ThreadKernel) else None

    return module.with_func(module.func.with_body(rewrite(module.func.body, fn)))


LOWERING_PASSES: list[Pass] = [
    Pass("layout-inference", layout_inference, _lowers),
    Pass("lower-threads", lower_threads, _lowers),
    Pass("async-pipeline", async_pipelines, _lowers),
    Pass("prefetch-pipelined", prefetch_pipelined, _lowers),
    Pass("insert-barriers", barriers, _lowers),
]
