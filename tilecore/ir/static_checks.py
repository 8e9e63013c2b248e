"""User-facing static checks of tile IR, run for every target before any lowering.

Each is a mistake some target would otherwise accept silently or fail on only at run time:

- two `T.dynamic` objects with one name (the call binds dimensions by name, so they would
  collide);
- a grid dimension or `T.Parallel` extent that is a constant <= 0 (the kernel would do nothing);
- an index that is provably out of bounds: constant or affine in loop and block indices of
  constant range, not under a branch (a branch may guard it), against a buffer of constant
  shape; and a tile copy whose constant region runs past a shared/fragment/local buffer;
- the language's portable launch limits (threads per block, shared memory per block), which
  every GPU target enforces; a kernel meant only for CPUs opts out with `T.Kernel(..., is_cpu=True)`.

Everything raises a TileError subclass at the statement's file:line, with a fix. The call-time
checks (values bound to symbolic sizes, grids that depend on them) are in `call_checks`.
"""

from __future__ import annotations

from ..errors import TileBindingError, TileShapeError
from .buffer import Buffer, Region
from .expr import Expr, Load, Var, const_int, linear
from .grid_sync import check_grid_syncs
from .module import PrimFunc
from .stmt import (
    AtomicAdd,
    AtomicAddRegion,
    Copy,
    Fill,
    For,
    Gemm,
    IfThenElse,
    KernelLaunch,
    LetStmt,
    SeqStmt,
    Store,
)
from .visit import child_list, walk

#: Threads per block every GPU target accepts (CUDA, HIP and Metal all stop at 1024).
PORTABLE_MAX_THREADS = 1024
#: Shared memory per block (bytes) of the largest GPU target (sm_90's 227 KB opt-in).
PORTABLE_MAX_SHARED_BYTES = 227 * 1024
#: The KernelLaunch annotation `T.Kernel(..., is_cpu=True)` records.
CPU_ONLY_ANNOTATION = "is_cpu"


def check_program(func: PrimFunc, *, shared_budget: bool = True) -> None:
    """Raise a located TileError for the first user mistake of the kinds listed above (tile IR
    only: a function already lowered to thread IR is left alone). `shared_budget=False` leaves
    out the shared-memory limit, the one check that imports the lowering (its planner, and so
    the whole `tilecore.lower` package: about 100 ms from source); a compile-cache hit asks for
    that, its entry having been stored after the same printed program passed in full."""
    if not any(isinstance(n, KernelLaunch) for n in walk(func.body)):
        return
    _check_dynamic_names(func)
    _check_unbound_vars(func)
    ranges: dict[int, tuple[int, int]] = {}
    _walk(func.body, ranges, {}, guarded=False)
    if shared_budget:
        for n in walk(func.body):
            if isinstance(n, KernelLaunch):
                _check_shared_budget(n)


def _check_dynamic_names(func: PrimFunc) -> None:
    seen: dict[str, Var] = {}
    for v in func.dyn_vars:
        other = seen.get(v.name)
        if other is not None and other is not v:
            raise TileBindingError(
                f"two different T.dynamic({v.name!r}) objects (or a scalar parameter and a "
                f"T.dynamic) share the name {v.name!r}; a call binds dimensions by name, so they "
                "would collide", func.loc,
                hint=f"create it once (`{v.name} = T.dynamic({v.name!r})`) and use that object "
                "for every dimension that must be equal, or give the others distinct names")
        seen[v.name] = v


def _check_unbound_vars(func: PrimFunc) -> None:
    """A `T.dynamic` that no parameter's shape uses (e.g. only the grid): nothing binds it at
    call time. (Every other variable the frontend makes is bound by a loop, a block index or a
    name, so an unbound one here is the user's.)"""
    defined = {id(v) for v in func.dyn_vars}
    for n in walk(func.body):
        if isinstance(n, KernelLaunch):
            defined |= {id(v) for v in n.block_vars}
        elif isinstance(n, For):
            defined.add(id(n.var))
        elif isinstance(n, LetStmt):
            defined.add(id(n.var))
    _find_unbound(func.body, defined, func.loc)


