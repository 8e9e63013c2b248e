"""Tile operations as loops (and BLAS for float gemm), with the oracle's semantics.

Region operations (copy, fill, tile atomic add) run an unchecked loop nest when every region is
in bounds (proven by range analysis, or tested once per op at run time) and a masked loop nest
otherwise: global elements outside the tensor read as 0 and writes to them are dropped; a
shared/fragment region outside its buffer is a fault, as in `interp`.
"""

from __future__ import annotations

from tilecore import dtypes as dt
from tilecore.ir.buffer import Buffer, Region
from tilecore.ir.expr import Const, Var
from tilecore.ir.stmt import AtomicAddRegion, Copy, CumSum, Fill, Gemm, Reduce

from .emit import Lines
from .exprs import const_code, convert, int_arg, round_to, storage_np, to_compute, to_storage, unsigned

TILE_OPS = (Copy, Fill, AtomicAddRegion, Gemm, Reduce, CumSum)


def emit(cg, s) -> None:
    """Emit tile operation `s` into `cg` (a codegen.Codegen)."""
    if isinstance(s, Copy):
        _copy(cg, s)
    elif isinstance(s, Fill):
        _fill(cg, s)
    elif isinstance(s, AtomicAddRegion):
        _atomic_region(cg, s)
    elif isinstance(s, Gemm):
        _gemm(cg, s)
    elif isinstance(s, Reduce):
        _reduce(cg, s)
    else:
        _cumsum(cg, s)


# ---------------------------------------------------------------------- region loops


class _R:
    """One region of a region op: its buffer name, start codes and per-element index codes."""

    def __init__(self, cg, r: Region, loop_vars: list[str]):
        self.r = r
        self.name = cg.names.of(r.buffer)
        self.starts = []
        for e in r.starts:
            if isinstance(e, (Const, Var)):
                self.starts.append(cg.x.gen(e))
            else:
                t = cg.names.fresh("_st")
                cg.lines.add(f"{t} = {cg.x.gen(e)}")
                self.starts.append(t)
        it = iter(loop_vars)
        self.idx = [s if n == 1 else (next(it) if s == "(0)" else f"{s} + {next(it)}")
                    for s, n in zip(self.starts, r.extents)]
        self.loop_vars = loop_vars  # range(n) counters: never negative (exprs.unsigned)
        self.region_ok = cg.x.in_bounds(r.buffer, r.starts, self.starts, r.extents)
        self.is_global = r.buffer.scope == "global"

    @property
    def ref(self) -> str:
        return f"{self.name}[{', '.join(unsigned(c, self.loop_vars) for c in self.idx)}]"

    def elem_ok(self, cg) -> str:
        return " and ".join(f"(0 <= {c} < {cg.x.dim(self.r.buffer, d)})" for d, c in enumerate(self.idx))


def _region_op(cg, regions: list[Region], elem, masked_call=None, fast_call=None) -> None:
    """Loop over the common squeezed shape; `elem(rs, masked)` emits one element's work.
    `masked_call(rs, shape)` may return one line doing the whole masked path instead, and
    `fast_call(rs, shape)` one line doing the unmasked path (a runtime helper: see `_helper_ok`)."""
    shape = regions[0].squeezed_shape
    loop_vars = [cg.names.fresh(f"_t{i}") for i in range(len(shape))]
    rs = [_R(cg, r, loop_vars) for r in regions]
    lines = cg.lines
    call = masked_call(rs, shape) if masked_call is not None else None
    fast = fast_call(rs, shape) if fast_call is not None else None

    def loops(masked: bool):
        if fast is not None and not masked:
            lines.add(fast)
            return
        for v, n in zip(loop_vars, shape):
            lines.add(f"for {v} in range({n}):")
            lines.depth += 1
        elem(rs, masked)
        lines.depth -= len(shape)

    local = [r for r in rs if not r.is_global and r.region_ok]
    glob = [r for r in rs if r.is_global and r.region_ok]
    if local:
        lines.add(f"if {' and '.join(r.region_ok for r in local)}:")
        lines.depth += 1
    if glob:
        lines.add(f"if {' and '.join(r.region_ok for r in glob)}:")
        lines.body(lambda: loops(False))
        lines.add("else:")
        if call is not None:
            with lines.indent():
                lines.add(call)
        else:
            lines.body(lambda: loops(True))
    else:
        loops(False)
    if local:
        lines.depth -= 1
        lines.add("else:")
        with lines.indent():
            r = local[0]
            lines.add(cg.x.fault_call("region", r.r.buffer, r.starts))


