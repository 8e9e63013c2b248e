"""The generated HIP source itself, executed on the CPU (host_exec.py: one thread per
work-item, matrix builtins from the lane maps) against the interp oracle: the renderer's index
arithmetic, LDS carving, shuffles and MFMA/WMMA register packing, which emu (running the IR)
does not see."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hip_test_util import assert_matches, example, needs_clang
from host_exec import run_on_host

import tilecore

# (example, test size index, arch): MFMA 32x32x8 and WMMA gemms, wave64 and wave32 reductions
CASES = [("gemm", 0, "gfx942"), ("gemm", 0, "gfx1100"), ("softmax", 1, "gfx942"),
         ("layernorm", 1, "gfx1100"), ("flash_attention", 1, "gfx942")]


@needs_clang
@pytest.mark.parametrize("name,size,arch", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_generated_hip_runs_on_the_host(name, size, arch):
    import importlib

    sizes = importlib.import_module(name).TEST_SIZES[size]
    mod, func, inputs = example(name, sizes)
    ref = tilecore.jit(func, out_idx=mod.OUT_IDX, target="interp")(*inputs)
    kernel = tilecore.jit(func, out_idx=mod.OUT_IDX, target=f"hip:{arch}")
    assert len(mod.OUT_IDX) == 1 and mod.OUT_IDX[0] == -1
    out = np.zeros_like(ref)
    cache = os.path.join(os.environ["TILECORE_CACHE_DIR"], "hip-host")
    run_on_host(kernel, [*(np.ascontiguousarray(a) for a in inputs), out], {},
                32 if arch == "gfx1100" else 64, cache)
    assert_matches(mod, out, ref)


conf = pytest.importorskip("tilecore_conformance")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from tilecore_conformance.compare import compare  # noqa: E402
from tilecore_conformance.generate import cases  # noqa: E402
from tilecore_conformance.inputs import make_args  # noqa: E402
from tilecore_conformance.loader import prim_func  # noqa: E402
from tilecore_conformance.runner import _oracle, unsupported  # noqa: E402

from tilecore import plugins  # noqa: E402
from tilecore.errors import TileTargetError  # noqa: E402


@needs_clang
@settings(max_examples=6, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(cases())
def test_generated_programs_run_on_the_host(case):
    """Generated programs' HIP source (wave64 or wave32 by the program's key) agrees with interp
    within the emulator's tolerances."""
    arch = ("gfx942", "gfx1100")[int(case.key, 16) % 2]
    if unsupported(case, f"hip:{arch}"):
        return
    want = _oracle(case, 0)
    if not isinstance(want, list):  # an ill-formed program: the conformance suite's business
        return
    try:
        kernel = tilecore.compile(prim_func(case), out_idx=None, target=f"hip:{arch}")
    except TileTargetError as e:
        assert "ocml" in str(e)
        return
    args = make_args(case, 0)
    cache = os.path.join(os.environ["TILECORE_CACHE_DIR"], "hip-host")
    run_on_host(kernel, args, kernel._check(args), 32 if arch == "gfx1100" else 64, cache)
    bug = compare(case, want, args, plugins.resolve(f"emu:hip:{arch}"))
    assert bug is None, f"{case.key} on {arch}: {bug}"


def _int_row_min():
    """Row minima of an int32 gemm result: the gemm's fragment layout spreads each row over
    several lanes, so the reduction shuffles (the shape of the generated program that found it)."""
    import tilecore.language as T

    @T.prim_func
    def row_min(A: T.Tensor((16, 32), "int8"), B: T.Tensor((8, 32), "int8"), Out: T.Tensor((16,), "int32")):
        with T.Kernel(1, threads=32) as _:
            A_s = T.alloc_shared((16, 32), "int8")
            B_s = T.alloc_shared((8, 32), "int8")
            C_f = T.alloc_fragment((16, 8), "int32")
            T.clear(C_f)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f, transpose_B=True)
            r = T.alloc_fragment((16,), "int32")
            T.fill(r, 2)
            T.reduce_min(C_f, r, dim=1, clear=False)
            T.copy(r, Out)

    return row_min


@needs_clang
@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_integer_min_reduction_shuffles_on_every_lane(arch):
    """Regression: integer min rendered as `a < b ? a : b` evaluated the shuffle operand twice,
    the second time on only some lanes (a divergent ds_bpermute); a generated program of this
    shape deadlocked in the host harness. The renderer now calls `tilecore_min` (each operand
    once); this pins that spelling and checks the results on both wave sizes."""
    func = _int_row_min()
    rng = np.random.default_rng(5)
    a, b = (rng.integers(-9, 9, shape).astype(np.int8) for shape in ((16, 32), (8, 32)))
    ref = tilecore.jit(func, out_idx=[-1], target="interp")(a, b)
    kernel = tilecore.jit(func, out_idx=[-1], target=f"hip:{arch}")
    assert "tilecore_min(" in kernel.get_kernel_source()
    out = np.zeros_like(ref)
    cache = os.path.join(os.environ["TILECORE_CACHE_DIR"], "hip-host")
    run_on_host(kernel, [a, b, out], {}, 32 if arch == "gfx1100" else 64, cache, timeout_s=30)
    np.testing.assert_array_equal(out, ref)
