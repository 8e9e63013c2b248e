"""TileLang's reducers (`T.alloc_reducer`) rendered as CUDA: per-thread partials (the
reducer-partials pass, tilecore.lower.reducers) combined by warp shuffles at the finalize, no
atomics; compiled by nvcc for the CI archs, and run against NumPy where a GPU is present."""

from __future__ import annotations

import importlib.util
import subprocess

import numpy as np
import pytest
from cuda_test_util import CI_ARCHS, has_gpu, needs_nvcc
from tilecore_cuda.build import nvcc_path

import tilecore
import tilecore.language as T

M, N, BM, BN = 256, 512, 64, 64


def gemv():
    """o = A @ x with a sum reducer, TileLang's `gemv_alloc_reducer` shape (example_gemv.py)."""

    @T.prim_func
    def k(A: T.Tensor((M, N), "float16"), X: T.Tensor((N,), "float16"), O: T.Tensor((M,), "float16"),
          Mx: T.Tensor((M,), "float32")):
        with T.Kernel(M // BM, threads=128) as bx:
            r = T.alloc_reducer(BM, "float32", replication="all")
            mx = T.alloc_reducer(BM, "float32", op="max")
            T.clear(r)
            T.fill(mx, -T.infinity("float32"))
            for ko in T.Pipelined(N // BN, num_stages=2):
                a_s = T.alloc_shared((BM, BN), "float16")
                T.copy(A[bx * BM, ko * BN], a_s)
                a = T.alloc_fragment((BM, BN), "float16")
                T.copy(a_s, a)
                x = T.alloc_fragment(BN, "float16")
                T.copy(X[ko * BN], x)
                for i, j in T.Parallel(BM, BN):
                    r[i] += a[i, j] * x[j]
                    mx[i] = T.max(mx[i], a[i, j])
            T.finalize_reducer(r)
            T.finalize_reducer(mx)
            T.copy(r, O[bx * BM])
            T.copy(mx, Mx[bx * BM])

    return k


@needs_nvcc
@pytest.mark.parametrize("arch", CI_ARCHS)
def test_reducers_render_as_per_thread_partials_and_compile(arch, tmp_path):
    src = tilecore.compile(gemv(), target=f"cuda:{arch}").get_kernel_source()
    assert "r_partial" in src and "__shfl_xor_sync" in src
    assert "atomic" not in src  # the partials are per thread: no contention to resolve
    cu = tmp_path / "k.cu"
    cu.write_text(src)
    a = arch.removeprefix("sm_")
    subprocess.run([nvcc_path(), "-cubin", f"-gencode=arch=compute_{a},code={arch}",
                    "-o", str(tmp_path / "k.cubin"), str(cu)], capture_output=True, text=True,
                   check=True)


def _numpy(t) -> np.ndarray:
    """A result as NumPy (torch tensors from a device, NumPy arrays from emu)."""
    if isinstance(t, np.ndarray):
        return t
    from tilecore.kernel import _to_numpy

    return _to_numpy(t.cpu())


def _check(target):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, N)).astype(np.float16)
    x = rng.standard_normal(N).astype(np.float16)
    o, mx = (_numpy(t) for t in tilecore.compile(gemv(), out_idx=[2, 3], target=target)(a, x))
    want = a.astype(np.float64) @ x.astype(np.float64)
    np.testing.assert_allclose(np.asarray(o).astype(np.float64), want, rtol=2e-2, atol=5e-2)
    np.testing.assert_array_equal(np.asarray(mx), a.astype(np.float32).max(axis=1))


@pytest.mark.skipif(importlib.util.find_spec("tilecore_emu") is None,
                    reason="emu is not installed (the GPU machine's check installs interp and cuda alone)")
@pytest.mark.parametrize("target", ["emu:cuda:sm_80", "emu:cuda:sm_90a"])
def test_pipelined_reducers_match_numpy_on_emu(target):
    _check(target)


@pytest.mark.skipif(not has_gpu(), reason="no CUDA device")
def test_reducers_match_numpy_on_gpu():
    _check("cuda")
