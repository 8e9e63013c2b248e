"""`tilecore.compile` and `@tilecore.jit`: from a PrimFunc (or a factory of them) to a Kernel."""

from __future__ import annotations

import functools
import os
import types
import warnings

from . import compile_cache, plugins, subbyte
from .errors import (
    TileConfigWarning,
    TileError,
    TilePerformanceWarning,
    TileTargetError,
    caller_loc,
)
from .ir.aliases import check_target as check_aliases
from .ir.const_dtypes import check as check_const_dtypes
from .ir.module import Module, ModuleAttrs, PrimFunc
from .ir.pointers import check_target as check_pointers
from .ir.reducers import check as check_reducers
from .ir.static_checks import check_program
from .kernel import Kernel, normalize_out_idx
from .language import eager
from .language.parser import Macro
from .options import options_from_pass_configs


def compile(func: PrimFunc, out_idx=None, target="auto", pass_configs=None,  # noqa: A001
            **unknown) -> Kernel:
    """Lower and build `func` for `target`; returns a callable Kernel.

    `pass_configs`: TileLang-style options (see `tilecore.options`); unknown keys raise.
    The backends are asked once, before the pipeline, for a frozen TargetDesc; a gemm no backend
    tensorizes warns once (TilePerformanceWarning) with the reason. TileLang's host-toolchain
    keywords (`execution_backend`, ...) warn once, as for `jit`; other keywords raise."""
    _tilelang_jit_keywords(unknown, "compile")
    if not isinstance(func, PrimFunc):
        raise TileError(f"tilecore.compile needs a @T.prim_func kernel, got {type(func).__name__}",
                        caller_loc(), hint="decorate the kernel with @T.prim_func")
    options = options_from_pass_configs(pass_configs)
    normalize_out_idx(func, out_idx)  # a bad out_idx fails before any code generation
    try:
        # TILECORE_TARGET_OVERRIDE runs a program written for one target on another unedited
        # (tools/tilelang_port.py runs TileLang's cuda examples on interp this way)
        t = plugins.resolve(os.environ.get("TILECORE_TARGET_OVERRIDE") or target)
    except TileError as e:
        raise e.with_loc(caller_loc()) from None
    _one_kernel_unless_interp(func, t)
    subbyte.check_kernel(func, t, out_idx)  # int4 / uint4 / fp4: targets that run them, inputs only
    check_pointers(func, t)  # T.make_tensor: interp only
    check_aliases(func, t)  # T.view(..., dtype=): interp and cpu
    # T.alloc_reducer: used in order; interp, cpu and (lower.reducers) thread-lowered targets
    check_reducers(func, t, lambda: plugins.facts(t).lowers_to_threads)
    check_const_dtypes(func)  # T.uint64: build-time constants only
    # the user's mistakes (a zero grid, an unbound T.dynamic) first: a target asked whether it
    # supports the program may lower it, and must not be the one to trip over them. All but the
    # shared-memory budget here: it imports the lowering's planner (the whole tilecore.lower
    # package, ~100 ms from source), which a hit never needs; a hit's entry was stored after
    # the same printed program (the key) passed in full
    check_program(func, shared_budget=False)
    key = compile_cache.key_or_none(func, t, options)
    hit = compile_cache.lookup(key, t) if key is not None else None
    if hit is not None:
        # A stored entry was built by this code from this program, target and options: it was
        # supported, and nothing of the pipeline is needed to run it. The description and the
        # stages are computed only when `Kernel.desc` / `get_ir()` ask.
        artifact, diagnostics = hit
        _warn(diagnostics)
        desc_once = functools.cache(functools.partial(plugins.describe, t, func, options))
        return Kernel(func, t, out_idx, artifact, lambda: _stages(func, t, options, desc_once()),
                      desc_once, diagnostics=diagnostics)
    check_program(func)  # in full on a miss: the shared-memory budget too
    plugins.manager().hook.tile_build_begin(target=t)  # e.g. cuda may load NVRTC beside the pipeline
    try:
        reason = plugins.unsupported(t, func)
    except TileTargetError as e:  # the target string itself (emu:sm_75x): the user's jit line
        raise e.with_loc(caller_loc()) from None
    if reason:
        raise TileTargetError(f"target {t} cannot compile {func.name}: {reason}", func.loc,
                              hint="pick another target (`python -m tilecore targets`)")
    desc = plugins.describe(t, func, options)
    stages = _stages(func, t, options, desc)
    final = stages[-1][1]
    _warn(final.attrs.diagnostics)
    artifact = plugins.manager().hook.tile_build(target=t, module=final)
    if artifact is None:
        raise TileTargetError(f"no installed backend builds target {t}", caller_loc(),
                              hint="install the backend's package (backends/<name>)")
    if key is not None:
        compile_cache.store(key, artifact, final.attrs.diagnostics)
    return Kernel(func, t, out_idx, artifact, stages, desc)


