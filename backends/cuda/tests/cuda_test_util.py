"""Test helpers: which CUDA tools this machine has, and the examples directory."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
from tilecore_conformance.corpus import example_files, sizes_for
from tilecore_cuda.build import nvcc_path

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
CI_ARCHS = ("sm_80", "sm_90a")


def has_gpu() -> bool:
    """A CUDA device and torch are both usable here."""
    from tilecore_cuda.plugin import _available

    return _available()[0]


def example_modules() -> list:
    """Every example module (each exposes program, TEST_SIZES, make_inputs, OUT_IDX, TOLERANCE)."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    # the protocol's one reader: scripts without it (gemm_autotune, tensor_parallel_mlp) are not cases
    names = [p.stem for p in example_files(Path(EXAMPLES))]
    return [importlib.import_module(n) for n in names]


def example_cases() -> list:
    """(module, sizes) for every example and each of its TEST_SIZES, as pytest params."""
    out = []
    for mod in example_modules():
        for i, sizes in enumerate(mod.TEST_SIZES):
            out.append(pytest.param(mod, sizes, id=f"{mod.__name__}-{i}"))
    return out


needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not installed")
needs_gpu = pytest.mark.skipif(not has_gpu(), reason="no CUDA device (GPU tests run on the H200)")


split = sizes_for  # the one rule, shared with conformance and the other backends' tests
