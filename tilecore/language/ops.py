"""The T.* functions a kernel calls: allocation, tile operations, loops, math."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes as dt
from ..errors import TileShapeError, TileSyntaxError, TileTypeError
from ..ir.buffer import Buffer, Region
from ..ir.expr import Expr, Var, as_expr, binop, cast, const_int, select, unary
from ..ir.stmt import Copy, CumSum, Fill, Gemm, IfThenElse, SeqStmt
from .builder import builtin, current
from .copy_extents import match_extents
from .refs import Ref, buffer_of, region_of, shape_of, squeezed

# ----------------------------------------------------------------------------- signatures


@dataclass(frozen=True)
class TensorSpec:
    """`T.Tensor(shape, dtype)` in a parameter annotation."""

    shape: tuple
    dtype: dt.DType


def tensor_spec(shape, dtype="float32") -> TensorSpec:
    """Annotate a kernel parameter as a global tensor of `shape` (ints or T.dynamic vars)."""
    from ..errors import TileError, caller_loc

    try:
        if isinstance(shape, (int, np.integer, Var)):  # one dimension, a NumPy int included
            shape = (shape,)
        shape = tuple(int(s) if isinstance(s, np.integer) else s for s in shape)
        for s in shape:
            if isinstance(s, bool) or not isinstance(s, (int, Var)):
                raise TileShapeError(
                    f"tensor dimension {s!r} is neither an int nor a T.dynamic variable",
                    hint="use T.dynamic('n') for a dimension known only at call time (a float "
                    "size needs int(...))",
                )
            if isinstance(s, int) and s < 1:
                raise TileShapeError(f"tensor dimension {s} is not positive",
                                     hint="every tensor dimension must be >= 1")
        return TensorSpec(shape, dt.as_dtype(dtype))
    except TileError as e:
        # annotations are evaluated by Python when the `def` runs: point at that line
        raise e.with_loc(caller_loc()) from None


class _TensorAnnotation:
    """`T.Tensor`: called, `T.Tensor((M, N), dtype)`, or subscripted, TileLang's
    `T.Tensor[(M, N), dtype]`; both give the same TensorSpec."""

    __name__ = "Tensor"

    def __call__(self, shape, dtype="float32", data=None):
        """`T.Tensor(shape, dtype)`; with `data` (a buffer's `.data`, inside a kernel) a view of
        that buffer (`tilecore.language.global_views`)."""
        if data is not None:
            from .global_views import tensor_view

            return tensor_view(shape, dtype, data)
        return tensor_spec(shape, dtype)

    def __getitem__(self, key) -> TensorSpec:
        """`T.Tensor[shape, dtype]` (or `T.Tensor[shape]` for float32)."""
        if isinstance(key, tuple) and len(key) == 2 and not isinstance(key[1], (int, Var)):
            return tensor_spec(key[0], key[1])
        return tensor_spec(key)

    def __repr__(self) -> str:
        return "T.Tensor"


Tensor = _TensorAnnotation()
Buffer_ = Tensor


def dynamic(name: str, dtype="int32"):
    """A symbolic dimension, bound from the arguments' shapes at call time; a string naming
    several (`T.dynamic("batch, seq_len")`) gives a tuple of them, as T.const does."""
    names = [n for n in name.replace(",", " ").split() if n] if isinstance(name, str) else [name]
    if len(names) > 1:
        return tuple(Var(n, dt.as_dtype(dtype)) for n in names)
    return Var(name.strip() if isinstance(name, str) else name, dt.as_dtype(dtype))


@dataclass(frozen=True)
class KernelSpec:
    """The arguments of `T.Kernel(*grid, threads=...)`."""

    grid: tuple
    threads: tuple
    annotations: tuple = ()


@builtin
def Kernel(*grid, threads=128, prelude=None, is_cpu=False) -> KernelSpec:
    """Launch a grid of blocks, each running the `with` body with `threads` threads."""
    if not grid:
        raise TileShapeError("T.Kernel needs at least one grid dimension",
                             hint="write T.Kernel(num_blocks, threads=128)")
    if len(grid) > 3:
        raise TileShapeError(f"T.Kernel takes at most 3 grid dimensions, got {len(grid)}",
                             hint="fold extra dimensions into one and split the block index")
    if isinstance(threads, (int, np.integer)):
        threads = (threads,)
    threads = tuple(_size(t) for t in threads)
    for t in threads:
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            raise TileShapeError(f"threads must be positive compile-time ints, got {threads!r}",
                                 hint="write threads=128 (or a tuple of positive ints)")
    g = tuple(as_expr(_size(x)) for x in grid)
    for x in g:
        if not x.dtype.is_int:
            raise TileTypeError("grid dimensions must be integers",
                                hint="use T.ceildiv(n, tile) for a size that does not divide")
    if prelude is not None:
        raise TileSyntaxError("T.Kernel(prelude=...) (C source injected into the kernel) is not "
                              "supported", hint="drop prelude; write the helper as a @T.macro")
    # is_cpu=True opts a CPU-only kernel out of the portable GPU limits (ir/static_checks.py)
    return KernelSpec(g, threads, (("is_cpu", True),) if is_cpu else ())


@dataclass(frozen=True)
class LoopSpec:
    """A `for` iterator: T.Parallel / T.Pipelined / T.serial / T.unroll / range."""

    kind: str
    starts: tuple
    stops: tuple
    step: int = 1
    annotations: tuple = ()


def _size(x):
    """`x` with a NumPy integer scalar made a Python int: a size read from an array
    (`a.shape[0]`, `np.int64(16)`) is as constant as a literal, and where a size goes (a grid,
    threads, a loop bound, a tile shape) it takes no dtype of its own (issue 16 item 12)."""
    return int(x) if isinstance(x, np.integer) else x


def _range_args(start, stop, what):
    if stop is None:
        start, stop = 0, start
    return as_expr(_size(start)), as_expr(_size(stop))


@builtin
def Parallel(*extents, coalesced_width=None, loop_layout=None) -> LoopSpec:
    """An n-d loop whose iterations are independent; the compiler maps it onto threads."""
    if not extents:
        raise TileShapeError("T.Parallel needs at least one extent",
                             hint="write T.Parallel(m) or T.Parallel(m, n)")
    extents = tuple(_size(e) for e in extents)
    for e in extents:
        if const_int(e) is None:
            raise TileShapeError(
                "T.Parallel extents must be compile-time constants",
                hint="loop over the tile shape and mask with `if` for partial tiles",
            )
    return LoopSpec("parallel", tuple(as_expr(0) for _ in extents), tuple(as_expr(e) for e in extents))


@builtin
def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None) -> LoopSpec:
    """A serial loop the compiler may software-pipeline `num_stages` deep.

    TileLang's `order`, `stage`, `sync` and `group` (a hand-written schedule) are not applied:
    the compiler derives the schedule from the loop body; giving them warns once per line
    (`tilecore.language.hints`). A schedule reorders work, never changes a value."""
    from .hints import ignored_hint

    given = [n for n, v in (("order", order), ("stage", stage), ("sync", sync), ("group", group))
             if v is not None]
    if given:
        ignored_hint(f"T.Pipelined({', '.join(given)}=...)",
                     "the compiler derives the pipeline schedule (stage buffers, prologue, waits) "
                     "from the loop body and num_stages")
    num_stages = _size(num_stages)
    if isinstance(num_stages, bool) or not isinstance(num_stages, int) or num_stages < 0:
        raise TileShapeError(f"T.Pipelined: num_stages={num_stages!r} is not a non-negative int",
                             hint="use num_stages=0 or 1 for no pipelining, 2..4 for a pipeline")
    s, e = _range_args(start, stop, "T.Pipelined")
    return LoopSpec("pipelined", (s,), (e,), 1, (("num_stages", int(num_stages)),))


@builtin
def serial(start, stop=None, step=1) -> LoopSpec:
    """A sequential loop."""
    s, e = _range_args(start, stop, "T.serial")
    return LoopSpec("serial", (s,), (e,), _const_step(step))


@builtin
def unroll(start, stop=None, step=1, explicit=False, unroll_factor=None) -> LoopSpec:
    """A sequential loop the compiler unrolls."""
    s, e = _range_args(start, stop, "T.unroll")
    return LoopSpec("unroll", (s,), (e,), _const_step(step))


def _const_step(step) -> int:
    v = const_int(step)
    if v is None or v == 0:
        raise TileShapeError("a loop step must be a non-zero compile-time integer",
                             hint="give the step as a Python int other than 0")
    return v


vectorized = serial

# ----------------------------------------------------------------------------- allocation


def _shape(shape, what) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer, Expr)):
        shape = (shape,)
    out = []
    for s in shape:
        v = const_int(s)
        if v is None:
            raise TileShapeError(
                f"the shape of {what} must be made of compile-time constants, got {s!r}",
                hint="tile shapes are fixed when the kernel is built; pass sizes as Python ints",
            )
        if v < 1:
            raise TileShapeError(f"the shape of {what} has a non-positive dimension {v}",
                                 hint="every tile dimension must be >= 1")
        out.append(v)
    return tuple(out)


def _alloc(shape, dtype, scope, fn) -> Buffer:
    b = current()
    name = b.unique_name(b.pending_name() or scope)
    d = dt.shared_dtype(dtype) if scope == "shared" else dt.as_dtype(dtype)
    return b.allocate(Buffer(name, _shape(shape, f"{fn} {name}"), d, scope))


@builtin
def alloc_shared(shape, dtype, scope="shared.dyn") -> Buffer:
    """A tile in shared memory, visible to every thread of the block."""
    return _alloc(shape, dtype, "shared", "T.alloc_shared")


@builtin
def alloc_fragment(shape, dtype, scope="local.fragment") -> Buffer:
    """A tile in registers, distributed over the block's threads by layout inference."""
    return _alloc(shape, dtype, "fragment", "T.alloc_fragment")


@builtin
def alloc_local(shape, dtype, scope="local") -> Buffer:
    """A small array held per thread."""
    return _alloc(shape, dtype, "local", "T.alloc_local")


@builtin
def alloc_var(dtype, init=None, scope="local.var"):
    """A scalar variable, read and assigned by plain name (`v = v + 1`)."""
    b = current()
    name = b.unique_name(b.pending_name() or "var")
    if b.parallel_depth and b.kernel is not None:
        return _private_var(b, name, dt.as_dtype(dtype), init)
    buf = b.allocate(Buffer(name, (1,), dt.as_dtype(dtype), "local", is_var=True))
    if init is not None:
        from ..ir.stmt import Store

        b.emit(Store(buf, (as_expr(0),), cast(init, buf.dtype), b.loc))
    return buf


def _private_var(b, name: str, dtype, init):
    """`T.alloc_var` inside `T.Parallel` (see builder.PrivateVar): a fragment shaped like the
    enclosing parallel loops (allocated with the kernel's buffers), one element per iteration."""
    from ..ir.stmt import Store
    from .builder import PrivateVar

    vars_ = tuple(v for vs, _ in b.parallel_loops for v in vs)
    shape = tuple(int(const_int(e)) for _, es in b.parallel_loops for e in es)
    buf = Buffer(name, shape, dtype, "fragment")
    b.kernel.allocs.append(buf)  # per iteration, not per statement: outside the loop body
    pv = PrivateVar(buf, vars_)
    if init is not None:
        b.emit(Store(buf, vars_, cast(init, dtype), b.loc))
    return pv


# ----------------------------------------------------------------------------- tile operations


@builtin
def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None) -> None:
    """Copy a tile between global, shared and fragment memory (start-corner or slice form).
    `eviction_policy` ("evict_normal", "evict_first", "evict_last") sets the L2 priority of
    the global reads of a global -> shared copy that a pipelined loop turns into TMA stage
    copies (streamed-once operands: "evict_first", so they do not push other data out of L2);
    on CUDA, a vectorized global <-> fragment copy with "evict_first" uses the streaming
    accesses (`ld/st.global.cs`); other copies ignore it (the values copied are the same)."""
    b = current()
    hint = _cache_hint(eviction_policy)
    if disable_tma:
        from .hints import ignored_hint

        ignored_hint("T.copy(disable_tma=True)", "the lowering chooses the copy engine per target")
    from .global_views import copy_view, is_view_ref, whole

    src, dst = whole(src), whole(dst)  # `T.copy(T.reshape(A, ...), f)`: all of the view
    if is_view_ref(src) or is_view_ref(dst):
        copy_view(src, dst)  # a regrouping view of a global tensor: an element copy
        return
    from .views import regroups, tile_operands

    if regroups(src) or regroups(dst):  # a regrouping T.reshape view: through a staging tile
        src, dst, finish = tile_operands(src, dst, dst_read=False)
        copy(src, dst, eviction_policy=eviction_policy)
        finish()
        return
    src_shape, dst_shape = shape_of(src), shape_of(dst)
    if src_shape is None and dst_shape is None:
        raise TileShapeError(
            "T.copy cannot infer the tile shape: both sides are start corners or symbolic",
            hint="make one side a whole buffer or a slice with constant extents",
        )
    sr = region_of(src, _same_rank_extents(dst, src) or dst_shape, "copy source")
    dr = region_of(dst, _same_rank_extents(src, dst) or (src_shape if src_shape is not None
                                                         else squeezed(sr.extents)), "copy destination")
    sr, dr = match_extents(sr, dr, b.loc)
    b.emit(Copy(sr, dr, b.loc, cache_hint=hint))