def _stages(func: PrimFunc, t, options, desc) -> list:
    """The pipeline's [(stage name, Module)] for `func` on `t`."""
    from .passes.pipeline import run_pipeline  # not imported by a compile-cache hit

    return run_pipeline(Module(func, ModuleAttrs(target=t, options=options)), desc)


def _one_kernel_unless_interp(func: PrimFunc, t) -> None:
    """Several `with T.Kernel` in one function (TileLang's split-KV style) run in order on the
    oracle; the thread lowering builds one kernel per function, so other targets refuse."""
    from .ir.stmt import KernelLaunch
    from .ir.visit import walk

    n = sum(isinstance(x, KernelLaunch) for x in walk(func.body))
    if n > 1 and t.kind != "interp":
        raise TileTargetError(f"{func.name} has {n} `with T.Kernel` blocks; target {t} builds one "
                              "kernel per function (several run on interp only)", func.loc,
                              hint="split the function into one @T.prim_func per kernel")


_warned: set = set()


def _warn(diagnostics) -> None:
    """Each performance or config diagnostic once per process, as a warning at the user's line
    (TilePerformanceWarning / TileConfigWarning: a setting accepted and not applied)."""
    for d in diagnostics:
        kind = _WARNINGS.get(d.category)
        if kind is None or (d.loc, d.message) in _warned:
            continue
        _warned.add((d.loc, d.message))
        file, line = (d.loc.file, d.loc.line) if d.loc is not None else ("<tilecore>", 0)
        warnings.warn_explicit(d.message, kind, file, line)


_WARNINGS = {"performance": TilePerformanceWarning, "config": TileConfigWarning}


class JITFactory:
    """`@tilecore.jit` on a Python function returning a PrimFunc: calling it with parameters
    builds (once per distinct parameter set) and returns the compiled Kernel."""

    def __init__(self, fn, out_idx, target, pass_configs):
        self.fn = fn
        self.out_idx = out_idx
        self.target = target
        self.pass_configs = pass_configs
        self._cache: dict = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs) -> Kernel:
        key = (args, tuple(sorted(kwargs.items())), _read_values(self.fn))
        try:
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self._cache:
            return self._cache[key]
        func = self.fn(*args, **kwargs)
        if not isinstance(func, PrimFunc):
            raise TileError(f"{self.fn.__name__} must return a @T.prim_func kernel, got "
                            f"{type(func).__name__}", caller_loc(),
                            hint="end the factory with `return <the @T.prim_func>`")
        k = compile(func, self.out_idx, self.target, self.pass_configs)
        if key is not None:
            self._cache[key] = k
        return k

    def get_prim_func(self, *args, **kwargs) -> PrimFunc:
        """The PrimFunc for these parameters, without compiling."""
        return self.fn(*args, **kwargs)


def __getattr__(name: str):
    """`EagerJIT` (which lives in `tilecore.jit_eager`) under its old address."""
    if name == "EagerJIT":
        from .jit_eager import EagerJIT

        return EagerJIT
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.lru_cache(maxsize=4096)
def _global_names(code) -> frozenset:
    """Every global name `code` and the functions nested in it (the kernel) may read."""
    names = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            names |= _global_names(c)
    return frozenset(names)


def _names_read(fn) -> frozenset:
    """The global names `fn` reads, directly or through the plain functions and `T.macro`
    helpers it names (transitively), as (module name, name) pairs: a kernel calling
    `scale(A[i])` whose `scale` reads `FACTOR` depends on `FACTOR` too, in whichever module
    `scale` is defined. Helpers are followed into every user module (`_user_globals`), named
    directly (`from helpers import scale`) or through a module (`helpers.scale`, where every
    attribute name the code mentions counts); functions of tilecore, the standard library and
    installed packages count by identity only (walking a library's functions would put its
    globals into every key). Each code object is walked once, so recursion and import cycles
    end."""
    return frozenset(((g.get("__name__") or ""), n) for g, n in _reads(fn))


def _reads(fn) -> list:
    """(globals dict, name) for every global `_names_read` describes, in the order found."""
    out: list = []
    seen_codes: set = set()
    seen: set = set()
    root = fn.__globals__
    todo = [(root, fn.__code__)]
    while todo:
        g, code = todo.pop()
        if code in seen_codes:
            continue
        seen_codes.add(code)
        names = _global_names(code)
        for n in names:
            if (id(g), n) in seen or n not in g:
                continue
            seen.add((id(g), n))
            out.append((g, n))
            value = g[n]
            if isinstance(value, types.ModuleType):
                mg = vars(value)
                if not _user_globals(mg):
                    continue
                # `helpers.scale`: the attribute names are among the code's names
                for a in names:
                    if a in mg and (id(mg), a) not in seen:
                        seen.add((id(mg), a))
                        out.append((mg, a))
                        _follow(mg[a], todo, root)
            else:
                _follow(value, todo, root)
    return out


def _follow(value, todo: list, root: dict) -> None:
    """Queue the code of `value` when it is a plain function or a `T.macro` of user code (or of
    the factory's own module, wherever that is installed)."""
    helper = value.fn if isinstance(value, Macro) else value
    if isinstance(helper, types.FunctionType) and (
            helper.__globals__ is root or _user_globals(helper.__globals__)):
        todo.append((helper.__globals__, helper.__code__))


