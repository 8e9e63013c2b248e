"""Atomic updates: `T.atomic_add` (an element or a tile) and `T.atomic_max` / `T.atomic_min`
(an element). Each element update is one `AtomicAdd` statement (`op` add / max / min); a
tile's addition is one `AtomicAddRegion`. Max and min are exact in every dtype and propagate
NaN like `T.max` / `T.min` (tilecore.semantics), on every target."""

from __future__ import annotations

from ..errors import TileShapeError, TileTypeError
from ..ir.buffer import Buffer
from ..ir.expr import as_expr, cast
from ..ir.stmt import AtomicAdd, AtomicAddRegion
from .builder import builtin, current
from .refs import Ref, region_of


@builtin
def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False):
    """Atomically add `value` into `dst`: an element (scalar form) or a tile (region form).
    TileLang's `use_tma=True` on a tile asks for one bulk reduce-add of the whole tile through
    shared memory (on TMA targets; tilecore.lower.tma_reduce warns and falls back to per-element
    atomics where it does not apply); on an element it is accepted with a one-time warning (it
    stays atomic). `memory_order=` on an element: "relaxed" (the default) or any stronger order
    ("acquire", "release", "acq_rel", "seq_cst", "consume"), which tilecore gives as acq_rel:
    a device-scope fence on each side of the addition (what a block needs to publish data to
    other blocks through a counter, or to read theirs); on a tile it warns (each element's add
    stays relaxed). `return_prev=True` returns the element's value before the addition, in
    thread-level kernels (element form)."""
    b = current()
    from .hints import ignored_hint

    tile_form = isinstance(value, (Buffer,)) or (isinstance(value, Ref) and not value.is_element)
    if use_tma and not tile_form:
        ignored_hint("T.atomic_add(use_tma=True)", "an element's atomic addition has no bulk form "
                     "(it stays a per-element atomic)")
    order = _atomic_order(memory_order)
    if tile_form and order != "relaxed":
        ignored_hint(f"T.atomic_add(memory_order={memory_order!r}) of a tile", "a tile's per-element "
                     "additions are relaxed; order a hand-off between blocks with an element's "
                     "atomic_add(memory_order='acq_rel')")
    if tile_form:
        if return_prev:
            raise TileTypeError("T.atomic_add(return_prev=True) of a tile is not provided (one old "
                                "value per element)", hint="use the element form in thread-level code")
        src = region_of(value, None, "atomic_add value")
        dr = region_of(dst, src.squeezed_shape, "atomic_add destination")
        if dr.squeezed_shape != src.squeezed_shape:
            raise TileShapeError(f"atomic_add region {dr.extents} does not match the tile {src.extents}",
                                 hint="make the destination region the tile's shape")
        b.emit(AtomicAddRegion(dr, src, b.loc, bool(use_tma)))
        return
    if not isinstance(dst, Ref) or not dst.is_element:
        raise TileTypeError("atomic_add destination must be an element like C[i, j] or a region "
                            "matched by a tile value", hint="write T.atomic_add(C[i, j], value)")
    v = cast(as_expr(value, dst.buffer.dtype), dst.buffer.dtype)
    if return_prev:
        return _atomic_prev(b, dst, v, order)
    b.emit(AtomicAdd(dst.buffer, tuple(as_expr(i) for i in dst.items), v, b.loc, order=order))


_ORDERS = {None: "relaxed", "relaxed": "relaxed", "consume": "acq_rel", "acquire": "acq_rel",
           "release": "acq_rel", "acq_rel": "acq_rel", "seq_cst": "acq_rel"}


def _atomic_order(memory_order, name: str = "atomic_add") -> str:
    """The Atomic order ("relaxed" / "acq_rel") of TileLang's `memory_order=` argument."""
    if memory_order not in _ORDERS:
        raise TileTypeError(f"T.{name}(memory_order={memory_order!r}) is not a memory order",
                            hint="use 'relaxed', 'acquire', 'release', 'acq_rel' or 'seq_cst'")
    return _ORDERS[memory_order]


def _atomic_prev(b, dst, v, order: str = "relaxed", op: str = "add"):
    """`T.atomic_add(dst, v, return_prev=True)` (and atomic_max / atomic_min): the element's
    value before this thread's update, as a kernel value (read from a hidden per-thread
    variable the atomic writes).
    Thread-level kernels only: in a tile program the scalar code is the block's, with no
    thread whose addition it would be."""
    from ..ir.expr import Load
    from .thread_level import THREAD_LEVEL

    if b.kernel is None or (THREAD_LEVEL, True) not in b.kernel.annotations or b.parallel_depth:
        raise TileTypeError(f"T.atomic_{op}(return_prev=True) needs a thread-level kernel (outside "
                            "T.Parallel): the old value is the executing thread's",
                            hint="bind the thread index first (tx = T.get_thread_binding()); in "
                                 "tile programs read the old value in a separate step")
    if dst.buffer.scope not in ("global", "shared"):
        raise TileTypeError(f"T.atomic_{op}(return_prev=True) on {dst.buffer.scope} buffer "
                            f"{dst.buffer.name}: only global and shared memory is shared by threads",
                            hint="use a plain update for per-thread storage")
    prev = b.allocate(Buffer(b.unique_name("atomic_prev"), (1,), dst.buffer.dtype, "local", is_var=True))
    b.emit(AtomicAdd(dst.buffer, tuple(as_expr(i) for i in dst.items), v, b.loc, prev, order, op))
    return Load(prev, (as_expr(0),))


def _extremum(op: str, dst, value, memory_order, return_prev):
    """T.atomic_max / T.atomic_min of an element."""
    b = current()
    name = f"atomic_{op}"
    if isinstance(value, Buffer) or (isinstance(value, Ref) and not value.is_element):
        raise TileTypeError(f"T.{name} of a tile is not provided (element form only)",
                            hint=f"update each element in a T.Parallel loop: T.{name}(dst[i, j], tile[i, j])")
    if not isinstance(dst, Ref) or not dst.is_element:
        raise TileTypeError(f"T.{name} destination must be an element like C[i, j]",
                            hint=f"write T.{name}(C[i, j], value)")
    d = dst.buffer.dtype
    if not (d.is_int or d.is_float):
        raise TileTypeError(f"T.{name} on {d} buffer {dst.buffer.name}: max/min need numbers",
                            hint="use an integer or float buffer")
    order = _atomic_order(memory_order, name)
    v = cast(as_expr(value, d), d)
    if return_prev:
        return _atomic_prev(b, dst, v, order, op)
    b.emit(AtomicAdd(dst.buffer, tuple(as_expr(i) for i in dst.items), v, b.loc, order=order, op=op))


@builtin
def atomic_max(dst, value, memory_order=None, return_prev=False):
    """Atomically set element `dst` to max(dst, value) (float: NaN propagates, as T.max).
    `memory_order=` and `return_prev=` as for `T.atomic_add`'s element form."""
    return _extremum("max", dst, value, memory_order, return_prev)


@builtin
def atomic_min(dst, value, memory_order=None, return_prev=False):
    """Atomically set element `dst` to min(dst, value) (float: NaN propagates, as T.min)."""
    return _extremum("min", dst, value, memory_order, return_prev)
