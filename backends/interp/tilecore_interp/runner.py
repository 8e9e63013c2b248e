"""The interpreter: compiles tile IR into closures once, then runs one block at a time with
every tile a whole NumPy array (vectorized over T.Parallel iterations)."""

from __future__ import annotations

import contextlib
import itertools
import os
import random

import numpy as np

from tilecore.errors import TileRuntimeError
from tilecore.ir import ranges
from tilecore.ir.buffer import Region
from tilecore.ir.expr import Load, const_int
from tilecore.ir.grid_sync import phases as grid_phases
from tilecore.ir.loops import While
from tilecore.ir.stmt import (
    BIT_REDUCE_KINDS,
    AtomicAdd,
    AtomicAddRegion,
    Copy,
    CumSum,
    Fill,
    For,
    Gemm,
    IfThenElse,
    KernelLaunch,
    LetStmt,
    Reduce,
    SeqStmt,
    Store,
)
from tilecore.ir.visit import walk
from tilecore.semantics import (
    accumulator_dtype,
    cast_value,
    compute_np,
    gemm_accumulator,
    poison_value,
    wrap_int,
)

from . import aliases, blas, debug, pointers, roles, shadow
from .cse import Cse
from .exprs import Slots, check_bounds, compile_expr, proven_shape
from .races import check_unique_writes

_OPTIONS = {"seed": None, "poison": "nan"}


@contextlib.contextmanager
def options(seed: int | None = None, poison: str = "nan"):
    """Run kernels with blocks in a seeded random order and/or a non-NaN poison pattern.

    Conformance uses this to show a program's result does not depend on block order or on
    uninitialized memory. Also settable by env TILECORE_INTERP_SEED / TILECORE_INTERP_POISON.
    """
    old = dict(_OPTIONS)
    _OPTIONS.update(seed=seed, poison=poison)
    try:
        yield
    finally:
        _OPTIONS.update(old)


def _current_options():
    seed = _OPTIONS["seed"]
    if seed is None and os.environ.get("TILECORE_INTERP_SEED"):
        seed = int(os.environ["TILECORE_INTERP_SEED"])
    poison = os.environ.get("TILECORE_INTERP_POISON", _OPTIONS["poison"])
    return seed, poison


class InterpArtifact:
    """The `tile_build` result for target interp: source is the tile program itself."""

    array_api = "numpy"

    def __init__(self, module):
        self.func = module.func
        self.source = self.func.script()
        self.program = Program(self.func)

    def run(self, args, dyn) -> None:
        """Execute on NumPy arrays (parameter order); `dyn` binds symbolic dimensions."""
        self.program.run(args, dyn)