def _user_globals(g: dict) -> bool:
    """Whether a module's globals belong to user code, whose helpers a factory's key follows:
    not tilecore or its backends (`tilecore_*`), not the standard library or an installed
    package (a file under one of the interpreter's library directories)."""
    name = g.get("__name__") or ""
    top = name.partition(".")[0]
    if top == "tilecore" or top.startswith("tilecore_"):
        return False
    file = g.get("__file__")
    return not (isinstance(file, str) and _is_library_file(file))


@functools.lru_cache(maxsize=1024)
def _is_library_file(file: str) -> bool:
    path = os.path.realpath(file)
    return any(path.startswith(root + os.sep) for root in _library_roots())


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple:
    """The interpreter's standard-library and site-packages directories (resolved)."""
    import os
    import site
    import sysconfig

    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.update(getattr(site, "getsitepackages", list)())
    user = getattr(site, "getusersitepackages", lambda: None)()
    if user:
        roots.add(user)
    return tuple(sorted({os.path.realpath(r) for r in roots if r}))


def _read_values(fn) -> tuple:
    """The current values of the module globals and closure cells a factory's body (and the
    kernel inside it, and the user helpers they call: `_names_read`) reads, as part of its
    cache key: a kernel built from `TILE = 64` must be rebuilt after `TILE = 128`. Hashable
    values count by value, others (a list, an array) by identity."""
    pairs = [((g.get("__name__") or "", n), _hashable(g[n])) for g, n in _reads(fn)]
    vals = tuple(sorted(pairs, key=lambda kv: kv[0]))
    cells = ()
    if fn.__closure__:
        cells = tuple((n, _hashable(c.cell_contents))
                      for n, c in zip(fn.__code__.co_freevars, fn.__closure__) if _cell_full(c))
    return vals + cells


def _hashable(v):
    """`v` itself when hashable, else its identity (a mutable container the factory may itself
    append to counts as the same object; rebinding the name is what changes the key)."""
    try:
        hash(v)
        return v
    except TypeError:
        return ("<object>", id(v))


def _cell_full(cell) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True


# TileLang jit keywords about its host toolchain, with why they mean nothing here (warned once).
_JIT_NOT_APPLIED = {
    "execution_backend": "tilecore has one way to call each target's kernels",
    "target_host": "tilecore builds no host code",
    "verbose": "use TILECORE_DUMP_IR or Kernel.get_ir() to see the stages",
    "compile_flags": "no compiler flags are taken from the program",
    "debug_root_path": "use TILECORE_DUMP_IR=<dir>",
}
_jit_warned: set = set()


def _tilelang_jit_keywords(kw: dict, fn: str = "jit") -> None:
    """TileLang's host-toolchain keywords warn once each; any other unknown keyword raises."""
    unknown = sorted(k for k in kw if k not in _JIT_NOT_APPLIED)
    if unknown:
        raise TileError(f"tilecore.{fn} got unknown keyword argument(s) {', '.join(unknown)}",
                        caller_loc(), hint=f"tilecore.{fn} takes out_idx, target and pass_configs")
    for k in kw:
        if (fn, k) not in _jit_warned:
            _jit_warned.add((fn, k))
            loc = caller_loc()
            warnings.warn_explicit(f"tilecore.{fn}({k}=...) has no effect: {_JIT_NOT_APPLIED[k]}",
                                   TileConfigWarning, loc.file if loc else "<tilecore>",
                                   loc.line if loc else 0)


def jit(func=None, *, out_idx=None, target="auto", pass_configs=None, **unknown):
    """Compile a kernel: `tilecore.jit(prim_func, out_idx=[-1], target="cpu")`, or decorate a
    factory `@tilecore.jit(out_idx=[-1])\\ndef matmul(M, N, K): ... return main`.

    Any other keyword (TileLang's `execution_backend`, `target_host`, ...) is a TileError: an
    option that would be ignored must not look accepted."""
    _tilelang_jit_keywords(unknown)
    options_from_pass_configs(pass_configs)  # a bad key fails at decoration, not first call
    if func is None:
        return lambda f: jit(f, out_idx=out_idx, target=target, pass_configs=pass_configs)
    if isinstance(func, PrimFunc):
        return compile(func, out_idx, target, pass_configs)
    if callable(func) and eager.is_eager(func):
        if out_idx is not None:
            raise TileError(f"{func.__name__} is an eager kernel; its outputs are what it returns",
                            caller_loc(), hint="drop out_idx and `return` the T.empty outputs")
        from .jit_eager import EagerJIT  # eager kernels only: not imported by a cache hit

        return EagerJIT(func, target, pass_configs)
    if callable(func):
        return JITFactory(func, out_idx, target, pass_configs)
    raise TileError(f"tilecore.jit cannot compile a {type(func).__name__}", caller_loc(),
                    hint="pass a @T.prim_func kernel, or decorate a function returning one")
