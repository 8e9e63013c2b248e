"""A shared-memory layout given as an index map: TileLang's `T.Layout(shape, lambda i, j: ...)`.

The user's forward function is called once, at build time, on index variables; the outputs are
index expressions (`+ * // % ^ >> &`, `T.floordiv`, comparisons, `T.if_then_else`, ...) whose
output shape is the physical extent, flattened row-major into the buffer's flat storage (a
Python `if` on an index cannot run on variables: a located error says to use T.if_then_else).
The map is tabulated on the whole tile with NumPy (tiles are small; `T.if_then_else` is
`np.where`), which proves it injective into that extent, and gives the table every NumPy
consumer reads (`offset_np`: the bank model, layout pictures) and the exact contiguity test of
vector accesses (`contiguous`: ldmatrix rows, 16-byte copies).

`index_layout` first looks for a structural layout with the same placement (row-major, an XOR
swizzle, the panelled wgmma/TMA canonical layout) and returns that: the consumers that
need a swizzle pattern (TMA boxes, wgmma descriptors) then accept it. Otherwise the result is an
`IndexMapped` layout, read through its expressions by every address computation; TMA and wgmma
do not take it (the copy stays cp.async; a gemm reading it gets an instruction that reads shared
memory by address, mma.sync on Hopper: `GemmQuery.fixed_layouts`).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import numpy as np

from .expr import NO_TRUTH_VALUE, Expr, Var, as_expr, const, index_map_scope
from .smem_layout import Panelled, RowMajor, SharedLayout, Swizzled
from .visit import substitute


class IndexMapError(ValueError):
    """The index map cannot be a shared layout (the message says why); the frontend locates it."""


def build_map(shape: tuple, fn) -> tuple[tuple[Var, ...], tuple[Expr, ...]]:
    """(index variables, output expressions) of `fn` applied to one variable per dimension."""
    params = tuple(Var(f"i{k}") for k in range(len(shape)))
    try:
        inspect.signature(fn).bind(*params)
    except TypeError as e:
        raise IndexMapError(f"the map could not be applied to {len(shape)} indices: {e}") from None
    except ValueError:  # no signature to read (a builtin): the call below tells
        pass
    try:
        with index_map_scope():  # `<` `<=` `>` `>=` on indices build comparisons, as in TileLang
            out = fn(*params)
    except Exception as e:  # noqa: BLE001 - the user's function failed on index variables
        if getattr(e, "message", None) == NO_TRUTH_VALUE:
            raise IndexMapError("the map branches on an index in Python (`if`, `and`/`or`, `min`/"
                                "`max`, or `a if cond else b`), which runs once, on index "
                                "variables; write the choice as T.if_then_else(cond, a, b) (or "
                                "T.min / T.max)") from None
        raise IndexMapError(f"the map raised {type(e).__name__} on index variables: "
                            f"{getattr(e, 'message', e)}") from None
    out = list(out) if isinstance(out, (tuple, list)) else [out]
    if not out:
        raise IndexMapError("the map returns no index")
    exprs = []
    for o in out:
        try:
            e = as_expr(o)
        except Exception:  # noqa: BLE001 - any non-expression the user's map returned
            raise IndexMapError(f"the map returns {o!r}, not an index expression") from None
        if not e.dtype.is_int:
            raise IndexMapError(f"the map returns a {e.dtype} value; storage indices are integers")
        exprs.append(e)
    return params, tuple(exprs)


def tabulate(shape: tuple, params: tuple, exprs: tuple) -> np.ndarray:
    """The outputs of the map at every logical index: int64 array (len(exprs), *shape)."""
    from ..lower.indexing import NotNumeric, evaluate

    grids = np.indices(shape, dtype=np.int64)
    env = {id(p): g for p, g in zip(params, grids)}
    memo: dict = {}
    try:
        return np.stack([np.broadcast_to(np.asarray(evaluate(e, env, memo), dtype=np.int64), shape)
                         for e in exprs])
    except NotNumeric as e:
        raise IndexMapError(f"the map uses {e}, which is not integer index arithmetic of the "
                            f"indices") from None


def _sample(shape: tuple) -> list[tuple]:
    """Elements to check a map on: all of a small tile, else the first and last rows' worth, the
    powers of two and an even spread (a few hundred calls of the user's function)."""
    size = math.prod(shape)
    if size <= 1024:
        flat = np.arange(size)
    else:
        pow2 = [1 << k for k in range(size.bit_length()) if 1 << k < size]
        flat = np.unique(np.concatenate([np.arange(256), np.arange(size - 64, size), pow2,
                                         np.linspace(0, size - 1, 512).astype(np.int64)]))
    return [tuple(int(x) for x in ix) for ix in zip(*np.unravel_index(flat, shape))]


def check_on_integers(shape: tuple, fn, table: np.ndarray, extra: tuple = ()) -> None:
    """Call `fn` on Python ints at sample elements and compare with `table` (outputs x shape),
    its tabulation on index variables. They differ where the map uses `==` / `!=` on an index
    (on expressions that is Python's structural equality, False, not a comparison) or `//` /
    `%` of a negative value (Python floors, tilecore's index arithmetic truncates): an
    IndexMapError naming the element. A map that does not run on ints is not checked."""
    from ..lower.indexing import evaluate

    for idx in _sample(shape):
        try:
            got = fn(*idx, *extra)
            got = list(got) if isinstance(got, (tuple, list)) else [got]
            vals = [g if type(g) is int else int(evaluate(as_expr(g), {})) for g in got]
        except Exception:  # noqa: BLE001 - the map runs on variables only (NotNumeric too)
            return
        want = [int(x) for x in table[(slice(None),) + idx]]
        if vals != want:
            raise IndexMapError(
                f"the map gives element {idx} {vals} on integers but {want} on index variables "
                f"(which the kernel uses): it compares an index with `==` or `!=`, which on index "
                f"expressions is Python's structural equality (False), not a comparison; or it "
                f"takes `//` or `%` of a negative value (tilecore truncates toward zero). Write "
                f"the test with `<`, `<=`, `>`, `>=` (`i % 2 == 0` as `i % 2 < 1`) and use "
                f"T.floordiv / T.floormod for floor semantics")


def _flat(outs: np.ndarray, out_shape: tuple) -> np.ndarray:
    flat = np.zeros(outs.shape[1:], dtype=np.int64)
    for k, s in enumerate(out_shape):
        flat = flat * s + outs[k]
    return flat


def _candidates(rows: int, cols: int, size: int):
    """Structural layouts of a `rows x cols` tile placed in `size` elements (none with padding:
    an index map's extent ends at its last element, a `Padded` tile's after the last row's pad)."""
    if size == rows * cols:
        yield RowMajor(rows, cols)
        top = max(1, size.bit_length())
        for base in range(0, 6):
            for bits in range(1, 5):
                for shift in range(bits, top):
                    try:
                        yield Swizzled(rows, cols, bits, base, shift)
                    except ValueError:
                        continue
        panel = 1
        while panel < cols:
            for base in range(0, 5):
                for bits in range(1, 4):
                    try:
                        yield Panelled(rows, cols, panel, bits, base, 3)
                    except ValueError:
                        continue
            panel *= 2


def structural(rows: int, cols: int, size: int, offsets: np.ndarray) -> SharedLayout | None:
    """The structural layout placing every element at `offsets` (rows x cols), or None."""
    # most candidates differ within a few rows: the rows 0, 1, 2, 4, ... and the last first
    few = np.unique([0, rows - 1] + [1 << k for k in range(rows.bit_length()) if 1 << k < rows])
    fr, fc = np.meshgrid(few, np.arange(cols, dtype=np.int64), indexing="ij")
    r, c = np.indices((rows, cols), dtype=np.int64)
    for lay in _candidates(rows, cols, size):
        if lay.size == size and np.array_equal(lay.offset_np(fr, fc), offsets[fr, fc]) \
                and np.array_equal(lay.offset_np(r, c), offsets):
            return lay
    return None


@dataclass(frozen=True, eq=False)
class IndexMapped(SharedLayout):
    """Element (i0, ..., in) of a shared buffer of `shape` lives at the row-major flattening
    over `out_shape` of `exprs` (in `params`, one variable per dimension); `offsets` is that
    number for every element of the `rows x cols` view (tabulated, checked injective)."""

    shape: tuple = ()
    out_shape: tuple = ()
    params: tuple = ()
    exprs: tuple = ()
    offsets: np.ndarray | None = None

    @property
    def size(self) -> int:
        return math.prod(self.out_shape)

    def __eq__(self, other) -> bool:
        return (type(other) is IndexMapped and (self.rows, self.cols, self.out_shape)
                == (other.rows, other.cols, other.out_shape)
                and bool(np.array_equal(self.offsets, other.offsets)))

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:  # the table is immutable: hash its bytes once
            h = hash((self.rows, self.cols, self.out_shape, self.offsets.tobytes()))
            object.__setattr__(self, "_hash", h)
        return h

    def offset_index(self, indices) -> Expr:
        """The flat offset of a logical index of the buffer (one expression per dimension)."""
        outs = [substitute(e, dict(zip(self.params, indices))) for e in self.exprs]
        flat: Expr = outs[0]
        for o, s in zip(outs[1:], self.out_shape[1:]):
            flat = flat * s + o
        return flat

    def offset(self, row: Expr, col: Expr) -> Expr:
        row = row if isinstance(row, Expr) else const(int(row))
        lead: list[Expr] = []
        for k, s in enumerate(reversed(self.shape[:-1])):  # the leading dims of the row, last first
            lead.append(row % s if k < len(self.shape) - 2 else row)
            row = row // s
        return self.offset_index(list(reversed(lead)) + [col if isinstance(col, Expr) else const(int(col))])

    def offset_np(self, row, col) -> np.ndarray:
        return self.offsets[np.asarray(row, dtype=np.int64), np.asarray(col, dtype=np.int64)]

    def contiguous(self, vec: int) -> bool:
        memo = self.__dict__.setdefault("_contiguous", {})  # lowering asks once per access
        if vec not in memo:
            if vec <= 1:
                memo[vec] = True
            elif self.cols % vec:
                memo[vec] = False
            else:
                o = self.offsets.reshape(self.rows, self.cols // vec, vec)
                memo[vec] = bool(np.all(o[..., 0] % vec == 0) and np.all(np.diff(o, axis=-1) == 1))
        return memo[vec]

    def describe(self) -> str:
        from .printer import print_node

        names = ", ".join(p.name for p in self.params)
        body = ", ".join(print_node(e) for e in self.exprs)
        return (f"index_map {self.rows}x{self.cols} -> {'x'.join(map(str, self.out_shape))} "
                f"lambda {names}: [{body}]")


def index_layout(shape: tuple, fn) -> SharedLayout:
    """The shared layout of a buffer of static `shape` whose element `idx` is stored at
    `fn(*idx)` (a list of indices into the physical extent, each from 0 to its maximum): a
    structural layout when one places every element the same way, else `IndexMapped`.
    Raises IndexMapError for a map that is not injective or reaches a negative index."""
    shape = tuple(int(s) for s in shape)
    params, exprs = build_map(shape, fn)
    outs = tabulate(shape, params, exprs)
    check_on_integers(shape, fn, outs)
    if outs.size and outs.min() < 0:
        where = np.unravel_index(int(np.argmin(outs.min(axis=0))), shape)
        raise IndexMapError(f"the map sends element {tuple(map(int, where))} to "
                            f"{[int(x) for x in outs[(slice(None),) + where]]}, a negative index")
    out_shape = tuple(int(outs[k].max()) + 1 for k in range(len(exprs)))
    flat = _flat(outs, out_shape)
    order = np.argsort(flat, axis=None, kind="stable")
    sorted_flat = flat.reshape(-1)[order]
    dup = np.nonzero(sorted_flat[1:] == sorted_flat[:-1])[0]
    if len(dup):
        a, b = (tuple(int(x) for x in np.unravel_index(int(order[k]), shape)) for k in (dup[0], dup[0] + 1))
        raise IndexMapError(f"the map is not injective: elements {a} and {b} both go to "
                            f"{[int(x) for x in outs[(slice(None),) + a]]} of the "
                            f"{'x'.join(map(str, out_shape))} storage")
    cols = shape[-1] if shape else 1
    rows = math.prod(shape[:-1])
    offsets = flat.reshape(rows, cols)
    offsets.setflags(write=False)
    size = math.prod(out_shape)
    found = structural(rows, cols, size, offsets)
    if found is not None:
        return found
    return IndexMapped(rows, cols, shape, out_shape, params, exprs, offsets)


# ----------------------------------------------------------------------------- fragments

# KernelLaunch annotation written by T.annotate_layout for `T.Fragment`s of fragment buffers
# (tilecore.language.layout_ops) and read by layout inference: ((buffer, FragmentMap, loc), ...).
FRAGMENT_ANNOTATION = "fragment_layout"


@dataclass(frozen=True, eq=False)
class FragmentMap:
    """A user's `T.Fragment` of a fragment of `shape`, tabulated: element `idx`, copy `rep` of
    `replicate`, is register `index[idx]` of thread `thread[rep][idx]` (int64 arrays). `text`
    spells the maps for printed IR (and the compile cache key, which hashes printed IR)."""

    shape: tuple
    thread: np.ndarray  # (replicate, *shape)
    index: np.ndarray  # shape
    text: str

    @property
    def replicate(self) -> int:
        """How many threads hold each element."""
        return int(self.thread.shape[0])

    @property
    def threads(self) -> int:
        """Threads the map uses (the largest thread it names, plus one)."""
        return int(self.thread.max()) + 1

    @property
    def nregs(self) -> int:
        """Registers per thread (the largest register it names, plus one)."""
        return int(self.index.max()) + 1


def fragment_map(shape: tuple, thread_fn, index_fn, replicate: int = 1) -> FragmentMap:
    """Tabulate `T.Fragment(shape, forward_thread_fn=thread_fn, forward_index_fn=index_fn,
    replicate=...)` on every element (the thread map takes a last `rep` argument when
    replicate > 1, as in TileLang; a register map of several indices is flattened row-major).
    Raises IndexMapError for a negative thread or register, or
    two elements (or copies) in one register of one thread."""
    shape = tuple(int(s) for s in shape)
    if not isinstance(replicate, int) or replicate < 1:
        raise IndexMapError(f"replicate must be a positive int, got {replicate!r}")
    if thread_fn is None or index_fn is None:
        raise IndexMapError("a T.Fragment layout needs both its thread map and its register map")
    rep = Var("rep")
    tfn = thread_fn if replicate == 1 else (lambda *i: thread_fn(*i, rep))
    tparams, (texpr, *more_t) = build_map(shape, tfn)
    iparams, iexprs = build_map(shape, index_fn)
    if more_t:
        raise IndexMapError("a T.Fragment's thread map returns one thread index")
    grids = np.indices(shape, dtype=np.int64)
    threads = []
    for r in range(replicate):
        env = {id(p): g for p, g in zip(tparams, grids)} | {id(rep): np.int64(r)}
        threads.append(_evaluated(texpr, env, shape))
    thread = np.stack(threads)
    ienv = {id(p): g for p, g in zip(iparams, grids)}
    parts = np.stack([_evaluated(e, ienv, shape) for e in iexprs])
    for r in range(replicate):
        check_on_integers(shape, thread_fn, thread[r:r + 1], (r,) if replicate > 1 else ())
    check_on_integers(shape, index_fn, parts)
    for what, t in (("thread", thread), ("register", parts)):
        if t.size and t.min() < 0:
            where = np.unravel_index(int(np.argmin(t.reshape(-1, *shape).min(axis=0))), shape)
            raise IndexMapError(f"the map gives element {tuple(map(int, where))} a negative {what}")
    # a register index of several dimensions is flattened row-major over their extents
    index = _flat(parts, tuple(int(p.max()) + 1 for p in parts))
    key = thread * (int(index.max()) + 1) + index[None]
    flat = key.reshape(-1)
    order = np.argsort(flat, kind="stable")
    dup = np.nonzero(flat[order][1:] == flat[order][:-1])[0]
    if len(dup):
        a, b = (np.unravel_index(int(order[k]), key.shape) for k in (dup[0], dup[0] + 1))
        ea, eb = tuple(int(x) for x in a[1:]), tuple(int(x) for x in b[1:])
        t, i = int(thread[a]), int(index[a[1:]])
        raise IndexMapError(f"elements {ea} and {eb} are both register {i} of thread {t}")
    from .printer import print_node

    names = ", ".join(p.name for p in iparams)
    tnames = ", ".join([p.name for p in tparams] + (["rep"] if replicate > 1 else []))
    text = (f"T.Fragment({shape}, thread=lambda {tnames}: {print_node(texpr)}, "
            f"index=lambda {names}: [{', '.join(print_node(e) for e in iexprs)}], "
            f"replicate={replicate})")
    for arr in (thread, index):
        arr.setflags(write=False)
    return FragmentMap(shape, thread, index, text)


def _evaluated(e: Expr, env: dict, shape: tuple) -> np.ndarray:
    from ..lower.indexing import NotNumeric, evaluate

    try:
        return np.array(np.broadcast_to(np.asarray(evaluate(e, env), dtype=np.int64), shape))
    except NotNumeric as err:
        raise IndexMapError(f"the map uses {err}, which is not integer index arithmetic of the "
                            f"indices") from None