_EVICTION_POLICIES = {None: "", "evict_normal": "", "evict_first": "evict_first", "evict_last": "evict_last"}


def _cache_hint(eviction_policy) -> str:
    """The Copy.cache_hint of a T.copy `eviction_policy` (TileLang's names)."""
    if eviction_policy not in _EVICTION_POLICIES:
        raise TileTypeError(f"T.copy eviction_policy={eviction_policy!r} is not one of "
                            f"{sorted(k for k in _EVICTION_POLICIES if k)}",
                            hint='write eviction_policy="evict_first" for data read once')
    return _EVICTION_POLICIES[eviction_policy]


def _same_rank_extents(other, corner) -> tuple | None:
    """The full extents of `other` (a buffer or sliced region) when `corner` is a start corner
    into a buffer of the same rank: a (16, 1) tile then covers a (16, 1) region, not the
    (1, 16) one that aligning its squeezed shape to the trailing dimensions would give."""
    if shape_of(other) is None or not isinstance(corner, Ref) or not corner.is_element:
        return None
    ext = region_of(other, None, "copy operand").extents
    return ext if len(ext) == len(corner.buffer.shape) else None


_ACCUM_OK = {
    "float16": ("float16", "float32"), "bfloat16": ("float32",), "float32": ("float32",),
    "float64": ("float64",), "float8_e4m3fn": ("float32", "float16"),
    "float8_e5m2": ("float32", "float16"), "int8": ("int32",), "uint8": ("int32",), "int4": ("int32",),
    "uint4": ("int32",),
}


