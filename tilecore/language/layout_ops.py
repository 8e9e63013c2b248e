"""The T.* functions about placement, not values: shared-memory layouts and block rasterization.

- `T.annotate_layout({buf: layout})` fixes the layout of shared buffers. A layout is what
  `T.make_swizzled_layout(buf)` (XOR swizzle of 16-byte chunks, chosen for the target's banks),
  `T.make_padded_layout(buf, pad=None)` or `T.make_row_major_layout(buf)` return, a
  `T.Layout(shape, lambda i, j: ...)` index map (tilecore.ir.index_layout: checked injective at
  build time), or an explicit `tilecore.ir.smem_layout.RowMajor / Padded / Swizzled`. A fragment
  buffer takes a `T.Fragment` (thread and register maps), honoured by layout inference; other
  fragment layouts are inferred from the program (gemm, loops).
- `T.use_swizzle(panel_size, order)` runs the blocks of a 2-D grid in panels of `panel_size`
  rows (or columns) of the grid, so blocks close in launch order share operand tiles in L2.
- `T.stream_k(W, Flags)` lets a persistent warp-specialized GEMM split the k loop of its last,
  partial wave of tiles over every block, with `W` (float32) and `Flags` (int32, zeros) as the
  workspace of the partial tiles (`tilecore.lower.stream_k`).

All are recorded as annotations of the enclosing `KernelLaunch` and honoured by the thread
lowering (`tilecore.lower.smem`, `tilecore.lower.raster`, `tilecore.lower.stream_k`); the
interpreter ignores them, since none changes a value.
"""

from __future__ import annotations

from ..errors import TileSyntaxError, TileTypeError
from ..ir.buffer import Buffer
from ..ir.index_layout import FRAGMENT_ANNOTATION
from ..ir.smem_layout import (
    LAYOUT_ANNOTATION,
    RASTER_ANNOTATION,
    STREAM_K_ANNOTATION,
    LayoutRequest,
    SharedLayout,
)
from .builder import builtin, current

RASTER_ORDERS = {"row": "row", "col": "col", "column": "col"}


def _shared_buffer(buf, what: str) -> Buffer:
    if not isinstance(buf, Buffer):
        raise TileTypeError(f"{what} takes a shared buffer (from T.alloc_shared), got {buf!r}",
                            hint="pass a buffer from T.alloc_shared")
    if buf.scope != "shared":
        raise TileTypeError(f"{what}: {buf.name} is a {buf.scope} buffer; only shared buffers have "
                            f"a memory layout to choose",
                            hint="fragment layouts are inferred from T.gemm and T.Parallel and "
                                 "cannot be annotated (not supported)")
    return buf


@builtin
def make_swizzled_layout(buffer) -> LayoutRequest:
    """An XOR-swizzled layout for shared `buffer` (16-byte chunks permuted within rows; no
    padding), its parameters chosen for the target's shared-memory banks when lowering."""
    return LayoutRequest("swizzled", _shared_buffer(buffer, "T.make_swizzled_layout"))


@builtin
def make_padded_layout(buffer, pad=None) -> LayoutRequest:
    """Rows of shared `buffer` padded by `pad` elements (None: one vector of the target)."""
    if pad is not None and (not isinstance(pad, int) or isinstance(pad, bool) or pad < 0):
        raise TileTypeError(f"T.make_padded_layout pad must be a non-negative int, got {pad!r}",
                            hint="give pad as an int >= 0 (or leave it out)")
    return LayoutRequest("padded", _shared_buffer(buffer, "T.make_padded_layout"), pad)


@builtin
def make_row_major_layout(buffer) -> LayoutRequest:
    """Plain row-major placement for shared `buffer` (no padding, no swizzle)."""
    return LayoutRequest("row_major", _shared_buffer(buffer, "T.make_row_major_layout"))


def _kernel_frame(what: str):
    b = current()
    if b.kernel is None:
        raise TileSyntaxError(f"{what} must be called inside `with T.Kernel(...)`", b.loc,
                              hint="move the call into the kernel body")
    return b


