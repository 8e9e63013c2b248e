"""The `thread-level` pass: where a thread-level kernel (tilecore.ir.thread_level) goes.

A kernel using `T.get_thread_binding`, mbarriers, `T.ws` or a real `T.sync_threads` has
per-thread semantics and no tile-level meaning, so it is defined by its thread program:

- targets that lower to threads (cuda, emu; facts `lowers_to_threads`) lower it with their own
  passes, which follow this one;
- `interp` (fact `thread_level`) runs a warp-specialized *tile* program (roles, mbarriers,
  `T.tma_copy`, tile operations inside the roles, no per-thread values: tilecore.lower.tile_roles)
  at the tile level, roles as concurrent tasks (tilecore_interp.roles); any other thread-level
  kernel has no thread lowering on interp, so this pass lowers the module with the core's
  vendor-free SIMT description (`SIMT_FACTS`: warps of 32, no tensor
  cores, no asynchronous copies, mbarriers) and the interp artifact runs the result on the
  core's emulator, which models barriers and mbarriers exactly and reports races, deadlocks
  and mismatched arrival counts;
- every other target refuses it with a located TileTargetError naming the construct.
"""

from __future__ import annotations

from ..ir.module import Module
from ..ir.thread_level import is_thread_level
from ..target import TargetDesc, TargetFacts
from .thread_level import refusal

SIMT_SHARED_BYTES = 227 * 1024  # the portable per-block limit every GPU target enforces


def simt_desc(desc: TargetDesc) -> TargetDesc:
    """The core's vendor-free thread-lowering description for `desc`'s target (interp)."""
    facts = TargetFacts(desc.target, lowers_to_threads=True, warp_size=32, max_threads=1024,
                        shared_memory_bytes=SIMT_SHARED_BYTES, vector_bytes=16,
                        extra=(("thread_level", "emulated"), ("mbarrier", True)))
    return TargetDesc(desc.target, desc.lowering, facts, desc.options, (), ())


def _as_tile_roles(module: Module) -> Module | None:
    """The module with every thread-level launch rewritten by `tile_roles.as_tile_roles`, or
    None when one of them is a thread program (per-thread values)."""
    from ..ir.stmt import KernelLaunch
    from ..ir.visit import rewrite
    from .tile_roles import as_tile_roles

    failed = []

    def fn(n):
        if isinstance(n, KernelLaunch) and is_thread_level(n):
            out = as_tile_roles(n)
            if out is None:
                failed.append(n)
            return out
        return None

    body = rewrite(module.func.body, fn, stop=(KernelLaunch,))  # launches do not nest
    return None if failed else module.with_func(module.func.with_body(body))


def thread_level(module: Module, desc: TargetDesc) -> Module:
    """Invariant: a thread-level kernel is refused with a located TileTargetError on targets
    that cannot run it, and on `interp` (fact `thread_level`, no thread lowering of its own)
    the body holds its lowered ThreadKernel (see the module docstring); tile programs and
    thread-lowering targets pass unchanged."""
    body = module.func.body
    if not is_thread_level(body):
        return module
    err = refusal(body, desc)
    if err is not None:
        raise err
    if desc.facts.lowers_to_threads:  # not scheduled there; lower-threads checks the kernel
        return module
    tiled = _as_tile_roles(module)
    if tiled is not None:  # a warp-specialized tile program: interp runs its roles as tiles
        return tiled
    from . import LOWERING_PASSES

    simt = simt_desc(desc)
    for p in LOWERING_PASSES:
        if p.applies(simt):
            module = p(module, simt)
    return module