def _copy(cg, s: Copy) -> None:
    sd, dd = s.src.buffer.dtype, s.dst.buffer.dtype
    if s.src.buffer is s.dst.buffer:
        # regions of one buffer may overlap: read all of the source first, as interp does
        tmp = Buffer("_overlap", s.src.extents, sd, "local")
        cg.scratch.append(f"{cg.names.of(tmp)} = np.empty({s.src.extents!r}, np.{storage_np(sd).name})")
        _copy(cg, Copy(s.src, Region.full(tmp), s.loc))
        _copy(cg, Copy(Region.full(tmp), s.dst, s.loc))
        return

    def elem(rs, masked):
        src, dst = rs
        if sd == dd:
            value = src.ref
            zero = f"np.{storage_np(sd).name}(0)"
        else:
            value = to_storage(convert(to_compute(src.ref, sd), sd, dd), dd)
            zero = to_storage(const_code(0, dd), dd)
        if masked and src.is_global:
            value = f"({value} if {src.elem_ok(cg)} else {zero})"
        if masked and dst.is_global:
            cg.lines.add(f"if {dst.elem_ok(cg)}:")
            with cg.lines.indent():
                cg.lines.add(f"{dst.ref} = {value}")
        else:
            cg.lines.add(f"{dst.ref} = {value}")

    if sd == dd:
        _region_op(cg, [s.src, s.dst], elem, _masked_copy_call, _copy_call)
    else:
        _region_op(cg, [s.src, s.dst], elem)


def _helper_ok(rs, shape) -> bool:
    """Whether the runtime's in-bounds helpers (`copy{1,2}`, `fill{1,2}`) fit: regions of rank 1
    or 2 with no squeezed dimension. They exist because a call costs numba's compile of a
    kernel about a fifth of what the loop nest costs (runtime.py, "in-bounds tile copies")."""
    return len(shape) in (1, 2) and all(tuple(r.r.extents) == tuple(shape) for r in rs)


def _copy_call(rs, shape) -> str | None:
    """The `copy{1,2}` call doing a same-dtype copy's unmasked path, or None (loops instead)."""
    if not _helper_ok(rs, shape):
        return None
    src, dst = rs
    return (f"copy{len(shape)}({dst.name}, {_ints(dst.starts)}, {src.name}, {_ints(src.starts)}, "
            f"{_ints(shape)})")


def _ints(codes) -> str:
    """Int arguments of a runtime helper call, none a literal (`exprs.int_arg`)."""
    return ", ".join(int_arg(c) for c in codes)


def _masked_copy_call(rs, shape) -> str | None:
    """The runtime call (`load_masked{1,2}` / `store_masked{1,2}`) doing a same-dtype copy's
    masked path between a global and a local region of the loop's rank, or None (then the
    masked loops are generated)."""
    src, dst = rs
    if src.is_global == dst.is_global or len(shape) not in (1, 2):
        return None
    if any(tuple(r.r.extents) != tuple(shape) for r in rs):  # a squeezed dimension
        return None
    starts = ", ".join(f"np.int64({c})" for c in dst.starts)
    sstarts = ", ".join(f"np.int64({c})" for c in src.starts)
    sizes = _ints(shape)
    if src.is_global:
        zero = f"np.{storage_np(src.r.buffer.dtype).name}(0)"
        return f"load_masked{len(shape)}({dst.name}, {starts}, {src.name}, {sstarts}, {sizes}, {zero})"
    return f"store_masked{len(shape)}({dst.name}, {starts}, {src.name}, {sstarts}, {sizes})"


def _fill(cg, s: Fill) -> None:
    d = s.dst.buffer.dtype
    v = cg.names.fresh("_fill")
    cg.lines.add(f"{v} = {to_storage(convert(cg.x.gen(s.value), s.value.dtype, d), d)}")

    def elem(rs, masked):
        (dst,) = rs
        if masked and dst.is_global:
            cg.lines.add(f"if {dst.elem_ok(cg)}:")
            with cg.lines.indent():
                cg.lines.add(f"{dst.ref} = {v}")
        else:
            cg.lines.add(f"{dst.ref} = {v}")

    def fill_call(rs, shape):
        if not _helper_ok(rs, shape):
            return None
        (dst,) = rs
        return f"fill{len(shape)}({dst.name}, {_ints(dst.starts)}, {_ints(shape)}, {v})"

    _region_op(cg, [s.dst], elem, fast_call=fill_call)


def _compute_as(code: str, src, dst) -> str:
    """A compute-form value of `src` brought to `dst`'s compute type without rounding to `dst`
    (the oracle's `astype(compute_np(dst))`)."""
    if dst.is_int:
        return f"f2i({code})" if src.is_float else f"np.int64({code})"
    if dst.is_bool:
        return f"({code} != 0)"
    return f"np.float64({code})" if dst.bits == 64 else f"np.float32({code})"