@builtin
def annotate_layout(layout_map):
    """Fix the layouts of shared and fragment buffers: `{S: T.make_swizzled_layout(S), S2:
    T.Layout(S2.shape, lambda i, j: ...), F: T.Fragment(F.shape, ...)}` (module docstring)."""
    b = _kernel_frame("T.annotate_layout")
    if not isinstance(layout_map, dict):
        raise TileTypeError("T.annotate_layout takes a dict {buffer: layout}",
                            hint="write T.annotate_layout({A_shared: T.make_swizzled_layout(A_shared)})")
    entries, fragments = [], []
    for buf, lay in layout_map.items():
        if isinstance(buf, Buffer) and buf.scope == "shared" and _is_index_map(lay):
            lay = _shared_index_map(buf, lay, b.loc)
        elif isinstance(buf, Buffer) and buf.scope == "fragment" and _is_fragment(lay):
            fragments.append((buf, _fragment_map(buf, lay, b.loc), b.loc))
            continue
        elif not_honoured(buf, lay, b.loc):
            continue
        _shared_buffer(buf, "T.annotate_layout")
        if isinstance(lay, LayoutRequest):
            if lay.buffer is not buf:
                raise TileTypeError(f"T.annotate_layout gives {buf.name} a layout made for "
                                    f"{lay.buffer.name}",
                                    hint=f"write T.make_swizzled_layout({buf.name}) for {buf.name}")
        elif not isinstance(lay, SharedLayout):
            raise TileTypeError(
                f"T.annotate_layout: {type(lay).__name__} is not a supported layout for {buf.name}",
                hint="use T.make_swizzled_layout(buf), T.make_padded_layout(buf), "
                     "T.make_row_major_layout(buf), or a tilecore.ir.smem_layout layout")
        entries.append((buf, lay, b.loc))
    b.kernel.annotations.append((LAYOUT_ANNOTATION, tuple(entries)))
    if fragments:
        b.kernel.annotations.append((FRAGMENT_ANNOTATION, tuple(fragments)))


def _is_index_map(lay) -> bool:
    from .layouts import Layout

    return isinstance(lay, Layout)


def _is_fragment(lay) -> bool:
    from .layouts import Fragment

    return isinstance(lay, Fragment)


def _static_shape_of(buf: Buffer, lay, what: str, loc) -> tuple:
    """The static shape of `buf`, which the layout `lay` must be built for."""
    from ..errors import TileLayoutError

    shape = buf.static_shape
    if shape is None:
        raise TileLayoutError(f"T.annotate_layout: {buf.scope} {buf.name} has a symbolic shape, so "
                              f"its {what} cannot be checked", loc, hint="give the buffer a static shape")
    try:
        want = tuple(int(s) for s in lay.shape)
    except TypeError:
        want = None
    if want != tuple(shape):
        raise TileLayoutError(f"T.annotate_layout: the {what} of {buf.name} is for shape "
                              f"{tuple(lay.shape)}, but {buf.name} is {tuple(shape)}", loc,
                              hint=f"build it as {what}({buf.name}.shape, ...)")
    return tuple(shape)


def _fragment_map(buf: Buffer, lay, loc):
    """The tabulated `T.Fragment` of fragment `buf` (tilecore.ir.index_layout.fragment_map): every
    element in its own (thread, register), a located error otherwise. Layout inference takes it
    as the fragment's layout (a conflict with a gemm accumulator is an error there)."""
    from ..errors import TileLayoutError
    from ..ir.index_layout import IndexMapError, fragment_map

    shape = _static_shape_of(buf, lay, "T.Fragment", loc)
    try:
        return fragment_map(shape, lay.forward_thread_fn, lay.forward_index_fn, lay.replicate)
    except IndexMapError as e:
        raise TileLayoutError(f"T.annotate_layout: the T.Fragment of {buf.name} cannot be its "
                              f"layout: {e}", loc,
                              hint="give every element (and every replica) its own register of "
                                   "one thread") from None


def _shared_index_map(buf: Buffer, lay, loc) -> SharedLayout:
    """The shared layout a `T.Layout` gives `buf`: its map evaluated as index expressions, checked
    injective on the whole tile (`tilecore.ir.index_layout`), a located error otherwise."""
    from ..errors import TileLayoutError
    from ..ir.index_layout import IndexMapError, index_layout

    shape = _static_shape_of(buf, lay, "T.Layout", loc)
    try:
        return index_layout(shape, lay.forward_fn)
    except IndexMapError as e:
        raise TileLayoutError(f"T.annotate_layout: the T.Layout of {buf.name} cannot be its shared "
                              f"layout: {e}", loc,
                              hint="give every element its own storage index (a permutation, "
                                   "padding or an XOR swizzle of the indices)") from None


_told: set = set()


