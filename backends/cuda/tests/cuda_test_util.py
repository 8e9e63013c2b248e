"""Test helpers: which CUDA tools this machine has, and the examples directory."""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import tempfile
from pathlib import Path

import pytest
from tilecore_conformance.corpus import example_files, sizes_for
from tilecore_cuda import build
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


def _run_dir() -> Path:
    """A folder private to this test run and shared by its pytest-xdist workers (named by
    xdist's run id; a run without xdist gets one per process)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    d = Path(tempfile.gettempdir()) / f"tilecore-test-nvcc-{os.getuid()}" / run
    d.mkdir(parents=True, exist_ok=True)
    return d


def nvcc_cubin(source: str, arch: str, name: str = "kernel") -> bytes:
    """The cubin nvcc builds from `source` for `arch`, compiled once per test run.

    Several tests check the same example kernels (one that nvcc accepts them, one for spills):
    they share one real nvcc build in each run instead of one each. Never tilecore's compile
    cache, which outlives the run: every run compiles with nvcc."""
    key = hashlib.sha256(f"{arch}\x00{source}".encode()).hexdigest()[:32]
    path = _run_dir() / f"{key}.cubin"
    if path.exists():
        cubin = path.read_bytes()
        if cubin[:4] == b"\x7fELF":
            return cubin
    cubin = build.compile_cuda(source, arch, name=name, compiler="nvcc", use_cache=False)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(cubin)
    os.replace(tmp, path)  # atomic: a concurrent worker reads a whole cubin or none
    return cubin