def _clear_flag(b, clear_accum, rc) -> bool:
    """`clear_accum` as a build-time bool. A kernel value (`clear_accum=(k == 0)` in a loop, as
    TileLang allows) becomes `if cond: T.clear(C)` before an accumulating gemm: the same values."""
    if isinstance(clear_accum, Ref):
        clear_accum = clear_accum.as_expr()
    if not isinstance(clear_accum, Expr):
        return bool(clear_accum)
    k = const_int(clear_accum)
    if k is not None:
        return bool(k)
    cond = clear_accum if clear_accum.dtype.is_bool else binop("ne", clear_accum, 0)
    zero = Fill(rc, cast(as_expr(0, rc.buffer.dtype), rc.buffer.dtype), b.loc)
    b.emit(IfThenElse(cond, SeqStmt((zero,), b.loc), None, b.loc))
    return False


class GemmWarpPolicy:
    """How gemm splits its tile over warps (accepted on every target; a hint for GPUs)."""

    Square = "square"
    FullRow = "full_row"
    FullCol = "full_col"


@builtin
def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0) -> None:
    """C (+)= op(A) @ op(B) on tiles; A and B in shared or fragment memory, C a fragment.

    `wg_wait=-1` makes the product asynchronous on wgmma targets (sm_90a): it stays in flight
    and the compiler waits for it just before the first statement that reads or writes C or
    the registers of A (so independent work, such as another tile's softmax, overlaps it).
    Elsewhere the gemm is synchronous, which computes the same values."""
    b = current()
    if k_pack != 1 or wg_wait not in (0, -1):
        from .hints import ignored_hint

        ignored_hint("T.gemm(k_pack=, wg_wait=N>0)", "the lowering packs operands and places the "
                     "waits for asynchronous tensor-core results itself (wg_wait=-1 is honoured)")
    ra, rb, rc = region_of(A, None, "gemm A"), region_of(B, None, "gemm B"), region_of(C, None, "gemm C")
    clear_accum = _clear_flag(b, clear_accum, rc)
    for r, n in ((ra, "A"), (rb, "B"), (rc, "C")):
        if len(r.squeezed_shape) != 2 and not (len(r.extents) >= 2 and len(r.squeezed_shape) < 2):
            raise TileShapeError(f"gemm {n} ({r.buffer.name}) must be a 2-D tile, got {r.extents}",
                                 hint="pass 2-D tiles (or 2-D regions of a larger buffer)")
        if r.buffer.scope == "global":
            raise TileTypeError(
                f"gemm {n} ({r.buffer.name}) is in global memory",
                hint="T.copy the tile into T.alloc_shared / T.alloc_fragment first",
            )
    if rc.buffer.scope not in ("fragment", "local"):
        raise TileTypeError(
            f"gemm C ({rc.buffer.name}) must be a fragment (T.alloc_fragment), not {rc.buffer.scope}",
            hint="accumulate into T.alloc_fragment and T.copy it out afterwards",
        )
    g = Gemm(ra, rb, rc, bool(transpose_A), bool(transpose_B), bool(clear_accum), str(policy), b.loc,
             asynchronous=wg_wait == -1)
    m, n, k = g.mnk
    bk = rb.extents[-1] if transpose_B else rb.extents[-2]
    if k != bk:
        raise TileShapeError(
            f"gemm K mismatch: A {ra.buffer.name}{ra.extents} has K={k} but B "
            f"{rb.buffer.name}{rb.extents} has K={bk}",
            hint="check transpose_A / transpose_B and the tile shapes",
        )
    cm, cn = rc.extents[-2], rc.extents[-1]
    if (cm, cn) != (m, n):
        raise TileShapeError(
            f"gemm C {rc.buffer.name}{rc.extents} does not match the product shape ({m}, {n})",
            hint=f"allocate C as ({m}, {n}), or check transpose_A / transpose_B",
        )
    da, db, dc = ra.buffer.dtype, rb.buffer.dtype, rc.buffer.dtype
    if da != db:
        raise TileTypeError(f"gemm A is {da} but B is {db}; both operands must have one dtype",
                            hint="allocate (or T.copy) both tiles in one dtype")
    if dc.name not in _ACCUM_OK.get(da.name, (da.name,)):
        raise TileTypeError(
            f"gemm accumulates {da} into C of dtype {dc}",
            hint=f"allocate C as one of {_ACCUM_OK.get(da.name, (da.name,))}",
        )
    b.emit(g)


