"""The generator: programs are valid tilecore source, cover the language, and the value
bookkeeping that decides exact comparison is right."""

import dataclasses
import re
from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tilecore_conformance import loader
from tilecore_conformance.case import Case
from tilecore_conformance.generate import cases
from tilecore_conformance.inputs import make_args
from tilecore_conformance.runner import execute
from tilecore_conformance.suite import CI_EXAMPLES
from tilecore_conformance.values import Val, arith, representable, sum_of

from tilecore import dtypes as dt

_CI = settings(max_examples=CI_EXAMPLES, derandomize=True, deadline=None, database=None,
               suppress_health_check=list(HealthCheck))


def test_representable_matches_the_dtypes():
    assert representable(dt.float16, 2048, 0) and not representable(dt.float16, 4096, 0)
    assert representable(dt.bfloat16, 256, 0) and not representable(dt.bfloat16, 256, 1)
    assert representable(dt.float8_e4m3fn, 16, 0) and not representable(dt.float8_e4m3fn, 8, 2)
    assert representable(dt.int8, 127, 0) and not representable(dt.int8, 128, 0)
    assert not representable(dt.int32, 3, 1)
    # the claim behind the analysis, checked by brute force on every value it admits
    for d, bound, frac in ((dt.float16, 16, 6), (dt.bfloat16, 4, 5), (dt.float8_e5m2, 2, 1)):
        assert representable(d, bound, frac)
        k = np.arange(-bound * 2**frac, bound * 2**frac + 1) / 2**frac
        assert np.array_equal(k.astype(d.np).astype(np.float64), k)


def test_sums_are_exact_only_while_partials_fit():
    x = Val(dt.float16, 4, 0, True)
    assert sum_of(16, x, dt.float32, dt.float16).exact
    assert not sum_of(1024, x, dt.float32, dt.float16).exact
    assert not arith("mul", Val(dt.bfloat16, 8, 2, True), Val(dt.bfloat16, 8, 2, True), dt.bfloat16).exact


def test_ci_profile_covers_the_language():
    seen, calls, dtypes_seen, partial = Counter(), Counter(), Counter(), 0
    lines = []

    @_CI
    @given(cases())
    def collect(case):
        nonlocal partial
        seen.update(case.features)
        calls.update(set(re.findall(r"T\.(\w+)\(", case.source)))
        dtypes_seen.update(p.dtype for p in case.params)
        partial += any(s % 4 for p in case.params for s in p.shape)
        lines.append(case.lines)

    collect()
    for f in ("load", "gemm", "transpose_A", "transpose_B", "gemm_pipelined", "gemm_serial", "gemm_single",
              "atomic", "atomic_elem", "store", "copy", "reduce_out", "map", "if_else", "rows", "unroll",
              "dynamic", "grid_1d", "grid_swapped", "fill", "clear", "cumsum_dim0", "cumsum_dim1"):
        assert seen[f] > 0, f"no generated program has {f}"
    assert any(k.startswith("reduce_") and k.endswith("dim0") for k in seen)
    assert any(k.startswith("reduce_") and k.endswith("dim1") for k in seen)
    for fn in ("exp2", "exp", "log", "floor", "if_then_else", "cast", "max", "min", "abs", "atomic_add",
               "fill", "clear", "cumsum", "Pipelined", "reduce_sum", "reduce_max"):
        assert calls[fn] > 0, f"no generated program calls T.{fn}"
    for d in ("float32", "float16", "bfloat16", "int32", "int8", "float8_e4m3fn", "float8_e5m2"):
        assert dtypes_seen[d] > 0, f"no generated program uses {d}"
    assert partial > CI_EXAMPLES // 4, "too few programs with shapes that are not tile multiples"
    assert max(lines) >= 20


def _widened(case: Case) -> Case:
    """The same program with every float tile and tensor in float64."""
    src = re.sub(r"'(float16|bfloat16|float32|float8_e4m3fn|float8_e5m2)'", "'float64'", case.source)
    params = tuple(dataclasses.replace(p, dtype="float64") if dt.as_dtype(p.dtype).is_float else p
                   for p in case.params)
    return Case(src, params)


@settings(max_examples=60, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(case=cases(), seed=st.integers(0, 2**32 - 1))
def test_exact_outputs_are_exact_in_float64(case, seed):
    """What the generator calls exact must not depend on precision: interp's result equals
    the same program computed with every float widened to float64."""
    if not case.exact:
        return
    want = execute(case, "interp", seed)
    args = [a.astype(np.float64) if dt.from_numpy(a.dtype).is_float else a for a in make_args(case, seed)]
    loader.kernel(_widened(case), "interp")(*args)
    for p, w, g in zip(case.params, want, args):
        if p.is_output:
            assert np.array_equal(w.astype(np.float64), g.astype(np.float64)), p.name


def test_float64_programs_with_math_on_integers_compare_at_float32_tolerance():
    """Found on the H200 (seed 209): `T.erf` of an int32 value computes in float32 (CUDA's erff
    is 1 ulp from the oracle's), so a program naming only float64 gets float32 tolerances."""
    from tilecore_conformance.case import Case
    from tilecore_conformance.compare import narrowest_float

    f64_math_on_ints = "x: T.Tensor((4,), 'int32')\ny: T.Tensor((4,), 'float64')\nT.erf(x[0])"
    assert narrowest_float(Case(f64_math_on_ints, ())).name == "float32"
    assert narrowest_float(Case("y: T.Tensor((4,), 'float64')\nT.erf(y[0])", ())).name == "float64"
    assert narrowest_float(Case("'int32' 'float64' y + 1", ())).name == "float64"
