"""The contract between tilecore's core and its backends, as pluggy hook specifications.

A backend is a distribution that registers a module (or object) under the entry point group
``tilecore.backends``; that module implements any of the hooks below with ``@hookimpl``.
Each hook receives the parsed :class:`~tilecore.target.Target`; an implementation returns
``None`` for a target that is not its own, so many backends coexist. Hooks that expect one
answer are ``firstresult``. The core never imports a backend: it only calls these hooks.

Example (the whole of a minimal backend's plugin module)::

    from tilecore.hookspec import hookimpl
    from tilecore.target import TargetInfo

    @hookimpl
    def tile_targets():
        return [TargetInfo("mydev", "My accelerator", priority=50)]

    @hookimpl
    def tile_build(target, module):
        if target.kind != "mydev":
            return None
        return MyArtifact(module)
"""

from __future__ import annotations

import pluggy

PROJECT = "tilecore"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def tile_targets():
    """Return a list of :class:`~tilecore.target.TargetInfo`, one per target kind this backend
    provides (e.g. ``interp``; ``cuda`` with archs ``sm_80``, ``sm_90``)."""


@hookspec(firstresult=True)
def tile_target_facts(target):
    """Return :class:`~tilecore.target.TargetFacts` for ``target`` when it is yours, else None.

    Facts drive target-neutral passes: whether the program lowers to threads, the warp size,
    shared memory size, the widest vector access, and backend-specific extras."""


@hookspec
def tile_passes(target):
    """Return ``[(anchor, Pass), ...]`` to insert into the pipeline for ``target``.

    ``anchor`` is ``"before:<pass name>"`` or ``"after:<pass name>"`` naming a core pass; core
    passes are never reordered or removed. Return ``[]`` (or None) for other targets."""


@hookspec(firstresult=True)
def tile_unsupported(target, func):
    """Return a human-readable reason when ``target`` cannot compile ``func`` (a PrimFunc), else
    None. The conformance runner skips such programs and prints the reason; compiling one
    raises a TileTargetError with the reason."""


@hookspec(firstresult=True)
def tile_build(target, module):
    """Compile the fully lowered :class:`~tilecore.ir.module.Module` for ``target``.

    Return an artifact object with ``source`` (str: the generated code, shown by
    ``Kernel.get_kernel_source()``), ``array_api`` (``"numpy"`` or ``"torch"``) and
    ``run(args, dyn)``: execute on the argument arrays (in parameter order, outputs included,
    written in place) with ``dyn`` mapping each symbolic dimension name to its int value."""


@hookspec(firstresult=True)
def tile_tolerance(target, dtype):
    """Return ``(rtol, atol)`` this target promises against ``interp`` for outputs of ``dtype``
    (a DType) on inexact programs, or None to use the core defaults."""


@hookspec(firstresult=True)
def tile_gemm_tensorize(target, query):
    """Choose tensor-core instructions for one ``gemm`` on a thread-lowered ``target``.

    ``query`` is a :class:`tilecore.lower.tensorize.GemmQuery` (operand dtypes and scopes, the
    block tile M x N x K, transposes, thread count, warp size and the user's ``policy``). Return
    a :class:`tilecore.lower.tensorize.MmaPlan` (the mma intrinsic, the warp grid, and candidate
    operand loaders such as ``ldmatrix``) or None: for a target that is not yours, or when no
    instruction fits, in which case the core lowers the gemm with SIMT multiply-adds."""
