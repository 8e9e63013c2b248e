"""The contract between tilecore's core and its backends, as pluggy hook specifications.

A backend is a distribution that registers a module (or object) under the entry point group
``tilecore.backends``; that module implements any of the hooks below with ``@hookimpl``. The
data types crossing the boundary (``GemmQuery``, ``MmaPlan``, ``Declined``, the ``Artifact``
protocol) are in :mod:`tilecore.contract`; ``Target``, ``TargetInfo``, ``TargetFacts`` and
``TargetDesc`` in :mod:`tilecore.target`.

How the core calls them, per compile (``tilecore.compile``):

1. ``tile_targets`` (once per process) to resolve the target string;
2. ``tile_cache_token``, ``tile_lowering_target``, ``tile_target_facts`` and ``tile_passes``
   form the compile-cache key (:mod:`tilecore.compile_cache`): on a hit
   ``tile_artifact_load`` rebuilds the artifact from stored data and nothing else is asked
   (the description is computed only if ``Kernel.desc`` or ``get_ir()`` is read);
3. on a miss ``tile_build_begin`` (a backend may start slow one-time work, such as loading its
   compiler, in the background), ``tile_unsupported``, then the ``TargetDesc``: the answers of step 2 and, for
   thread-lowered targets, ``tile_gemm_tensorize`` once per distinct gemm, frozen **before**
   the pipeline runs (passes only read that description); then the pipeline, ``tile_build``,
   and the artifact's ``cache_entry()`` (when it has one) is stored;
4. ``tile_tolerance`` is asked by conformance and tests, never by compile.

Every hook but ``tile_targets`` receives the parsed ``target``; an implementation returns
``None`` for a target that is not its own, so many backends coexist. A hook marked
*firstresult* stops at the first non-None answer (pluggy calls the most recently registered
implementation first; ``@hookimpl(tryfirst=True)`` jumps the queue, which is how tests
substitute an answer); the others collect a list of every non-None answer. An implementation
may accept any subset of a hook's parameters (pluggy passes only the ones it names), so a
parameter added to a spec later does not break existing backends.

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
    """Declare the target kinds this backend provides.

    :return: a list of :class:`~tilecore.target.TargetInfo`, one per kind (e.g. ``interp``;
        ``cuda`` with archs ``sm_80``, ``sm_90``), or None/``[]``.

    All answers are collected. Two backends declaring the same kind is a TileTargetError (at
    discovery, or in ``tilecore.plugins.register`` for the second one): which backend compiles a
    program must not depend on registration order.
    """


@hookspec(firstresult=True)
def tile_lowering_target(target):
    """Name the target whose lowering ``target`` runs, for emulators and simulators.

    :param target: the parsed compile target (:class:`~tilecore.target.Target`).
    :return: another :class:`~tilecore.target.Target` (``emu:cuda:sm_80`` -> ``cuda:sm_80``),
        or None (the default: a target lowers as itself).

    firstresult. The core then asks ``tile_target_facts``, ``tile_passes`` and
    ``tile_gemm_tensorize`` for the returned target (``tile_passes`` also for ``target``), so an
    emulator reproduces any installed backend's lowering without knowing its name; only
    ``tile_build`` and ``tile_tolerance`` are asked for ``target`` itself.
    """


@hookspec(firstresult=True)
def tile_target_facts(target):
    """Report the machine facts of ``target``.

    :param target: a :class:`~tilecore.target.Target` (a lowering target).
    :return: :class:`~tilecore.target.TargetFacts` when ``target`` is yours, else None.

    firstresult. Facts drive the target-neutral passes: whether the program lowers to threads,
    the warp size, thread and shared-memory limits, the widest vector access, and
    backend-specific extras (``facts.get(key)``). A target nobody answers for is a tile-level
    target (``TargetFacts(target)``: no thread lowering).
    """


@hookspec
def tile_passes(target):
    """Add backend passes to the pipeline for ``target``.

    :param target: the compile target, and (separately) its lowering target.
    :return: ``[(anchor, Pass), ...]``, or None/``[]`` for other targets. ``anchor`` is
        ``"before:<pass name>"`` or ``"after:<pass name>"`` naming a core pass; a
        :class:`~tilecore.passes.base.Pass` maps ``(Module, TargetDesc) -> Module``.

    All answers are collected (in hook call order). Core passes are never reordered or removed;
    an unknown anchor is a TileInternalError.
    """


@hookspec(firstresult=True)
def tile_gemm_tensorize(target, query):
    """Choose tensor-core instructions for one ``gemm`` on a thread-lowered ``target``.

    :param target: the lowering target.
    :param query: a :class:`tilecore.contract.GemmQuery` (operand dtypes and scopes, the block
        tile M x N x K, transposes, thread count, warp size, the user's ``policy``, and
        ``fixed_layouts``: the shared operands whose annotated layout no matrix descriptor reads).
    :return: a :class:`tilecore.contract.MmaPlan` (the mma intrinsic, the warp grid, candidate
        operand loaders such as ``ldmatrix``, and a ``note`` when ``fixed_layouts`` made it a
        slower instruction than the target has); or a :class:`tilecore.contract.Declined` with the
        reason no instruction fits (dtype, shape, warp count), which the user is told in a
        one-time ``TilePerformanceWarning`` and in ``Kernel.get_ir()``; or None for a target
        that is not yours.

    firstresult: the first non-None answer (plan or Declined) is final. Asked once per distinct
    query before the pipeline runs (the answers live in ``TargetDesc.gemms``); when nobody
    answers, or the answer is Declined, the core lowers the gemm with SIMT multiply-adds.
    """


@hookspec(firstresult=True)
def tile_unsupported(target, func):
    """Say why ``target`` cannot compile ``func``.

    :param target: the compile target (asked again for its lowering target when different).
    :param func: the :class:`~tilecore.ir.module.PrimFunc` as the frontend produced it.
    :return: a human-readable reason, or None when it can compile ``func``.

    firstresult. Compiling such a program raises a TileTargetError with the reason; the
    conformance runner skips it and counts the reason.
    """


@hookspec(firstresult=True)
def tile_build(target, module):
    """Compile the fully lowered module for ``target``.

    :param target: the compile target.
    :param module: the :class:`~tilecore.ir.module.Module` after the last pass; its
        ``attrs.options`` are the compile :class:`~tilecore.options.Options`.
    :return: an object satisfying :class:`tilecore.contract.Artifact` (``source``,
        ``array_api``, ``run(args, dyn)``, and ``device`` for ``array_api == "torch"``), or
        None when ``target`` is not yours.

    firstresult. Nobody building the target is a TileTargetError.
    """


@hookspec
def tile_build_begin(target):
    """Hear that a compile-cache miss means ``tile_build`` will be asked for ``target`` once the
    pipeline has run (hundreds of milliseconds of Python).

    :param target: the compile target.
    :return: None (the answers are collected and ignored).

    For work a first build pays once per process and that can run beside the pipeline (the cuda
    backend reads NVRTC's libraries from disk in a thread). It must not change what is built,
    block, or raise; it is not called on a compile-cache hit.
    """


@hookspec(firstresult=True)
def tile_tolerance(target, dtype):
    """State the accuracy ``target`` promises against ``interp`` on inexact programs.

    :param target: the compile target.
    :param dtype: the output's :class:`~tilecore.dtypes.DType`.
    :return: ``(rtol, atol)``, or None to use the core defaults.

    firstresult. Exact programs (inputs chosen so every summation order is exact) are compared
    with ``==`` whatever this returns.
    """


@hookspec
def tile_cache_token(target):
    """Contribute to the compile-cache key everything outside the tile IR, the target and its
    description that changes what ``tile_build`` produces for ``target``.

    :param target: the compile target (asked again for its lowering target when different).
    :return: a string (e.g. ``"nvrtc=13.0.88 cuda-bindings=13.3.0"``: the compiler's identity
        and version), or None for targets that are not yours.

    All answers are collected. The core already keys on tilecore's and every registered
    backend's source (:func:`tilecore.cache.package_fingerprint`) and names, the printed input
    IR, ``str(target)``, the lowering target, its facts, the extra passes and the options (the
    gemm answers follow from these and are not asked for on a hit); a token adds the
    toolchain, and anything else outside the code that changes the build. Keep it cheap (no
    compiler import): it is computed on every compile, hits included, once per process.
    """


@hookspec(firstresult=True)
def tile_artifact_load(target, meta, blobs):
    """Rebuild an artifact from a compile-cache entry that ``Artifact.cache_entry()`` made.

    :param target: the compile target.
    :param meta: the entry's JSON object (a ``dict`` of JSON values: launch shape, parameter
        layout, fault sites, ...); it carries ``"backend"`` as written by ``cache_entry``.
    :param blobs: ``{name: bytes}`` (a cubin, the generated source as UTF-8, ...).
    :return: an object satisfying :class:`tilecore.contract.Artifact`, or None when the entry is
        not yours or is not usable (it is then rebuilt from scratch).

    firstresult. Nothing in an entry may be unpickled or executed as Python: it is data that
    the backend interprets (machine code is loaded by the driver, as on a miss). An artifact
    opts into caching by defining ``cache_entry() -> (meta, blobs) | None``.
    """