def _find_unbound(root, defined: set, loc) -> None:
    """Raise for the first variable below `root` that is not in `defined`, located at the
    innermost statement holding it. One pass over the tree (each node once): a walk per
    statement was quadratic in the nesting depth and a fifth of a small program's compile."""
    from .stmt import Stmt

    stack = [(root, loc)]
    pop, push = stack.pop, stack.append
    while stack:
        n, where = pop()
        if isinstance(n, Stmt):
            where = getattr(n, "loc", None) or where
        elif isinstance(n, Var):
            if id(n) not in defined:
                raise TileBindingError(
                    f"T.dynamic({n.name!r}) is used in the kernel but no parameter's shape has it, so "
                    "no call can bind it", where,
                    hint=f"use {n.name} in a parameter's T.Tensor shape, or declare it as a scalar "
                    f"parameter `{n.name}: T.int32`")
        elif isinstance(n, Buffer):
            continue  # a leaf, as for `walk`: shapes are the parameters' business
        for k in reversed(child_list(n)):
            push((k, where))


def _walk(s, ranges: dict, lets: dict, guarded: bool) -> None:
    """Visit statements, tracking constant ranges of indices and let-bound affine values."""
    if s is None:
        return
    if isinstance(s, SeqStmt):
        inner = dict(lets)
        for x in s.stmts:
            _walk(x, ranges, inner, guarded)
            if isinstance(x, LetStmt):
                inner[id(x.var)] = x.value
    elif isinstance(s, KernelLaunch):
        _check_launch(s)
        inner = dict(ranges)
        for v, g in zip(s.block_vars, s.grid):
            n = const_int(g)
            if n is not None:
                inner[id(v)] = (0, n - 1)
        _walk(s.body, inner, lets, guarded)
    elif isinstance(s, For):
        lo, hi = const_int(s.start), const_int(s.stop)
        if s.kind == "parallel" and lo is not None and hi is not None and hi - lo <= 0:
            raise TileShapeError(f"T.Parallel extent {hi - lo} is not positive", s.loc,
                                 hint="give T.Parallel a positive tile extent")
        inner = dict(ranges)
        if lo is not None and hi is not None and s.step == 1 and hi > lo:
            inner[id(s.var)] = (lo, hi - 1)
        _walk(s.body, inner, lets, guarded)
    elif isinstance(s, IfThenElse):
        _walk(s.then_body, ranges, lets, True)
        _walk(s.else_body, ranges, lets, True)
    elif isinstance(s, (Store, AtomicAdd)):
        if not guarded:
            _check_access(s.buffer, s.indices, ranges, lets, s.loc, "store to")
            _check_loads(s.value, ranges, lets, s.loc)
            for i in s.indices:
                _check_loads(i, ranges, lets, s.loc)
    elif isinstance(s, LetStmt):
        if not guarded:
            _check_loads(s.value, ranges, lets, s.loc)
    elif isinstance(s, (Copy, Fill, Gemm, AtomicAddRegion)) and not guarded:
        for r in (getattr(s, f) for f in ("src", "dst", "a", "b", "c") if hasattr(s, f)):
            _check_region(r, ranges, lets, s.loc)


def _check_launch(s: KernelLaunch) -> None:
    for i, g in enumerate(s.grid):
        n = const_int(g)
        if n is not None and n <= 0:
            raise TileShapeError(
                f"grid dimension {i} of T.Kernel is {n}; the kernel would run no block", s.loc,
                hint="every grid dimension must be >= 1 (use T.ceildiv(n, tile) for a size that "
                "may not divide evenly)")
    check_grid_syncs(s)  # T.sync_grid: top level only, no block state across it
    if dict(s.annotations).get(CPU_ONLY_ANNOTATION):
        return
    threads = 1
    for t in s.threads:
        threads *= t
    if threads > PORTABLE_MAX_THREADS:
        raise TileShapeError(
            f"T.Kernel asks for {threads} threads per block; the portable limit is "
            f"{PORTABLE_MAX_THREADS}", s.loc,
            hint="use fewer threads, or mark a kernel meant only for CPU targets with "
            "`T.Kernel(..., is_cpu=True)`")


