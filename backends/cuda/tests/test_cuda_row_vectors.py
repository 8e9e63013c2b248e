"""The row kernels (softmax, RMSNorm, LayerNorm 16384 x 8192 fp16, every benchmark thread
count) compile to 128-bit global loads and stores only (issue 9, item 6): read off the SASS
nvcc makes for sm_90a, counted by tools/sass_counts.py."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_test_util import example_modules, needs_nvcc
from tilecore_cuda import build

import tilecore

ROOT = Path(__file__).resolve().parents[3]


def _counter():
    spec = importlib.util.spec_from_file_location("sass_counts_rows", ROOT / "tools" / "sass_counts.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sass_counts_rows"] = mod
    spec.loader.exec_module(mod)
    return mod


def _sass(cubin: bytes, tmp_path) -> str:
    tool = shutil.which("cuobjdump") or ("/work/sass-venv/lib/python3.11/site-packages/triton/backends/"
                                         "nvidia/bin/cuobjdump")
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    try:
        return subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("cuobjdump is not available")


@needs_nvcc
@pytest.mark.parametrize("threads", [256, 512])
@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "layernorm"])
def test_row_kernels_use_only_128_bit_global_accesses(name, threads, tmp_path):
    mod = next(m for m in example_modules() if m.__name__ == name)
    src = tilecore.compile(mod.program(M=16384, N=8192, block_M=1, threads=threads), out_idx=mod.OUT_IDX,
                           target="cuda:sm_90a").get_kernel_source()
    cubin = build.compile_cuda(src, "sm_90a", compiler="nvcc", use_cache=False)
    c = _counter().count_sass(_sass(cubin, tmp_path))
    per_thread = 8192 // threads // 8  # 16-byte runs of X (and Y) each thread holds
    reads = {"softmax": 1, "rmsnorm": 2, "layernorm": 3}[name]  # X, then W, then B
    assert c["LDG.E.128"] == c["LDG"] == reads * per_thread, c
    assert c["STG.E.128"] == c["STG"] == per_thread, c
