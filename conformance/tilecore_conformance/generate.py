"""The top-level program strategy: geometry, launch, producer, stages, consumer -> a Case."""

from __future__ import annotations

from hypothesis import strategies as st

from tilecore import dtypes as dt
from tilecore.semantics import accumulator_dtype

from .case import KERNEL_NAME, Case, Param, Writer
from .programs import (
    _GEMM_ACCUM,
    _STAGE_FNS,
    _STAGES,
    DEFAULT_DTYPES,
    State,
    Tile,
    _alloc,
    _domain,
    _produce_gemm,
    _produce_load,
    _store_dtype,
    _to_fragment,
)
from .values import arith, fits, representable, sum_of

_CONSUMERS = ["copy", "store", "atomic", "atomic_elem", "reduce_out"]
_ATOMIC_DTYPES = ("float32", "int32", "float16")


def _ceildiv(a: int, b: int) -> int:
    return -(-a // b)


@st.composite
def cases(draw, dtypes: tuple = DEFAULT_DTYPES, max_stages: int = 4, producers=("load", "gemm"),
          min_stages: int = 0) -> Case:
    """A random valid tile program over `dtypes` (names; the first is the simplest), with
    `min_stages` to `max_stages` stages after one of `producers`."""
    pool_all = tuple(dt.as_dtype(d) for d in dtypes)
    exact = draw(st.booleans())
    gemm_dtypes = [d for d in pool_all if d.name in _GEMM_ACCUM]
    producer = draw(st.sampled_from([p for p in producers if gemm_dtypes or p != "gemm"] or ["load"]))
    tiles = [16, 32, 8] if producer == "gemm" else [4, 8, 16, 2, 32, 1, 3, 6]
    bm, bn = draw(st.sampled_from(tiles)), draw(st.sampled_from(tiles))
    m, n = draw(st.integers(1, 3 * bm)), draw(st.integers(1, 3 * bn))
    consumer = draw(st.sampled_from(_CONSUMERS))
    atomic_ok = [d for d in pool_all if d.name in _ATOMIC_DTYPES]
    if consumer.startswith("atomic") and not atomic_ok:
        consumer = "copy"
    dynamic = producer == "load" and consumer != "reduce_out" and draw(st.sampled_from([False, False, True]))
    split = draw(st.integers(1, 3)) if consumer.startswith("atomic") else 1
    threads = draw(st.sampled_from([128, 32, 64, 256]))
    style = draw(st.sampled_from(["2d", "swapped", "1d"]))
    m_text = "m" if dynamic else str(m)
    w = Writer()
    w.depth = 1
    gx, gy = _ceildiv(n, bn), (f"T.ceildiv(m, {bm})" if dynamic else str(_ceildiv(m, bm)))
    zdim, zname = (f", {split}", ", bz") if split > 1 else ("", "")
    if style == "2d":
        w.line(f"with T.Kernel({gx}, {gy}{zdim}, threads={threads}) as (bx, by{zname}):")
        w.depth += 1
    elif style == "swapped":
        w.line(f"with T.Kernel({gy}, {gx}{zdim}, threads={threads}) as (by, bx{zname}):")
        w.depth += 1
    else:
        target = f"(bid{zname})" if split > 1 else "bid"
        w.line(f"with T.Kernel({gx} * {gy}{zdim}, threads={threads}) as {target}:")
        w.depth += 1
        w.line(f"bx = bid % {gx}")
        w.line(f"by = bid // {gx}")
    s = State(w, exact, bm, bn, m_text, n, pool_all)
    s.features.update({producer, consumer, f"grid_{style}"} | ({"dynamic"} if dynamic else set()))
    if producer == "load":
        d = draw(st.sampled_from(pool_all))
        cur = _produce_load(draw, s, d)
    else:
        d = draw(st.sampled_from(gemm_dtypes))
        bk = draw(st.sampled_from([16, 8, 32]))
        cur = _produce_gemm(draw, s, d, bk, draw(st.integers(1, 3 * bk)))
    for _ in range(draw(st.integers(min_stages, max_stages))):
        kind = draw(st.sampled_from(_STAGES))
        cur = _STAGE_FNS[kind](draw, s, cur)
    _consume(draw, s, cur, consumer, split, pool_all)
    return _finish(s, m, dynamic)


def _consume(draw, s: State, cur: Tile, kind: str, split: int, pool) -> None:
    w, bm, bn = s.w, s.bm, s.bn
    out_dom = _domain(draw, cur.val.dtype, s.exact)
    if kind == "reduce_out":
        cur = _to_fragment(s, cur)
        rk = draw(st.sampled_from(["sum", "max", "min", "abssum", "absmax"]))
        dim = draw(st.sampled_from([1, 0]))
        nred = bn if dim == 1 else bm
        src = cur.val
        rv = sum_of(nred, src, accumulator_dtype(src.dtype), src.dtype) if rk in ("sum", "abssum") else src
        if not fits(rv) or (s.exact and not rv.exact):
            rk, rv = "max", src
        r = _alloc(s, "r", "fragment", (bm,) if dim == 1 else (bn,), src.dtype)
        w.line(f"T.reduce_{rk}({cur.name}, {r}, dim={dim})")
        if dim == 1:  # one column per block column: blocks never write the same element
            shape, dst = ("M", "GX"), f"Out[by * {bm}:(by + 1) * {bm}, bx]"
        else:
            shape, dst = (("GY", s.n)), f"Out[by, bx * {bn}]"
        w.line(f"T.copy({r}, {dst})")
        s.params.append(_out_param(shape, rv, out_dom))
        s.features.add(f"reduce_out_{rk}_dim{dim}")
        return
    if kind in ("atomic", "atomic_elem"):
        choices = [d for d in pool if d.name in _ATOMIC_DTYPES]
        od = draw(st.sampled_from(choices))
        out_dom = _domain(draw, od, s.exact)
        total = out_dom
        for _ in range(split):
            total = arith("add", total, cur.val.with_dtype(od), od)
        if (cur.val.dtype.is_float and od.is_int and not cur.val.exact) or not fits(total) or (
                s.exact and not total.exact):
            kind = "copy"
        else:
            if kind == "atomic":
                src = cur.name
                if cur.val.dtype != od:
                    src = _alloc(s, "o", "fragment", (bm, bn), od)
                    w.line(f"T.copy({cur.name}, {src})")
                w.line(f"T.atomic_add(Out[by * {bm}, bx * {bn}], {src})")
            else:
                w.line(f"for i, j in T.Parallel({bm}, {bn}):")
                w.line(f"    if by * {bm} + i < {s.m_text} and bx * {bn} + j < {s.n}:")
                w.line(f"        T.atomic_add(Out[by * {bm} + i, bx * {bn} + j], {cur.name}[i, j])")
            s.params.append(_out_param(("M", s.n), total, out_dom))
            return
    od = _store_dtype(draw, cur.val, s)
    out_dom = _domain(draw, od, s.exact)
    if kind == "store":
        w.line(f"for i, j in T.Parallel({bm}, {bn}):")
        w.line(f"    if by * {bm} + i < {s.m_text} and bx * {bn} + j < {s.n}:")
        w.line(f"        Out[by * {bm} + i, bx * {bn} + j] = {cur.name}[i, j]")
    else:
        src = cur.name
        if draw(st.booleans()):
            src = _alloc(s, "o_s", "shared", (bm, bn), od)
            w.line(f"T.copy({cur.name}, {src})")
        w.line(f"T.copy({src}, Out[by * {bm}, bx * {bn}])")
    s.params.append(_out_param(("M", s.n), cur.val.with_dtype(od), out_dom))


def _out_param(shape, val, dom) -> Param:
    d = val.dtype
    exact = val.exact and representable(d, dom.bound, dom.frac)
    return Param("Out", shape, d.name, dom.bound, dom.frac, is_output=True, exact=exact,
                 scale=max(1.0, val.bound))


def _finish(s: State, m: int, dynamic: bool) -> Case:
    gy = _ceildiv(m, s.bm)
    params = []
    sig = []
    for p in s.params:
        shape, dyn = [], []
        for i, e in enumerate(p.shape):
            if e == "M":
                shape.append(m)
                if dynamic:
                    dyn.append((i, "m"))
            elif e == "GY":
                shape.append(gy)
            elif e == "GX":
                shape.append(_ceildiv(s.n, s.bn))
            else:
                shape.append(e)
        params.append(Param(p.name, tuple(shape), p.dtype, p.bound, p.frac, p.is_output, p.exact, p.scale,
                            tuple(dyn)))
        text = [("m" if (i, "m") in dyn else str(e)) for i, e in enumerate(shape)]
        tup = "(" + ", ".join(text) + ("," if len(text) == 1 else "") + ")"
        sig.append(f"{p.name}: T.Tensor({tup}, {p.dtype!r})")
    head = ['"""A tile program generated by tilecore-conformance."""', "import tilecore.language as T", ""]
    if dynamic:
        head += ['m = T.dynamic("m")', ""]
    head += ["", "@T.prim_func", f"def {KERNEL_NAME}({', '.join(sig)}):"]
    source = "\n".join(head) + "\n" + s.w.text()
    return Case(source, tuple(params), tuple(sorted(s.features)))


__all__ = ["cases", "Case", "Param", "Writer", "DEFAULT_DTYPES"]