def _check_shared_budget(s: KernelLaunch) -> None:
    """The portable shared-memory limit (after every other check of `check_program`)."""
    if dict(s.annotations).get(CPU_ONLY_ANNOTATION):
        return
    from ..lower.smem_plan import tile_plan_bytes  # lazily: lower imports this package

    # buffers with disjoint live ranges share bytes, as TileLang merges them (smem_plan.py)
    smem = tile_plan_bytes(s)
    if smem > PORTABLE_MAX_SHARED_BYTES:
        raise TileShapeError(
            f"the kernel needs {smem} bytes of shared memory (buffers with disjoint live ranges "
            f"sharing storage); the portable limit is "
            f"{PORTABLE_MAX_SHARED_BYTES} bytes per block", s.loc,
            hint="use smaller tiles (or fewer pipeline stages), or mark a kernel meant only for "
            "CPU targets with `T.Kernel(..., is_cpu=True)`")


def _interval(e, ranges: dict, lets: dict, depth: int = 0) -> tuple[int, int] | None:
    """Exact [min, max] of an affine integer expression over independent constant-range
    variables, or None when it is not provably bounded."""
    lin = linear(e)
    if lin is None or depth > 8:
        return None
    terms, c = lin
    lo = hi = c
    for atom, k in terms.items():
        if isinstance(atom, Var) and id(atom) in ranges:
            a, b = ranges[id(atom)]
        elif isinstance(atom, Var) and id(atom) in lets:
            r = _interval(lets[id(atom)], ranges, lets, depth + 1)
            if r is None:
                return None
            a, b = r
        else:
            return None
        lo += min(k * a, k * b)
        hi += max(k * a, k * b)
    return lo, hi


def _shown(e) -> str:
    from .printer import print_node

    return print_node(e)


def _check_access(buf: Buffer, indices, ranges: dict, lets: dict, loc, what: str) -> None:
    for d, (i, n) in enumerate(zip(indices, buf.shape)):
        if not isinstance(n, int) or not isinstance(i, Expr):
            continue
        r = _interval(i, ranges, lets)
        if r is None:
            continue
        lo, hi = r
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            raise TileShapeError(
                f"{what} {buf.name}: index {_shown(i)} of dimension {d} reaches {bad}, outside "
                f"[0, {n - 1}] ({buf.name} has shape {tuple(buf.shape)})", loc,
                hint="fix the index or the loop bound; a negative index does not count from the "
                "end in kernels; guard a partial tile with `if`")


def _check_loads(e, ranges: dict, lets: dict, loc) -> None:
    if not isinstance(e, Expr):
        return
    from .expr import Select

    for n in walk(e):
        if isinstance(n, Select):
            return  # a select may guard its operands (T.if_then_else(i < n, A[i], 0))
    for n in walk(e):
        if isinstance(n, Load) and isinstance(n.buffer, Buffer):
            _check_access(n.buffer, n.indices, ranges, lets, loc, "load from")


def _check_region(r, ranges: dict, lets: dict, loc) -> None:
    if not isinstance(r, Region) or r.buffer.scope == "global":
        return  # copies of global tiles are clipped at the tensor's edge by design
    for d, (start, ext, n) in enumerate(zip(r.starts, r.extents, r.buffer.shape)):
        if not isinstance(n, int):
            continue
        iv = _interval(start, ranges, lets)
        if iv is None:
            continue
        lo, hi = iv
        if lo < 0 or hi + ext > n:
            raise TileShapeError(
                f"the region [{lo}:{hi + ext}) of dimension {d} runs past {r.buffer.name} "
                f"(shape {tuple(r.buffer.shape)})", loc,
                hint=f"keep the region inside {r.buffer.name}: start + extent <= {n}")
