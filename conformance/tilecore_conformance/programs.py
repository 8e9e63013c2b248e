"""Hypothesis generation of whole tile programs, written as tilecore source text.

A program is a producer, a few stages and a consumer, all on one (BM, BN) tile per block:

- producer: ``load`` (copy chains of X, and optionally Y and a row vector V, from global
  through shared/fragment buffers) or ``gemm`` (a K loop of copies and ``T.gemm``, either
  transpose, serial / ``T.Pipelined`` / ``range`` / a single step);
- stages: ``map`` (a ``T.Parallel`` element expression, possibly under ``if``/``else`` or as
  serial rows of parallel columns), ``reduce`` (``reduce_*`` along either axis, broadcast back),
  ``cumsum``, ``fill`` (fill/clear then a masked overwrite) and ``copy`` (to another scope);
- consumer: ``copy`` (optionally through shared), masked element ``store``, ``atomic``
  (region atomic_add from a split grid), ``atomic_elem`` and ``reduce_out``.

Global shapes are drawn independently of the tile, so partial tiles are common. Every draw
lists its simplest alternative first, so failures shrink to short programs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from tilecore import dtypes as dt
from tilecore.dtypes import DType
from tilecore.semantics import accumulator_dtype

from .case import Param, Writer
from .exprgen import Ctx, Term, conditions, terms
from .values import INEXACT_FRAC, Val, arith, fits, join, representable, sum_of

# Every dtype of the language but bool, the simplest first.
DEFAULT_DTYPES = ("float32", "float16", "bfloat16", "int32", "int8", "float8_e4m3fn", "float8_e5m2",
                  "float64", "int64", "int16", "uint32", "uint8", "uint16")
_GEMM_ACCUM = {"float16": ("float32", "float16"), "bfloat16": ("float32",), "float32": ("float32",),
               "int8": ("int32",), "float8_e4m3fn": ("float32",), "float8_e5m2": ("float32",),
               "float64": ("float64",)}
_STAGES = ["map", "reduce", "map", "cumsum", "fill", "map", "copy"]


@dataclass
class Tile:
    """The program's current tile: the buffer holding it and what is known of its values."""

    name: str
    scope: str
    val: Val


@dataclass
class State:
    """Everything a program draw accumulates while writing the kernel."""

    w: Writer
    exact: bool
    bm: int
    bn: int
    m_text: str
    n: int
    pool: tuple  # DTypes casts and stores may use
    params: list = field(default_factory=list)
    inputs: list = field(default_factory=list)  # Terms of input tiles usable as leaves
    features: set = field(default_factory=set)

    def index_terms(self) -> list:
        i32 = dt.int32
        # global shapes are at most three tiles, so global indices stay below 3 * tile
        return [Term("i", Val(i32, self.bm, 0, True, True)), Term("j", Val(i32, self.bn, 0, True, True)),
                Term(f"(by * {self.bm} + i)", Val(i32, 3.0 * self.bm, 0, True, True)),
                Term(f"(bx * {self.bn} + j)", Val(i32, 3.0 * self.bn, 0, True, True))]

    def conds(self) -> tuple:
        return (f"by * {self.bm} + i < {self.m_text}", f"bx * {self.bn} + j < {self.n}", "i < 2",
                "(i + j) % 2 == 0", "j >= 1", "i == j")

    def ctx(self, cur: Tile) -> Ctx:
        leaves = [Term(f"{cur.name}[i, j]", cur.val)] + self.inputs + self.index_terms()
        return Ctx(tuple(leaves), self.conds(), self.pool, self.exact)


def _domain(draw, d: DType, exact: bool) -> Val:
    if d.is_int:  # unsigned inputs are drawn from [0, bound] (inputs.make_array)
        return Val(d, float(draw(st.sampled_from([8, 3, 100] if d.bits > 8 else [8, 3, 20]))), 0, True,
                   d.kind == "uint")
    if not exact:
        return Val(d, draw(st.sampled_from([2.0, 1.0, 4.0])), INEXACT_FRAC, True)
    bound = draw(st.sampled_from([4.0, 2.0, 8.0, 1.0]))
    frac = draw(st.sampled_from([0, 1, 2]))
    while not representable(d, bound, frac):
        if frac > 0:
            frac -= 1
        else:
            bound /= 2
    return Val(d, bound, frac, True)