def _atomic_region(cg, s: AtomicAddRegion) -> None:
    sd, dd = s.src.buffer.dtype, s.dst.buffer.dtype

    def elem(rs, masked):
        dst, src = rs
        v = _compute_as(to_compute(src.ref, sd), sd, dd)
        if masked and src.is_global:
            v = f"({v} if {src.elem_ok(cg)} else {const_code(0, dd)})"
        new = to_storage(round_to(f"({to_compute(dst.ref, dd)} + {v})", dd), dd)
        if masked and dst.is_global:
            cg.lines.add(f"if {dst.elem_ok(cg)}:")
            with cg.lines.indent():
                cg.lines.add(f"{dst.ref} = {new}")
        else:
            cg.lines.add(f"{dst.ref} = {new}")

    _region_op(cg, [s.dst, s.src], elem)


# ---------------------------------------------------------------------- gemm


def _view2(cg, r: Region) -> tuple[str, tuple[int, int]]:
    """A name for the 2-D view of a gemm operand region (leading dimensions indexed away)."""
    name = cg.names.of(r.buffer)
    n = len(r.extents)
    if r.is_full and n == 2:
        return name, r.extents
    starts = [cg.x.gen(e) for e in r.starts]
    parts = [starts[d] for d in range(n - 2)]
    parts += [f"{starts[d]}:{starts[d]} + {r.extents[d]}" for d in range(n - 2, n)]
    view = cg.names.fresh(f"_{name}_view")
    cg.lines.add(f"{view} = {name}[{', '.join(parts)}]")
    return view, r.extents[-2:]


def _gemm(cg, s: Gemm) -> None:
    """Operand regions outside their buffers fault (as in interp) instead of running the gemm."""
    checks = []
    for r in (s.a, s.b, s.c):
        codes = [cg.x.gen(e) for e in r.starts]
        ok = cg.x.in_bounds(r.buffer, r.starts, codes, r.extents)
        if ok is not None:
            checks.append((ok, r.buffer, codes))
    if not checks:
        _gemm_body(cg, s)
        return
    cg.lines.add(f"if {' and '.join(ok for ok, _, _ in checks)}:")
    cg.lines.body(lambda: _gemm_body(cg, s))
    cg.lines.add("else:")
    with cg.lines.indent():
        _, buf, codes = checks[0]
        cg.lines.add(cg.x.fault_call("region", buf, codes))


def _gemm_body(cg, s: Gemm) -> None:
    da, dc = s.a.buffer.dtype, s.c.buffer.dtype
    m, n, k = s.mnk
    lines = cg.lines
    a, ashape = _view2(cg, s.a)
    b, bshape = _view2(cg, s.b)
    c, _ = _view2(cg, s.c)
    if da.is_float:
        cnp = "float64" if da.bits == 64 else "float32"
        if da.name in ("float32", "float64"):
            if not (s.a.is_full and len(s.a.extents) == 2):
                a = f"np.ascontiguousarray({a})"
            if not (s.b.is_full and len(s.b.extents) == 2):
                b = f"np.ascontiguousarray({b})"
        else:  # narrow operands: decode the tiles to float32 scratch first
            a = _decoded(cg, a, ashape, da)
            b = _decoded(cg, b, bshape, da)
        if s.transpose_a:
            a = f"{a}.T"
        if s.transpose_b:
            b = f"{b}.T"
        prod = cg.scratch_array("_prod", (m, n), cnp)
        lines.add(f"np.dot({a}, {b}, {prod})")
        if dc.name in ("float32", "float64"):  # one runtime call instead of a loop nest
            if s.clear_accum:
                lines.add(f"copy2({c}, np.int64(0), np.int64(0), {prod}, np.int64(0), np.int64(0), "
                          f"np.int64({m}), np.int64({n}))")
            else:
                lines.add(f"acc2({c}, {prod})")
            return
        p = f"{prod}[_i, _j]"
    else:
        prod = None
        p = "_acc"
    lines.add(f"for _i in range({m}):")
    with lines.indent():
        lines.add(f"for _j in range({n}):")
        with lines.indent():
            if prod is None:  # integer gemm: exact int64 dot products
                ai = "_i, _k" if not s.transpose_a else "_k, _i"
                bi = "_k, _j" if not s.transpose_b else "_j, _k"
                lines.add("_acc = 0")
                lines.add(f"for _k in range({k}):")
                with lines.indent():
                    lines.add(f"_acc += np.int64({a}[{ai}]) * np.int64({b}[{bi}])")
            ref = f"{c}[_i, _j]"
            cc = to_compute(ref, dc)
            value = p if s.clear_accum else f"({cc} + {p})"
            lines.add(f"{ref} = {to_storage(value, dc)}")


