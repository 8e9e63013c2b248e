"""The C-style renderer's tables and spellings against tilecore.semantics.

Table checks need nothing; the rest renders IR expressions with `CStyleRenderer`, compiles
them with the host C compiler (gcc -fwrapv: C's wrapping as the semantics define it) and
compares what C computes with what the semantics module computes, value for value.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from tilecore import dtypes as dt
from tilecore import semantics as S
from tilecore.codegen.cstyle import C_TYPES, FLOAT_BIN_FUNCS, FLOAT_FUNCS, CStyleRenderer
from tilecore.ir.expr import UNARY_FUNCS, Var, binop, cast, unary

CC = shutil.which("gcc") or shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="no host C compiler")
WIDE = [d for d in dt.ALL if not d.is_narrow_float]


def test_every_math_function_has_a_c_spelling():
    floats = {n for n, needs_float in UNARY_FUNCS.items() if needs_float}
    assert floats <= set(FLOAT_FUNCS) and set(FLOAT_FUNCS) <= set(S.UNARY_FUNCS)
    c_ops = {"add", "sub", "mul", "div"}
    assert set(S.FLOAT_BINARY) == c_ops | set(FLOAT_BIN_FUNCS)


@pytest.mark.parametrize("d", WIDE, ids=str)
def test_c_types_and_compute_types_follow_the_semantics(d):
    r = CStyleRenderer()
    c = C_TYPES[d.name]
    if d.is_int:
        assert ("unsigned" in c) == (d.kind == "uint")
        # ints compute in C's promoted int under 32 bits, else in their own type
        assert r.compute_type(d) == C_TYPES[S.int_compute_dtype(d).name]
    for nd in (dt.float16, dt.bfloat16, dt.float8_e4m3fn, dt.float8_e5m2):
        assert r.compute_type(nd) == C_TYPES[S.compute_np(nd).name]  # float32 math


def _run_c(decls: list[str], exprs: list[tuple[str, str]], werror: bool = False,
           prelude: tuple[str, ...] = ()) -> list[str]:
    """Compile a C program printing each (C type, expression) and return its output lines;
    `prelude`: the renderer's helper functions (`CStyleRenderer.prelude()`)."""
    body = []
    for ctype, e in exprs:
        if ctype in ("float", "double"):
            body.append(f'  {{ double v = (double)({e}); printf("%.17g\\n", v); }}')
        elif "unsigned" in ctype:
            body.append(f'  printf("%llu\\n", (unsigned long long)({e}));')
        else:
            body.append(f'  printf("%lld\\n", (long long)({e}));')
    src = ("#include <math.h>\n#include <stdio.h>\n#include <stdbool.h>\n"
           + "".join(p + "\n" for p in prelude) + "int main(void) {\n"
           + "\n".join("  " + d for d in decls) + "\n" + "\n".join(body) + "\n  return 0;\n}\n")
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        c, exe = Path(tmp) / "t.c", Path(tmp) / "t"
        c.write_text(src)
        flags = ["-O1", "-fwrapv"] + (["-Werror"] if werror else [])
        cc = subprocess.run([CC, *flags, "-o", str(exe), str(c), "-lm"],
                            capture_output=True, text=True)
        assert cc.returncode == 0, cc.stderr + src
        return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()


_INT_VALUES = [(7, 2), (-7, 2), (7, -2), (100, 27), (-128, -1), (2**31 - 1, 2), (2**31 - 5, 3)]


@needs_cc
@pytest.mark.parametrize("d", [d for d in dt.ALL if d.is_int], ids=str)
def test_rendered_integer_arithmetic_is_the_semantics(d):
    r = CStyleRenderer()
    a, b = Var("opnd_a", d), Var("opnd_b", d)
    keep = [a, b]  # the renderer names Vars by identity: keep them alive
    decls, exprs, want = [], [], []
    ops = ["add", "sub", "mul", "div", "mod", "min", "max"]
    for k, (x, y) in enumerate(_INT_VALUES):
        x, y = S.wrap_int(x, d), S.wrap_int(y, d)
        if y == 0:
            continue
        decls.append(f"{C_TYPES[d.name]} a{k} = {x}; {C_TYPES[d.name]} b{k} = {y};")
        for op in ops:
            e = binop(op, a, b)
            keep.append(e)
            text = r.expr(e).replace(r.name_of(a), f"a{k}").replace(r.name_of(b), f"b{k}")
            # what a store would keep: the value wrapped to d (C conversion of the result)
            exprs.append((C_TYPES[d.name], f"({C_TYPES[d.name]})({text})"))
            want.append(S.wrap_int(S.int_binop(op, x, y, d), d))
        # and unwrapped: ints under 32 bits compute as int, the rest in their own width
        for op in ("sub", "mul"):
            e = binop(op, a, b)
            keep.append(e)
            text = r.expr(e).replace(r.name_of(a), f"a{k}").replace(r.name_of(b), f"b{k}")
            exprs.append((r.compute_type(d), text))
            want.append(S.int_binop(op, x, y, d))
    got = [int(v) for v in _run_c(decls, exprs, prelude=tuple(r.prelude()))]
    assert got == want