def _store_dtype(draw, v: Val, st_: State, prefer: DType | None = None) -> DType:
    """A dtype to store `v` in: drawn from the pool, kept only where the store is safe."""
    options = [prefer or v.dtype] + [d for d in st_.pool if d != (prefer or v.dtype)]
    d = draw(st.sampled_from(options))
    safe = fits(v.with_dtype(d)) and not (d.is_int and not (v.dtype.is_int or v.exact))
    if st_.exact and not representable(d, v.bound, v.frac):
        safe = False
    if d.is_int and v.dtype.is_float and not v.exact:
        safe = False
    return d if safe else v.dtype


def _region(buf: str, bm: int, bn: int, sliced: bool) -> str:
    if sliced:
        return f"{buf}[by * {bm}:(by + 1) * {bm}, bx * {bn}:(bx + 1) * {bn}]"
    return f"{buf}[by * {bm}, bx * {bn}]"


def _alloc(s: State, base: str, scope: str, shape: tuple, d: DType) -> str:
    name = s.w.fresh(base)
    s.w.line(f"{name} = T.alloc_{scope}({shape!r}, {d.name!r})")
    return name


def _parallel_header(draw, s: State) -> int:
    """Open a T.Parallel nest over (i, j); returns how many levels to close."""
    form = draw(st.sampled_from(["nest", "rows", "unroll"]))
    if form == "nest":
        s.w.line(f"for i, j in T.Parallel({s.bm}, {s.bn}):")
        s.w.depth += 1
        return 1
    outer = "T.serial" if form == "rows" else "T.unroll"
    s.features.add(form)
    s.w.line(f"for i in {outer}({s.bm}):")
    s.w.depth += 1
    s.w.line(f"for j in T.Parallel({s.bn}):")
    s.w.depth += 1
    return 2


# ----------------------------------------------------------------------------- producers


def _load(draw, s: State, name: str, d: DType, vector: bool = False) -> Tile:
    dom = _domain(draw, d, s.exact)
    shape = (s.n,) if vector else ("M", s.n)
    s.params.append(Param(name, shape, d.name, dom.bound, dom.frac))
    hops = draw(st.lists(st.sampled_from(["fragment", "shared"]), min_size=1, max_size=3))
    tshape = (s.bn,) if vector else (s.bm, s.bn)
    src = f"{name}[bx * {s.bn}]" if vector else _region(name, s.bm, s.bn, draw(st.booleans()))
    val = dom
    cur = None
    for scope in hops:
        wide = accumulator_dtype(val.dtype) if val.dtype.bits < 32 else val.dtype
        nd = draw(st.sampled_from([val.dtype, dt.int32 if wide == dt.int64 else wide]))
        buf = _alloc(s, f"{name.lower()}_{scope[0]}", scope, tshape, nd)
        s.w.line(f"T.copy({src}, {buf})")
        val = val.with_dtype(nd)
        cur = Tile(buf, scope, val)
        src = buf
    s.features.add("copy_chain")
    return cur


def _produce_load(draw, s: State, d: DType) -> Tile:
    x = _load(draw, s, "X", d)
    if draw(st.booleans()):
        y = _load(draw, s, "Y", draw(st.sampled_from(s.pool)))
        s.inputs.append(Term(f"{y.name}[i, j]", y.val))
    if draw(st.booleans()):
        v = _load(draw, s, "V", draw(st.sampled_from(s.pool)), vector=True)
        s.inputs.append(Term(f"{v.name}[j]", v.val))
    s.inputs.insert(0, Term(f"{x.name}[i, j]", x.val))
    return x