@builtin
def fill(buffer, value) -> None:
    """Set every element of a buffer or region to `value`; an element (`T.fill(buf[0], v)`) is
    the one-element region at it, as in TileLang."""
    b = current()
    from .views import regroups

    if regroups(buffer):  # a regrouping T.reshape view holds exactly its base's elements
        buffer = buffer.base
    one = (1,) * len(buffer.items) if isinstance(buffer, Ref) and buffer.is_element else None
    r = region_of(buffer, one, "fill target")
    b.emit(Fill(r, cast(as_expr(value, r.buffer.dtype), r.buffer.dtype), b.loc))


@builtin
def clear(buffer) -> None:
    """Set every element to zero."""
    fill(buffer, 0)


@builtin
def cumsum(src, dst=None, dim=0, reverse=False):
    """Inclusive prefix sum of src along dim into dst (in place when dst is omitted)."""
    b = current()
    from .views import is_region, region_tile, regroups, staging_tile, tile_operands, write_back

    if is_region(src) or is_region(dst):  # shared / fragment slices: through tiles of their extents
        tmp, back = region_tile(src, True, "cumsum source") if is_region(src) else (src, None)
        if dst is None or dst is src:  # in place: the staged source holds the result
            cumsum(tmp, tmp, dim, reverse)
            if back is not None:
                back()
            return
        out, finish = region_tile(dst, False, "cumsum destination") if is_region(dst) else (dst, lambda: None)
        cumsum(tmp, out, dim, reverse)
        finish()
        return
    if regroups(src) or regroups(dst):  # a regrouping T.reshape view: through a staging tile
        if dst is None or dst is src:  # in place: the staged source holds the result
            tmp = staging_tile(src, copy_in=True)
            cumsum(tmp, tmp, dim, reverse)
            write_back(src, tmp)
            return
        src, dst, finish = tile_operands(src, dst, dst_read=False)
        cumsum(src, dst, dim, reverse)
        finish()
        return
    s = buffer_of(src, "cumsum source")
    d = s if dst is None else buffer_of(dst, "cumsum destination")
    if tuple(s.shape) != tuple(d.shape):
        raise TileShapeError(f"cumsum source {s.name}{tuple(s.shape)} and destination "
                             f"{d.name}{tuple(d.shape)} differ in shape",
                             hint="give the destination the source's shape")
    rank = len(s.shape)
    if not isinstance(dim, int) or not -rank <= dim < rank:
        raise TileShapeError(f"cumsum dim={dim!r} is out of range for rank {rank}",
                             hint=f"use a dim in [-{rank}, {rank - 1}]")
    b.emit(CumSum(s, d, dim % rank, bool(reverse), b.loc))