_CAST_VALUES = [0.0, 1.5, -2.75, 100.25, -127.9, 3.0, 65504.0]


@needs_cc
def test_rendered_casts_between_wide_types_are_the_semantics():
    r = CStyleRenderer()
    decls, exprs, want, keep = [], [], [], []
    for k, src in enumerate([d for d in WIDE if not d.is_bool]):
        x = Var("opnd_x", src)
        keep.append(x)
        for j, v in enumerate(_CAST_VALUES):
            v = S.wrap_int(int(v), src) if src.is_int else S.round_to(np.float64(v), src)
            name = f"x{k}_{j}"
            lit = repr(float(v)) if src.is_float else str(int(v)) + ("u" if src.kind == "uint" else "")
            decls.append(f"{C_TYPES[src.name]} {name} = {lit};")
            for dst in WIDE:
                if dst == src or (src.is_float and dst.is_int and not
                                  dt.min_value(dst) <= int(v) <= dt.max_value(dst)):
                    continue  # an out-of-range float -> int conversion is undefined in C
                e = cast(x, dst)
                keep.append(e)
                text = r.expr(e).replace(r.name_of(x), name)
                exprs.append((C_TYPES[dst.name] if not dst.is_bool else "int", text))
                want.append(float(S.cast_value(v, src, dst)))
    got = [float(g) for g in _run_c(decls, exprs)]
    assert got == want


@needs_cc
@pytest.mark.parametrize("d", [dt.float32, dt.float64], ids=str)
def test_rendered_math_functions_match_the_semantics_table(d):
    """Exact functions bit for bit; the transcendental ones within a few ulp (libm vs NumPy)."""
    r = CStyleRenderer()
    x = Var("opnd_x", d)
    keep = [x]
    xs = [0.3, 1.7, 2.5, -0.5, 3.5]
    exact = {"floor", "ceil", "trunc", "round", "abs", "sqrt"}
    decls, exprs, want, names = [], [], [], []
    for j, v in enumerate(xs):
        decls.append(f"{C_TYPES[d.name]} x{j} = {v!r};")
        for name in sorted(FLOAT_FUNCS):
            arg = abs(v) + 1 if name in ("log", "log2", "sqrt", "rsqrt") else v
            e = unary(name, x)
            keep.append(e)
            text = r.expr(e).replace(r.name_of(x), f"x{j}")
            if name in ("log", "log2", "sqrt", "rsqrt"):
                text = text.replace(f"x{j}", f"(fabs(x{j}) + 1)")
            exprs.append((C_TYPES[d.name], text))
            want.append(float(S.float_unary(name, S.round_to(np.float64(arg), d), d)))
            names.append(name)
    got = [float(g) for g in _run_c(decls, exprs)]
    ulp = float(np.finfo(S.compute_np(d)).eps)
    for name, g, w in zip(names, got, want):
        if name in exact:
            assert g == w, name
        else:
            assert abs(g - w) <= 4 * ulp * max(1.0, abs(w)), (name, g, w)


@needs_cc
@pytest.mark.parametrize("d", [dt.float32, dt.float64], ids=str)
def test_rendered_float_min_max_propagate_nan(d):
    """NaN in either operand gives NaN (np.minimum / np.maximum), where C's fminf / fmaxf
    return the other operand; ordinary operands give the smaller / larger one."""
    r = CStyleRenderer()
    a, b = Var("opnd_a", d), Var("opnd_b", d)
    keep = [a, b]
    c = C_TYPES[d.name]
    values = {"na": np.nan, "one": 1.0, "two": 2.0, "mone": -1.0}
    exprs, want = [], []
    for op in ("min", "max"):
        e = binop(op, a, b)
        keep.append(e)
        for x, y in (("na", "one"), ("one", "na"), ("na", "na"), ("one", "two"), ("two", "mone")):
            exprs.append((c, r.expr(e).replace(r.name_of(a), x).replace(r.name_of(b), y)))
            want.append(float(S.float_binop(op, S.round_to(np.float64(values[x]), d),
                                            S.round_to(np.float64(values[y]), d), d)))
    decls = [f"{c} {n} = {'NAN' if np.isnan(v) else repr(v)};" for n, v in values.items()]
    got = [float(g) for g in _run_c(decls, exprs, prelude=tuple(r.prelude()))]
    assert np.isnan(got).tolist() == np.isnan(want).tolist()
    assert [g for g in got if g == g] == [w for w in want if w == w]


@needs_cc
@pytest.mark.parametrize("d", [d for d in dt.ALL if d.is_int], ids=str)
def test_rendered_integer_limits_are_valid_c(d):
    """Each int dtype's min and max (reductions' identities) as C literals of the right value,
    accepted without a warning. int64's min cannot be a literal: `-9223372036854775808LL`
    negates a constant too large for long long (gcc warns; the value arrives through unsigned)."""
    from tilecore.ir.expr import Const

    r = CStyleRenderer()
    exprs = [(C_TYPES[d.name], r.expr(Const(v, d))) for v in (dt.min_value(d), dt.max_value(d))]
    assert [int(g) for g in _run_c([], exprs, werror=True)] == [dt.min_value(d), dt.max_value(d)]