def not_honoured(buf, lay, loc) -> bool:
    """Whether `{buf: lay}` is a layout tilecore accepts without honouring it (warned once per
    line): a `T.Layout` index map of a fragment or local buffer, a `T.Fragment` of a buffer that
    is not a fragment, or any layout of a global or local buffer. Global tensors stay row-major
    and a fragment's layout is a `T.Fragment` or inferred; a layout moves values, never changes
    them, so results stay the same. Shared `T.Layout`s and fragment `T.Fragment`s are honoured
    (`annotate_layout`)."""
    import warnings

    from ..errors import TileConfigWarning
    from .layouts import Fragment, Layout

    if not isinstance(buf, Buffer):
        raise TileTypeError(f"T.annotate_layout keys are buffers, got {buf!r}",
                            hint="write T.annotate_layout({A_shared: layout, ...}) with buffer keys")
    if isinstance(lay, LayoutRequest) and lay.buffer is not buf:
        raise TileTypeError(f"T.annotate_layout gives {buf.scope} {buf.name} a layout made for "
                            f"{lay.buffer.name}: a shared layout for {buf.scope} {buf.name} is "
                            f"not supported", hint=f"write T.make_swizzled_layout({buf.name}) for "
                            f"a shared {buf.name}")
    if isinstance(lay, Layout):
        why = f"the explicit Layout of {buf.name}"
        reason = (f"{buf.scope} buffers take no T.Layout index map: a fragment's layout is a "
                  f"T.Fragment or inferred, a global tensor is row-major")
    elif isinstance(lay, Fragment):
        why = f"the explicit Fragment of {buf.name}"
        reason = f"a T.Fragment places the elements of a fragment buffer, and {buf.name} is {buf.scope}"
    elif buf.scope in ("fragment", "local", "global"):
        why = f"a layout for {buf.scope} buffer {buf.name}"
        reason = "global tensors are row-major; a fragment's layout is a T.Fragment or inferred"
    else:
        return False
    key = (loc, why)
    if key not in _told:
        _told.add(key)
        where = (loc.file, loc.line) if loc is not None else ("<tilecore>", 0)
        warnings.warn_explicit(f"T.annotate_layout: {why} is not honoured ({reason}); values are "
                               f"unchanged", TileConfigWarning, *where)
    return True


@builtin
def use_swizzle(panel_size=8, order="row", enable=True):
    """Block rasterization for L2 reuse: blocks of the 2-D grid run in panels of `panel_size`
    grid rows (order "row") or columns ("col"); a bijection of (bx, by), values never change."""
    b = _kernel_frame("T.use_swizzle")
    if not isinstance(panel_size, int) or isinstance(panel_size, bool) or panel_size < 1:
        raise TileTypeError(f"T.use_swizzle panel_size must be a positive int, got {panel_size!r}",
                            hint="T.use_swizzle(panel_size=10)")
    if order not in RASTER_ORDERS:
        raise TileTypeError(f"T.use_swizzle order must be 'row' or 'col', got {order!r}",
                            hint="order='row' or order='col'")
    if not isinstance(enable, bool):
        raise TileTypeError(f"T.use_swizzle enable must be True or False, got {enable!r}",
                            hint="enable=True or enable=False")
    if any(k == RASTER_ANNOTATION for k, _ in b.kernel.annotations):
        raise TileSyntaxError("T.use_swizzle is given twice in this kernel", b.loc,
                              hint="keep one call")
    if enable:
        b.kernel.annotations.append((RASTER_ANNOTATION, (panel_size, RASTER_ORDERS[order], b.loc)))


@builtin
def stream_k(workspace, flags):
    """Stream-K for the kernel's persistent tile schedule: where the tiles leave a partial last
    wave on the machine's multiprocessors, the k steps of that wave's tiles are split evenly over
    every block, and blocks that computed part of a tile hand their float32 partial accumulator
    over through `workspace` and a per-tile counter in `flags` (tilecore.lower.stream_k).

    `workspace`: a float32 global tensor of at least multiprocessors x block_M x block_N
    elements (one tile's accumulator per block; its contents need no initialization);
    `flags`: an int32 global tensor of at least one element per output tile, zeros before the
    first call (every call leaves them zero). Calls that may run at the same time (other
    streams) need workspaces of their own. Where the kernel is not a persistent GEMM or its
    tiles fill whole waves, the two tensors are not touched. A block waits only for blocks of
    lower id, which the GPU must have resident (the persistent grid is one block per
    multiprocessor of the target's `multiprocessors` fact)."""
    b = _kernel_frame("T.stream_k")
    for buf, want, what in ((workspace, "float32", "workspace"), (flags, "int32", "flags")):
        if not isinstance(buf, Buffer) or buf.scope != "global" or buf.dtype.name != want:
            got = f"{buf.name} is {buf.scope} {buf.dtype.name}" if isinstance(buf, Buffer) else f"got {buf!r}"
            got = got.replace(" global ", " ")
            raise TileTypeError(f"T.stream_k {what} must be a {want} tensor parameter; {got}",
                                hint=f"declare it in the signature, e.g. W: T.Tensor((n,), {want!r})")
    if any(k == STREAM_K_ANNOTATION for k, _ in b.kernel.annotations):
        raise TileSyntaxError("T.stream_k is given twice in this kernel", b.loc, hint="keep one call")
    b.kernel.annotations.append((STREAM_K_ANNOTATION, (workspace, flags, b.loc)))
