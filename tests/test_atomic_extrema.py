"""T.atomic_max / T.atomic_min (issue 14 item 10): many blocks and threads updating a few
elements of global memory, exact against NumPy's max / min on interp, cpu, tvm:llvm and the
emulator (the thread IR's Atomic of op max / min); float NaN propagates as T.max does; the
value found (`return_prev=True`) in a thread-level kernel; the GPU renderers' compare-and-swap
helper in the CUDA, HIP and Metal source; misuse is a located error."""

from __future__ import annotations

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileTargetError, TileTypeError

pytestmark = pytest.mark.usefixtures("isolated_cache")

N, BINS = 1024, 4


def _kernel(dtype: str):
    """Blocks of 128 elements; element i updates bin i % BINS of Hi (max) and Lo (min)."""

    @T.prim_func
    def k(A: T.Tensor((N,), dtype), Hi: T.Tensor((BINS,), dtype), Lo: T.Tensor((BINS,), dtype)):
        with T.Kernel(N // 128, threads=128) as bx:
            for i in T.Parallel(128):
                T.atomic_max(Hi[(bx * 128 + i) % BINS], A[bx * 128 + i])
                T.atomic_min(Lo[(bx * 128 + i) % BINS], A[bx * 128 + i], memory_order="relaxed")

    return k


def _inputs(dtype: str, rng):
    if dtype.startswith("float"):
        a = rng.standard_normal(N).astype(dtype) * 100
        return a, np.full(BINS, -np.inf, dtype), np.full(BINS, np.inf, dtype)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    return a, np.full(BINS, info.min, dtype), np.full(BINS, info.max, dtype)


def _check(target: str, dtype: str, nan: bool = False):
    rng = np.random.default_rng(3)
    a, hi, lo = _inputs(dtype, rng)
    if nan:
        a[5] = np.nan  # bin 1
    k = tilecore.compile(_kernel(dtype), target=target)
    k(a, hi, lo)
    bins = a.reshape(-1, BINS)
    want_hi, want_lo = np.max(bins, axis=0), np.min(bins, axis=0)  # NumPy's max/min propagate NaN
    np.testing.assert_array_equal(hi, want_hi)
    np.testing.assert_array_equal(lo, want_lo)


@pytest.mark.parametrize("dtype", ["int32", "float32", "uint8", "float16"])
@pytest.mark.parametrize("target", target_params("interp", "emu:sm_90a"))
def test_atomic_max_min_match_numpy(target, dtype):
    _check(target, dtype)


@pytest.mark.parametrize("target", target_params("interp", "emu:sm_80", "cpu", "tvm:llvm", "metal-cpu",
                                                 "emu:hip:gfx942"))
def test_atomic_max_min_float_nan_propagates(target):
    _check(target, "float32", nan=True)


@pytest.mark.parametrize("target", target_params("interp", "emu:sm_90a"))
def test_atomic_max_return_prev_is_the_value_found(target):
    """One block, thread t raises M[0] to t in thread order: each thread finds the previous
    maximum (the emulator's threads run in order; interp's block is the whole block)."""

    @T.prim_func
    def k(M: T.Tensor((1,), "int32"), Found: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            Found[tx] = T.atomic_max(M[0], tx, return_prev=True)

    m, found = np.full(1, -1, np.int32), np.zeros(128, np.int32)
    tilecore.compile(k, target=target)(m, found)
    assert m[0] == 127
    assert set(found.tolist()) <= set(range(-1, 127)) and found[0] == -1


@pytest.mark.parametrize("target,helper", [("cuda:sm_90a", "tilecore_atomic_max_float32"),
                                           ("hip:gfx942", "tilecore_atomic_max_float32"),
                                           ("metal", "tilecore_atomic_max_float32_global")])
def test_gpu_sources_use_the_compare_and_swap_helper(target, helper):
    try:
        src = tilecore.compile(_kernel("float32"), target=target).get_kernel_source()
    except TileTargetError as e:  # the target's backend is not installed
        pytest.skip(str(e))
    assert f"{helper}(" in src and helper.replace("max", "min") in src
    assert ("atomicCAS" in src or "compare_and_swap" in src or "compare_exchange" in src)


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_hip_code_object_has_the_compare_and_swap(dtype):
    """clang-22 compiles the helper for gfx942: a compare-and-swap in the code object."""
    hip = pytest.importorskip("tilecore_hip.build")
    if hip.missing_toolchain():
        pytest.skip(hip.missing_toolchain())
    k = tilecore.compile(_kernel(dtype), target="hip:gfx942")
    assert "atomic_cmpswap" in k.artifact.disassembly()  # flat_ (generic pointer) or global_


def test_atomic_max_misuse_is_located():
    with pytest.raises(TileTypeError, match="atomic_max of a tile is not provided") as e:
        @T.prim_func
        def tile(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                t = T.alloc_fragment((8,), "float32")
                T.copy(A, t)
                T.atomic_max(A, t)
    assert "test_atomic_extrema.py" in str(e.value)
    with pytest.raises(TileTypeError, match="on bool buffer B"):
        @T.prim_func
        def boolean(B: T.Tensor((8,), "bool")):
            with T.Kernel(1, threads=32) as bx:
                T.atomic_min(B[0], True)
    with pytest.raises(TileTypeError, match="atomic_max\\(memory_order='strong'\\)"):
        @T.prim_func
        def order(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.atomic_max(A[0], 1.0, memory_order="strong")

    @T.prim_func
    def wide(F: T.Tensor((8,), "float64")):
        with T.Kernel(1, threads=32) as bx:
            T.atomic_max(F[0], 1.0)

    with pytest.raises(TileTargetError, match="atomic_max on float64 is not provided"):
        tilecore.compile(wide, target="cuda:sm_90a")