@builtin
def sync_threads():
    """A block-wide barrier; the compiler inserts the ones tile ops need by itself."""
    return None


# ----------------------------------------------------------------------------- math


def _math(op):
    @builtin
    def f(x):
        return unary(op, x)

    f.__name__ = op
    f.__doc__ = f"Element-wise {op}."
    return f


exp, exp2, log, log2, sqrt, rsqrt, tanh, sigmoid, erf, floor, ceil, sin, cos, round_, trunc = (
    _math(o) for o in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
                       "floor", "ceil", "sin", "cos", "round", "trunc"))


@builtin
def abs(x):  # noqa: A001 - mirrors T.abs
    """Absolute value."""
    if isinstance(x, (int, float)):
        return x if x >= 0 else -x
    return unary("abs", x)


@builtin
def max(a, *rest):  # noqa: A001 - mirrors T.max
    """The larger of the arguments."""
    out = a
    for r in rest:
        out = binop("max", out, r)
    return out


@builtin
def min(a, *rest):  # noqa: A001 - mirrors T.min
    """The smaller of the arguments."""
    out = a
    for r in rest:
        out = binop("min", out, r)
    return out


@builtin
def pow(a, b):  # noqa: A001 - mirrors T.pow
    """a ** b."""
    a = as_expr(a)
    if not a.dtype.is_float:
        a = cast(a, dt.float32)
    return binop("pow", a, b)