class Program:
    """Closure-compiled form of one PrimFunc."""

    def __init__(self, func):
        self.func = func
        self.slots = Slots()
        self.param_slots = [self.slots(p) for p in func.params]
        self.dyn_slots = [(v.name, self.slots(v)) for v in func.dyn_vars]
        shadow.register(func, self.slots)
        aliases.untrack(func, self.slots)  # T.view(..., dtype=): shared or dropped shadows
        self.body = self.stmt(func.body, vec=False)

    def run(self, args, dyn):
        env: list = [None] * len(self.slots)
        for s, a in zip(self.param_slots, args):
            env[s] = a
        for name, s in self.dyn_slots:
            env[s] = int(dyn[name])
        with np.errstate(all="ignore"), blas.one_thread():  # tile-sized matmuls: blas.py
            self.body(env, None)

    # ------------------------------------------------------------------ statements
    def stmt(self, s, vec: bool):
        m = getattr(self, "s_" + type(s).__name__, None)
        if m is None and isinstance(s, roles.STMTS):  # warp-specialized tile programs (roles.py)
            return roles.compile_stmt(self, s, vec)
        if m is None:
            raise TypeError(f"interp cannot run {type(s).__name__}")
        return m(s, vec)

    def s_SeqStmt(self, s: SeqStmt, vec):
        fns = [self.stmt(x, vec) for x in s.stmts]

        def seq(env, mask):
            for f in fns:
                f(env, mask)

        return seq

    def s_LetStmt(self, s: LetStmt, vec):
        slot, f = self.slots(s.var), compile_expr(s.value, self.slots, s.loc)
        if s.var.dtype.is_int:
            self.slots.bind_range(s.var, s.value)

        def let(env, mask):
            env[slot] = f(env, mask)

        return let

    def s_KernelLaunch(self, s: KernelLaunch, vec):
        grid = [compile_expr(g, self.slots, s.loc) for g in s.grid]
        bslots = [self.slots(v) for v in s.block_vars]
        for v, g in zip(s.block_vars, s.grid):
            n = const_int(g)
            if n is not None and n >= 1:
                self.slots.bind_range(v, (0, n - 1))
        allocs = [(self.slots(b), b) for b in s.allocs]
        shadows = [(self.slots.shadow[id(b)], b) for b in s.allocs if id(b) in self.slots.shadow]
        # T.sync_grid splits the body into phases, each run by every block before the next
        # (no block state crosses a sync: tilecore.ir.grid_sync)
        bodies = [self.stmt(SeqStmt(tuple(p), s.loc), vec=False) for p in grid_phases(s.body)]

        def launch(env, mask):
            seed, poison = _current_options()
            extents = [int(g(env, None)) for g in grid]
            bufs = []
            for slot, b in allocs:
                arr = np.empty(b.static_shape, dtype=b.dtype.np)
                bufs.append((slot, arr, poison_value(b.dtype, poison)))
            order = list(itertools.product(*[range(n) for n in reversed(extents)]))
            if seed is not None:
                random.Random(seed).shuffle(order)
            for body in bodies:
                for blk in order:
                    for slot, v in zip(bslots, reversed(blk)):
                        env[slot] = v
                    for slot, arr, pv in bufs:
                        arr.fill(pv)
                        env[slot] = arr
                    for slot, b in shadows:
                        env[slot] = shadow.fresh(b)
                    body(env, None)

        return launch

    def s_For(self, s: For, vec):
        if s.kind == "parallel":
            return self._parallel(s, vec)
        slot = self.slots(s.var)
        fs, fe = compile_expr(s.start, self.slots, s.loc), compile_expr(s.stop, self.slots, s.loc)
        lo, hi = const_int(s.start), const_int(s.stop)
        if lo is not None and hi is not None and hi > lo and s.step > 0 and s.var.dtype.is_int:
            self.slots.bind_range(s.var, (lo, hi - 1))  # range(lo, hi, step)'s values
        body = self.stmt(s.body, vec)
        step = s.step

        def loop(env, mask):
            a, b = fs(env, mask), fe(env, mask)
            if np.ndim(a) == 0 and np.ndim(b) == 0:
                for v in range(int(a), int(b), step):
                    env[slot] = v
                    body(env, mask)
                return
            # bounds that vary across T.Parallel lanes: run the union, mask per lane
            lo, hi = int(np.min(a)), int(np.max(b))
            for v in range(lo, hi, step):
                lo_a, hi_b = np.asarray(a), np.asarray(b)
                m = (lo_a <= v) & (v < hi_b) if step > 0 else (v <= lo_a) & (v > hi_b)
                if mask is not None:
                    m = m & mask
                if m.any():
                    env[slot] = v
                    body(env, m)

        return loop

    def s_While(self, s: While, vec):
        fc = compile_expr(s.cond, self.slots, s.loc)
        body = self.stmt(s.body, vec)

        def loop(env, mask):
            while True:
                c = fc(env, mask)
                if np.ndim(c) == 0:
                    if not c:
                        return
                    body(env, mask)
                    continue
                # a condition that varies across T.Parallel lanes: each lane leaves on its own
                m = c if mask is None else c & mask
                if not m.any():
                    return
                body(env, m)

        return loop

    def _parallel(self, s: For, vec):
        # Each parallel loop of a nest owns one array axis; the outermost one fixes the rank.
        if not vec:
            nest = [n for n in walk(s) if isinstance(n, For) and n.kind == "parallel"]
            self._axes = {id(n): i for i, n in enumerate(nest)}
            self._rank = len(nest)
            from tilecore.ir.expr import const_int as _ci

            for n in nest:
                if _ci(n.start) is not None:
                    self.slots.parallel[id(n.var)] = (self._axes[id(n)], _ci(n.stop) - _ci(n.start),
                                                      len(nest))
        axis, rank = self._axes[id(s)], self._rank
        slot = self.slots(s.var)
        fs = compile_expr(s.start, self.slots, s.loc)
        stop = s.stop
        from tilecore.ir.expr import const_int

        n = const_int(stop)
        shape = [1] * rank
        shape[axis] = n
        base = np.arange(n, dtype=np.int64).reshape(shape)
        start = ranges.interval(s.start, self.slots.ranges, self.slots.intervals)
        if start is not None and s.var.dtype.is_int:  # values start + [0, n)
            self.slots.bind_range(s.var, (start[0], start[1] + n - 1))
        body = self.stmt(s.body, vec=True)

        def par(env, mask):
            a = fs(env, mask)
            if np.ndim(a) == 0:
                env[slot] = base + int(a) if a else base
            else:
                env[slot] = base + a
            body(env, mask)

        return par

    def s_IfThenElse(self, s: IfThenElse, vec):
        fc = compile_expr(s.cond, self.slots, s.loc)
        ft = self.stmt(s.then_body, vec)
        fe = self.stmt(s.else_body, vec) if s.else_body is not None else None

        def branch(env, mask):
            c = fc(env, mask)
            if np.ndim(c) == 0:
                if c:
                    ft(env, mask)
                elif fe is not None:
                    fe(env, mask)
                return
            mt = c if mask is None else c & mask
            if mt.any():
                ft(env, mt)
            if fe is not None:
                mf = ~c if mask is None else ~c & mask
                if mf.any():
                    fe(env, mf)

        return branch

    def s_PointerTensor(self, s, vec):  # T.make_tensor (tilecore.ir.pointers; pointers.py here)
        return pointers.compile_bind(s, self.slots, compile_expr(s.address, self.slots, s.loc))

    def s_BufferAlias(self, s, vec):  # T.view(..., dtype=) (tilecore.ir.aliases; aliases.py here)
        return aliases.compile_bind(s, self.slots)

    def s_Store(self, s: Store, vec):
        return self._elementwise(s, accumulate=False, vec=vec)

    def s_Print(self, s, vec):  # T.print (tilecore_interp.debug)
        return debug.compile_print(s, self.slots)

    def s_DeviceAssert(self, s, vec):  # T.device_assert
        return debug.compile_assert(s, self.slots)

    def s_AtomicAdd(self, s: AtomicAdd, vec):
        # T.atomic_max / atomic_min combine like a reducer's max / min (exact, NaN propagating)
        add = self._elementwise(s, accumulate=True, op=None if s.op == "add" else s.op)
        if s.prev is None:
            return add
        # return_prev in a block-level (tile-roles) kernel: the element's value before the add
        # lands in the hidden variable the program reads (one addition per block: exact)
        old_of = compile_expr(Load(s.buffer, s.indices), self.slots, s.loc)
        pslot = self.slots(s.prev)
        psh = self.slots.shadow.get(id(s.prev))

        def atomic_prev(env, mask):
            old = np.asarray(old_of(env, mask)).copy()
            add(env, mask)
            env[pslot][...] = old.astype(env[pslot].dtype)
            if psh is not None:  # the variable is written (the uninitialized-read check)
                shadow.mark_box(env[psh], (slice(0, 1),))

        return atomic_prev

    def s_ReducerUpdate(self, s, vec):  # T.alloc_reducer updates (tilecore.ir.reducers)
        return self._elementwise(s, accumulate=True, op=s.op)

    def s_FinalizeReducer(self, s, vec):  # every update has combined already: nothing to do
        return lambda env, mask: None

    def _elementwise(self, s, accumulate: bool, vec: bool = False, op: str | None = None):
        """A store, an atomic addition (`accumulate`), or a reducer update (`op`: sum/max/min;
        its element must have been initialized when uninitialized reads are tracked)."""
        buf, loc = s.buffer, s.loc
        bslot = self.slots(buf)
        sh = self.slots.shadow.get(id(buf))
        cse = self.slots.cse = Cse((*s.indices, s.value))  # indices and value share subexpressions
        try:
            idx_fns = [compile_expr(i, self.slots, loc) for i in s.indices]
            vf = compile_expr(s.value, self.slots, loc)
        finally:
            self.slots.cse = None
        d = buf.dtype

        def to_storage(v):
            return wrap_int(v, d) if d.is_int else v

        inside = proven_shape(buf, s.indices, self.slots)  # no bounds check needed (exprs.py)
        fast = self.slots.axes_of(s.indices) if not accumulate else None
        if fast is not None and fast[0] == list(range(fast[2])):
            exts = fast[1]

            def fast_store(env, mask):
                arr = env[bslot]
                sl = []
                for f, n, size in zip(idx_fns, exts, arr.shape):
                    lo = int(f(env, None).flat[0])
                    if lo < 0 or lo + n > size:
                        return store(env, mask)  # the general path reports the fault
                    sl.append(slice(lo, lo + n))
                val = vf(env, mask)
                view = arr[tuple(sl)]
                if mask is None:
                    view[...] = to_storage(val)
                else:
                    sel = np.broadcast_to(mask, view.shape)
                    view[sel] = to_storage(np.broadcast_to(val, view.shape))[sel]
                if sh is not None:
                    shadow.mark_box(env[sh], tuple(sl), mask)

        else:
            fast_store = None

        def store(env, mask):
            arr = env[bslot]
            raw = [f(env, mask) for f in idx_fns]
            val = vf(env, mask)
            if mask is None and np.ndim(val) == 0 and all(np.ndim(i) == 0 for i in raw):
                idx = tuple(check_bounds(arr, buf, raw, None, loc, "write"))
                if accumulate:
                    if op is not None and sh is not None and not env[sh][idx]:
                        _uninit_accumulate(buf, idx, loc)
                    cur = np.asarray(arr[idx]).astype(compute_np(d))
                    val = cast_value(_COMBINE[op or "sum"](cur, val), d, d)
                arr[idx] = to_storage(val)
                if sh is not None:
                    env[sh][idx] = True
                return
            shapes = [np.shape(i) for i in raw] + [np.shape(val)]
            if mask is not None:
                shapes.append(np.shape(mask))
            shape = np.broadcast_shapes(*shapes)
            idx = raw if arr.shape == inside else check_bounds(arr, buf, raw, mask, loc, "write")
            idx = [np.broadcast_to(i, shape) for i in idx]
            v = np.broadcast_to(val, shape)
            if mask is not None:
                sel = np.broadcast_to(mask, shape)
                idx = [i[sel] for i in idx]
                v = v[sel]
            if accumulate:
                if op is not None and sh is not None and not env[sh][tuple(idx)].all():
                    _uninit_accumulate(buf, tuple(idx), loc)
                if op in (None, "sum"):
                    _atomic_add_many(arr, tuple(idx), v, d)
                else:
                    _extremum_many(arr, tuple(idx), v, d, op)
            else:
                if vec:
                    check_unique_writes(buf, tuple(idx), to_storage(v), loc)
                arr[tuple(idx)] = to_storage(v)
            if sh is not None:
                env[sh][tuple(idx)] = True

        return cse.each_run(fast_store or store)

    # ------------------------------------------------------------------ tile operations
    def s_Copy(self, s: Copy, vec):
        read = self._region_reader(s.src, s.loc)
        write = self._region_writer(s.dst, s.loc)
        shape = s.dst.extents

        def copy(env, mask):
            write(env, read(env).reshape(shape))

        return copy

    def s_Fill(self, s: Fill, vec):
        write = self._region_writer(s.dst, s.loc)
        vf = compile_expr(s.value, self.slots, s.loc)
        shape = s.dst.extents
        d = s.dst.buffer.dtype

        def fill(env, mask):
            v = vf(env, None)
            write(env, np.full(shape, wrap_int(v, d) if d.is_int else v, dtype=compute_np(d)))

        return fill

    def s_Gemm(self, s: Gemm, vec):
        ra, rb = self._region_reader(s.a, s.loc), self._region_reader(s.b, s.loc)
        rc, wc = self._region_reader(s.c, s.loc), self._region_writer(s.c, s.loc)
        cd = s.c.buffer.dtype
        m, n, k = s.mnk
        acc = gemm_accumulator(cd)
        exact_int = acc.is_int
        cnp = compute_np(acc)

        def gemm(env, mask):
            # operands already in the compute dtype (float32 fragments) are read in place
            a = ra(env).astype(cnp, copy=False).reshape((k, m) if s.transpose_a else (m, k))
            b = rb(env).astype(cnp, copy=False).reshape((n, k) if s.transpose_b else (k, n))
            if s.transpose_a:
                a = a.T
            if s.transpose_b:
                b = b.T
            prod = a @ b
            if not s.clear_accum:
                prod = rc(env).reshape(m, n).astype(prod.dtype, copy=False) + prod
            if exact_int:
                prod = wrap_int(prod, cd)
            wc(env, prod.reshape(s.c.extents))

        return gemm

    def s_Reduce(self, s: Reduce, vec):
        src, dst = self.slots(s.src), self.slots(s.dst)
        d_src, d_dst = s.src.dtype, s.dst.dtype
        kind, dim, clear = s.kind, s.dim, s.clear
        shape = s.dst.static_shape
        ssh, dsh, loc = self.slots.shadow.get(id(s.src)), self.slots.shadow.get(id(s.dst)), s.loc

        acc = accumulator_dtype(d_src)

        def reduce(env, mask):
            if ssh is not None:
                shadow.check_all(env[ssh], s.src, loc)
            if dsh is not None:
                if not clear:
                    shadow.check_all(env[dsh], s.dst, loc)
                env[dsh][...] = True
            x = env[src].astype(compute_np(acc))
            if kind in ("abssum", "absmax"):
                x = np.abs(x)
            if kind in BIT_REDUCE_KINDS:  # integer / bool tiles, accumulated in int64: exact
                r = _COMBINE[kind].reduce(x, axis=dim)
            elif kind in ("sum", "abssum"):
                r = np.sum(x, axis=dim, dtype=x.dtype)
            elif kind in ("max", "absmax"):
                r = np.max(x, axis=dim)
            else:
                r = np.min(x, axis=dim)
            # a full reduction of a 1-D tile gives a NumPy scalar, which cast_value may turn into
            # a Python int: make it an array again before reshaping
            r = np.asarray(cast_value(r, acc, d_dst)).reshape(shape)
            if not clear:
                cur = env[dst].astype(compute_np(d_dst))
                if kind in BIT_REDUCE_KINDS:
                    r = _COMBINE[kind](cur, r)
                elif kind in ("sum", "abssum"):
                    r = cur + r
                elif kind in ("max", "absmax"):
                    r = np.maximum(cur, r)
                else:
                    r = np.minimum(cur, r)
            env[dst][...] = wrap_int(r, d_dst) if d_dst.is_int else r

        return reduce

    def s_CumSum(self, s: CumSum, vec):
        src, dst = self.slots(s.src), self.slots(s.dst)
        d_src, d_dst, dim = s.src.dtype, s.dst.dtype, s.dim

        acc = accumulator_dtype(d_src)
        ssh, dsh = self.slots.shadow.get(id(s.src)), self.slots.shadow.get(id(s.dst))

        def cumsum(env, mask):
            if ssh is not None:
                shadow.check_all(env[ssh], s.src, s.loc)
            if dsh is not None:
                env[dsh][...] = True
            x = env[src].astype(compute_np(acc))
            if s.reverse:
                x = np.flip(x, axis=dim)
            r = np.cumsum(x, axis=dim, dtype=x.dtype)
            if s.reverse:
                r = np.flip(r, axis=dim)
            r = cast_value(r, acc, d_dst)
            env[dst][...] = wrap_int(r, d_dst) if d_dst.is_int else r

        return cumsum

    def s_AtomicAddRegion(self, s: AtomicAddRegion, vec):
        read = self._region_reader(s.src, s.loc)
        cur = self._region_reader(s.dst, s.loc)
        write = self._region_writer(s.dst, s.loc)
        d = s.dst.buffer.dtype

        def atomic(env, mask):
            v = read(env).astype(compute_np(d)).reshape(s.dst.extents)
            c = cur(env).astype(compute_np(d)).reshape(s.dst.extents)
            write(env, cast_value(c + v, d, d))

        return atomic

    # ------------------------------------------------------------------ regions
    def _region_bounds(self, r: Region, loc):
        starts = [compile_expr(x, self.slots, loc) for x in r.starts]
        buf = r.buffer

        def bounds(env):
            arr = env[self.slots.index[id(buf)]]
            out = []
            for f, n, size in zip(starts, r.extents, arr.shape):
                lo = int(f(env, None))
                out.append((lo, lo + n, size))
            return arr, out

        return bounds

    def _region_reader(self, r: Region, loc):
        """A function env -> array of the region's extents (zeros outside a global tensor)."""
        bounds = self._region_bounds(r, loc)
        buf = r.buffer
        self.slots(buf)
        sh = self.slots.shadow.get(id(buf))

        def read(env):
            arr, bs = bounds(env)
            if all(0 <= lo and hi <= size for lo, hi, size in bs):
                box = tuple(slice(lo, hi) for lo, hi, _ in bs)
                if sh is not None:
                    shadow.check_box(env[sh], box, buf, loc)
                return arr[box]
            if buf.scope != "global":
                raise _region_oob(buf, bs, loc, "read")
            out = np.zeros(r.extents, dtype=arr.dtype)
            src = tuple(slice(max(lo, 0), min(hi, size)) for lo, hi, size in bs)
            dst = tuple(slice(max(lo, 0) - lo, min(hi, size) - lo) for lo, hi, size in bs)
            if all(s.start < s.stop for s in src):
                out[dst] = arr[src]
            return out

        return read

    def _region_writer(self, r: Region, loc):
        """A function (env, data) writing data (region-shaped) into the region; writes outside a
        global tensor are dropped."""
        bounds = self._region_bounds(r, loc)
        buf = r.buffer
        self.slots(buf)
        d = buf.dtype
        sh = self.slots.shadow.get(id(buf))

        def write(env, data):
            arr, bs = bounds(env)
            if d.is_int and data.dtype.kind == "f":
                data = cast_value(data, _float_dtype(data), d)
            if all(0 <= lo and hi <= size for lo, hi, size in bs):
                arr[tuple(slice(lo, hi) for lo, hi, _ in bs)] = data
                if sh is not None:
                    env[sh][tuple(slice(lo, hi) for lo, hi, _ in bs)] = True
                return
            if buf.scope != "global":
                raise _region_oob(buf, bs, loc, "write")
            dst = tuple(slice(max(lo, 0), min(hi, size)) for lo, hi, size in bs)
            src = tuple(slice(max(lo, 0) - lo, min(hi, size) - lo) for lo, hi, size in bs)
            if all(s.start < s.stop for s in dst):
                arr[dst] = data[src]

        return write


