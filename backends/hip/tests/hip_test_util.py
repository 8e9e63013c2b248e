"""Shared by the hip tests: the toolchain skip marker and example loading."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from tilecore_hip import build

from tilecore.example_protocol import assert_outputs_match, example_files, sizes_for

ARCHS = ("gfx90a", "gfx942", "gfx1100")
EXAMPLES = [p.stem for p in example_files()]
# the examples with an fp16 T.gemm, where MFMA/WMMA is expected (read off their source, so a new
# example is classified without an edit here)
# fp16 gemms (MFMA / WMMA); gemm_fp8 has no fp8 matrix instruction here and runs as SIMT
GEMM_EXAMPLES = tuple(p.stem for p in example_files() if "T.gemm(" in p.read_text()
                      and "float8" not in p.read_text())

needs_clang = pytest.mark.skipif(build.missing_toolchain() is not None,
                                 reason=f"no offline AMDGPU toolchain: {build.missing_toolchain()}")


def example(name: str, sizes: dict | None = None, seed: int = 1):
    """(module, PrimFunc, input arrays) of example `name` at `sizes` (default: its first)."""
    mod = importlib.import_module(name)
    sizes = mod.TEST_SIZES[0] if sizes is None else sizes
    func = mod.program(**sizes_for(mod.program, sizes))
    args = mod.make_inputs(np.random.default_rng(seed), **sizes_for(mod.make_inputs, sizes))
    return mod, func, args


def assert_matches(mod, out, ref) -> None:
    """`out` equals the oracle's `ref` within the example's tolerance (exactly when it is 0)."""
    assert_outputs_match(out, ref, mod.TOLERANCE)