@builtin
def if_then_else(cond, a, b):
    """`a` where cond holds else `b`; only the chosen side is evaluated."""
    if isinstance(cond, bool):
        return a if cond else b
    return select(cond, a, b)


@builtin
def infinity(dtype):
    """+inf of a float dtype."""
    d = dt.as_dtype(dtype)
    if not dt.has_infinity(d):
        raise TileTypeError(f"{d} has no infinity", hint="use T.max_value / T.min_value")
    return cast(float("inf"), d)


@builtin
def max_value(dtype):
    """The largest finite value of dtype."""
    d = dt.as_dtype(dtype)
    return cast(dt.max_value(d), d)


@builtin
def min_value(dtype):
    """The most negative finite value of dtype."""
    d = dt.as_dtype(dtype)
    return cast(dt.min_value(d), d)


@builtin
def ceildiv(a, b):
    """`a / b` rounded toward positive infinity, for every sign; one definition for Python ints
    and kernel values. On kernel values it is C's truncating quotient plus one where the
    remainder is non-zero and has the divisor's sign (`(a + b - 1) / b`, the usual spelling, is
    wrong for a negative operand), built from `/`, `%` and a select, which every backend has."""
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
        return -(-a // b)
    ea = a.as_expr() if isinstance(a, Ref) else as_expr(a)
    eb = b.as_expr() if isinstance(b, Ref) else as_expr(b, ea.dtype)
    q, r = binop("div", ea, eb), binop("mod", ea, eb)
    bc = const_int(eb)
    if bc is not None and bc > 0:
        up = binop("gt", r, 0)
    else:
        up = binop("and", binop("ne", r, 0), binop("eq", binop("gt", r, 0), binop("gt", eb, 0)))
    return binop("add", q, select(up, as_expr(1, q.dtype), as_expr(0, q.dtype)))


@builtin
def cast_(value, dtype):
    """Convert value to dtype."""
    return cast(value, dtype)


def region(buffer_ref, access_type, *extents):
    """TileLang's explicit region: `T.region(A[i, j], "r", 64, 64)`."""
    if not isinstance(buffer_ref, Ref):
        raise TileTypeError("T.region takes an element reference like A[i, j]",
                            hint='write T.region(A[i, j], "r", 64, 64)')
    ext = tuple(int(e) for e in extents)
    rank = len(buffer_ref.buffer.shape)
    ext = (1,) * (rank - len(ext)) + ext
    return Region(buffer_ref.buffer, tuple(as_expr(i) for i in buffer_ref.items), ext)