def _produce_gemm(draw, s: State, d: DType, bk: int, k: int) -> Tile:
    acc = dt.as_dtype(draw(st.sampled_from(_GEMM_ACCUM[d.name])))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    da, db = _domain(draw, d, s.exact), _domain(draw, d, s.exact)
    s.params.append(Param("A", (k, "M") if ta else ("M", k), d.name, da.bound, da.frac))
    s.params.append(Param("B", (s.n, k) if tb else (k, s.n), d.name, db.bound, db.frac))
    a_shape = (bk, s.bm) if ta else (s.bm, bk)
    b_shape = (s.bn, bk) if tb else (bk, s.bn)
    a_s = _alloc(s, "A_s", "shared", a_shape, d)
    b_s = _alloc(s, "B_s", "shared", b_shape, d)
    a_frag = draw(st.booleans())
    a_f = _alloc(s, "A_f", "fragment", a_shape, d) if a_frag else a_s
    c_f = _alloc(s, "C_f", "fragment", (s.bm, s.bn), acc)
    single = k <= bk and draw(st.booleans())
    loop = "single" if single else draw(st.sampled_from(["pipelined", "serial", "range"]))
    kk = "0" if single else "k"
    if not single:
        if draw(st.booleans()):
            s.w.line(f"T.clear({c_f})")
        else:
            s.w.line(f"T.fill({c_f}, 0)")
        steps = f"T.ceildiv({k}, {bk})"
        if loop == "pipelined":
            s.w.line(f"for k in T.Pipelined({steps}, num_stages={draw(st.sampled_from([2, 3, 1, 0]))}):")
        elif loop == "serial":
            s.w.line(f"for k in T.serial({steps}):")
        else:
            s.w.line(f"for k in range({steps}):")
        s.w.depth += 1
    a_src = f"A[{kk} * {bk}, by * {s.bm}]" if ta else f"A[by * {s.bm}, {kk} * {bk}]"
    b_src = f"B[bx * {s.bn}, {kk} * {bk}]" if tb else f"B[{kk} * {bk}, bx * {s.bn}]"
    s.w.line(f"T.copy({a_src}, {a_s})")
    s.w.line(f"T.copy({b_src}, {b_s})")
    if a_frag:
        s.w.line(f"T.copy({a_s}, {a_f})")
    flags = (", transpose_A=True" if ta else "") + (", transpose_B=True" if tb else "")
    flags += ", clear_accum=True" if single else ""
    s.w.line(f"T.gemm({a_f}, {b_s}, {c_f}{flags})")
    if not single:
        s.w.depth -= 1
    s.features.update({"gemm", f"gemm_{loop}"} | ({"transpose_A"} if ta else set())
                      | ({"transpose_B"} if tb else set()))
    prod = arith("mul", da, db, dt.float32 if acc.is_float else acc)
    return Tile(c_f, "fragment", sum_of(k, prod, acc, acc))


# ----------------------------------------------------------------------------- stages


def _to_fragment(s: State, cur: Tile) -> Tile:
    if cur.scope == "fragment":
        return cur
    buf = _alloc(s, "t_f", "fragment", (s.bm, s.bn), cur.val.dtype)
    s.w.line(f"T.copy({cur.name}, {buf})")
    return Tile(buf, "fragment", cur.val)


def _stage_map(draw, s: State, cur: Tile) -> Tile:
    ctx = s.ctx(cur)
    depth = draw(st.integers(1, 4))
    form = draw(st.sampled_from(["plain", "ifelse"]))
    first = draw(terms(ctx, depth))
    val = first.val
    if form == "ifelse":
        cond = draw(conditions(ctx))
        other = draw(terms(ctx, depth))
        val = join(first.val, other.val, dt.promote(first.val.dtype, other.val.dtype))
        if not fits(val) or (s.exact and not val.exact):
            form, val = "plain", first.val
    d = _store_dtype(draw, val, s)
    scope = draw(st.sampled_from(["fragment", "shared"]))
    buf = _alloc(s, "t", scope, (s.bm, s.bn), d)
    closes = _parallel_header(draw, s)
    if form == "plain":
        s.w.line(f"{buf}[i, j] = {first.text}")
    else:
        s.w.line(f"if {cond}:")
        s.w.line(f"    {buf}[i, j] = {first.text}")
        s.w.line("else:")
        s.w.line(f"    {buf}[i, j] = {other.text}")
        s.features.add("if_else")
    s.w.depth -= closes
    s.features.add("map")
    return Tile(buf, scope, val.with_dtype(d))