def _decoded(cg, view: str, shape, d) -> str:
    out = cg.scratch_array("_dec", shape, "float32")
    cg.lines.add(f"dec2_{d.name}({out}, {view})")  # a runtime call, not a loop nest per kernel
    return out


# ---------------------------------------------------------------------- reductions and scans


def _reduce(cg, s: Reduce) -> None:
    src, dst = s.src, s.dst
    sd, dd = src.dtype, dst.dtype
    shape = src.static_shape
    kept = [d for d in range(len(shape)) if d != s.dim]
    body = Lines()
    body.depth = 1
    outv = [f"_o{d}" for d in kept]
    for v, d in zip(outv, kept):
        body.add(f"for {v} in range({shape[d]}):")
        body.depth += 1

    def sref(r):
        idx = [r if d == s.dim else f"_o{d}" for d in range(len(shape))]
        v = to_compute(f"src[{', '.join(idx)}]", sd)
        return f"abs({v})" if s.kind in ("abssum", "absmax") else v

    it = iter(v for v, d in zip(outv, kept) if shape[d] != 1)
    didx = ["0" if n == 1 else next(it, "0") for n in dst.static_shape]
    dref = f"dst[{', '.join(didx)}]"
    red = s.kind.replace("abs", "")
    bit = {"bitand": "&", "bitor": "|", "bitxor": "^"}.get(s.kind)
    if bit is not None:  # integer / bool tiles: the bits of the values as they are stored
        body.add(f"_acc = {sref('0')}")
        body.add(f"for _r in range(1, {shape[s.dim]}):")
        body.add(f"    _acc = _acc {bit} {sref('_r')}")
    elif red == "sum":
        # start from the first element, as NumPy's reduction does (a lone -0.0 stays -0.0)
        body.add(f"_acc = {sref('0')}")
        body.add(f"for _r in range(1, {shape[s.dim]}):")
        body.add(f"    _acc += {sref('_r')}")
    else:
        fn = ("f" + red) if sd.is_float else red
        body.add(f"_acc = {sref('0')}")
        body.add(f"for _r in range(1, {shape[s.dim]}):")
        body.add(f"    _acc = {fn}(_acc, {sref('_r')})")
    cdt = dt.float32 if sd.is_narrow_float else sd
    value = convert("_acc", cdt, dd) if cdt != sd else convert("_acc", sd, dd)
    if not s.clear:
        cur = to_compute(dref, dd)
        if bit is not None:
            value = f"({cur} {bit} {value})"
        elif red == "sum":
            value = round_to(f"({cur} + {value})", dd)
        else:
            value = f"{('f' + red) if dd.is_float else red}({cur}, {value})"
    body.add(f"{dref} = {to_storage(value, dd)}")
    # Reassociating a float sum lets LLVM vectorize it; the oracle's own (pairwise) order differs
    # from any loop's anyway, and sums of exactly representable values are exact in every order.
    fm = "{'reassoc', 'nsz'}" if red == "sum" and sd.is_float else ""
    name = cg.helper(f"_reduce_{s.kind}", "src, dst", body, fm)
    cg.lines.add(f"{name}({cg.names.of(src)}, {cg.names.of(dst)})")


def _cumsum(cg, s: CumSum) -> None:
    src, dst = s.src, s.dst
    sd, dd = src.dtype, dst.dtype
    shape = src.static_shape
    kept = [d for d in range(len(shape)) if d != s.dim]
    body = Lines()
    body.depth = 1
    for d in kept:
        body.add(f"for _o{d} in range({shape[d]}):")
        body.depth += 1
    n = shape[s.dim]
    cdt = dt.float32 if sd.is_narrow_float else sd
    body.add(f"_acc = {const_code(0, cdt)}")
    body.add(f"for _r in range({n - 1}, -1, -1):" if s.reverse else f"for _r in range({n}):")
    idx = ", ".join("_r" if d == s.dim else f"_o{d}" for d in range(len(shape)))
    with body.indent():
        body.add(f"_acc += {to_compute(f'src[{idx}]', sd)}")
        body.add(f"dst[{idx}] = {to_storage(convert('_acc', cdt, dd), dd)}")
    name = cg.helper("_cumsum", "src, dst", body)
    cg.lines.add(f"{name}({cg.names.of(src)}, {cg.names.of(dst)})")
