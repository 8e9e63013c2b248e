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