def _float_dtype(a: np.ndarray):
    from tilecore import dtypes

    return dtypes.from_numpy(a.dtype)


def _region_oob(buf, bs, loc, what):
    rng = ", ".join(f"{lo}:{hi}" for lo, hi, _ in bs)
    return TileRuntimeError(
        f"tile {what} [{rng}] lies outside {buf.scope} buffer {buf.name}{tuple(buf.shape)}", loc,
        hint="tile regions of shared/fragment buffers must stay inside the buffer",
    )


# reducer updates (sum / max / min) and the bit reductions (tilecore.ir.stmt.BIT_REDUCE_KINDS)
_COMBINE = {"sum": np.add, "max": np.maximum, "min": np.minimum, "bitand": np.bitwise_and,
            "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}


def _uninit_accumulate(buf, idx, loc):
    """A reducer update of an element nothing initialized (TileLang asks for T.fill first)."""
    from tilecore.errors import TileRuntimeError

    raise TileRuntimeError(f"{buf.name} is accumulated into before it was initialized (at "
                           f"{idx})", loc, hint=f"T.fill / T.clear {buf.name} first")


def _extremum_many(arr, idx, v, d, op):
    """`arr[idx] = max/min(arr[idx], v)` over possibly repeated indices; exact in every dtype
    (no rounding), NaN propagating like T.max / T.min on floats."""
    tmp = arr.astype(compute_np(d))
    _COMBINE[op].at(tmp, idx, np.asarray(v).astype(compute_np(d)))
    arr[...] = wrap_int(tmp, d) if d.is_int else tmp.astype(arr.dtype)


def _atomic_add_many(arr, idx, v, d):
    """Sequential accumulation of possibly repeated indices (what atomics guarantee)."""
    if d.is_narrow_float:
        flat = [tuple(int(x[k]) for x in idx) for k in range(len(v))]
        for k, ix in enumerate(flat):
            arr[ix] = np.float32(arr[ix]) + np.float32(v[k])
        return
    if d.is_int:
        tmp = arr.astype(np.int64)
        np.add.at(tmp, idx, np.asarray(v, dtype=np.int64))
        arr[...] = wrap_int(tmp, d)
        return
    np.add.at(arr, idx, np.asarray(v, dtype=arr.dtype))