def _stage_reduce(draw, s: State, cur: Tile) -> Tile:
    cur = _to_fragment(s, cur)
    kind = draw(st.sampled_from(["sum", "max", "min", "abssum", "absmax"]))
    dim = draw(st.sampled_from([1, 0]))
    n = s.bn if dim == 1 else s.bm
    src = cur.val
    rd = draw(st.sampled_from([src.dtype, dt.int32 if src.dtype.is_int else dt.float32]))
    clear = draw(st.booleans())
    lit = draw(st.sampled_from([1, 0, 2, -3]))
    lit = abs(lit) if rd.kind == "uint" else lit
    lv = Val(rd, abs(lit), 0, True, lit >= 0)
    if kind in ("sum", "abssum"):
        rv = sum_of(n, src, accumulator_dtype(src.dtype), rd)
        if not clear:
            rv = arith("add", rv, lv, rd)
    else:
        rv = src.with_dtype(rd)
        if not clear:
            rv = join(rv, lv, rd)
    if kind in ("abssum", "absmax"):
        rv = Val(rv.dtype, rv.bound, rv.frac, rv.exact, clear or lit >= 0)
    if not fits(rv) or (s.exact and not rv.exact):
        rd, kind, clear, rv = src.dtype, "max", True, src  # a max never rounds nor grows
    r = _alloc(s, "r", "fragment", (s.bm,) if dim == 1 else (s.bn,), rd)
    if not clear:
        s.w.line(f"T.fill({r}, {lit})")
    extra = "" if clear else ", clear=False"
    s.w.line(f"T.reduce_{kind}({cur.name}, {r}, dim={dim}{extra})")
    rterm = Term(f"{r}[i]" if dim == 1 else f"{r}[j]", rv)
    cterm = Term(f"{cur.name}[i, j]", cur.val)
    op = draw(st.sampled_from(["sub", "add", "mul", "max"]))
    d = dt.promote(cur.val.dtype, rd)
    val = arith(op, cterm.val, rterm.val, d) if op != "max" else join(cterm.val, rterm.val, d)
    if not fits(val) or (s.exact and not val.exact):
        op, val = "max", join(cterm.val, rterm.val, d)
    sym = {"sub": "-", "add": "+", "mul": "*"}
    text = f"T.max({cterm.text}, {rterm.text})" if op == "max" else f"{cterm.text} {sym[op]} {rterm.text}"
    out = _alloc(s, "t", "fragment", (s.bm, s.bn), d)
    s.w.line(f"for i, j in T.Parallel({s.bm}, {s.bn}):")
    s.w.line(f"    {out}[i, j] = {text}")
    s.features.add(f"reduce_{kind}_dim{dim}")
    return Tile(out, "fragment", val)


def _stage_cumsum(draw, s: State, cur: Tile) -> Tile:
    dim = draw(st.sampled_from([0, 1]))
    reverse = draw(st.booleans())
    n = s.bm if dim == 0 else s.bn
    d = draw(st.sampled_from([cur.val.dtype, dt.int32 if cur.val.dtype.is_int else dt.float32]))
    val = sum_of(n, cur.val, accumulator_dtype(cur.val.dtype), d)
    if not fits(val) or (s.exact and not val.exact):
        return cur
    out = _alloc(s, "c", cur.scope, (s.bm, s.bn), d)
    rev = ", reverse=True" if reverse else ""
    s.w.line(f"T.cumsum({cur.name}, {out}, dim={dim}{rev})")
    s.features.add(f"cumsum_dim{dim}")
    return Tile(out, cur.scope, val)


def _stage_fill(draw, s: State, cur: Tile) -> Tile:
    ctx = s.ctx(cur)
    t = draw(terms(ctx, draw(st.integers(0, 2))))
    cond = draw(conditions(ctx))
    d = _store_dtype(draw, t.val, s)
    scope = draw(st.sampled_from(["fragment", "shared"]))
    buf = _alloc(s, "f", scope, (s.bm, s.bn), d)
    lit = draw(st.sampled_from([0, 1, -2]))
    lit = abs(lit) if d.kind == "uint" else lit
    if lit == 0 and draw(st.booleans()):
        s.w.line(f"T.clear({buf})")
        s.features.add("clear")
    else:
        s.w.line(f"T.fill({buf}, {lit})")
        s.features.add("fill")
    closes = _parallel_header(draw, s)
    s.w.line(f"if {cond}:")
    s.w.line(f"    {buf}[i, j] = {t.text}")
    s.w.depth -= closes
    return Tile(buf, scope, join(t.val, Val(d, abs(lit), 0, True, lit >= 0), d))


def _stage_copy(draw, s: State, cur: Tile) -> Tile:
    scope = draw(st.sampled_from(["shared", "fragment"]))
    d = draw(st.sampled_from([cur.val.dtype, dt.float32 if cur.val.dtype.is_float else dt.int32]))
    buf = _alloc(s, f"{scope[0]}", scope, (s.bm, s.bn), d)
    s.w.line(f"T.copy({cur.name}, {buf})")
    return Tile(buf, scope, cur.val.with_dtype(d))


_STAGE_FNS = {"map": _stage_map, "reduce": _stage_reduce, "cumsum": _stage_cumsum,
              "fill": _stage_fill, "copy": _stage_copy}
