"""Issue 14 item 10's operations in CUDA: T.rng_rand (cuRAND's Philox numbers), T.atomic_max /
atomic_min (the compare-and-swap helper under real concurrency), T.reduce_bit* and T.transpose
compile with nvcc for the CI architectures (no GPU) and match their references on the GPU."""

import sys
from pathlib import Path

import numpy as np
from cuda_test_util import CI_ARCHS, needs_gpu, needs_nvcc
from tilecore_cuda import build

import tilecore

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
import test_atomic_extrema as atomics  # noqa: E402 - the kernels the core tests check on CPU targets
import test_reduce_bits as bits  # noqa: E402
import test_rng as rng  # noqa: E402
import test_transpose as transpose  # noqa: E402


def _kernels():
    return {"rng": rng._kernel(), "atomic_f32": atomics._kernel("float32"),
            "atomic_u8": atomics._kernel("uint8"), "bits_i32": bits._kernel("int32"),
            "transpose": transpose._kernel()}


@needs_nvcc
def test_long_tail_compiles_with_nvcc():
    for name, k in _kernels().items():
        build.nvcc_check(tilecore.compile(k, target="cuda:sm_80").get_kernel_source(), CI_ARCHS,
                         name=f"long_tail_{name}")


def _numpy_round_trip(compile_fn):
    """tilecore.compile whose kernels take the core tests' NumPy arrays: each argument goes to
    the GPU as a torch tensor and comes back into the array after the call."""
    from tilecore.kernel import _from_numpy, _to_numpy

    def compile_(*args, **kw):
        k = compile_fn(*args, **kw)

        def call(*arrays):
            ts = [_from_numpy(np.ascontiguousarray(a)).cuda() for a in arrays]
            k(*ts)
            for a, t in zip(arrays, ts):
                a[...] = _to_numpy(t.cpu())
        return call
    return compile_


@needs_gpu
def test_long_tail_on_the_gpu(monkeypatch):
    monkeypatch.setattr(tilecore, "compile", _numpy_round_trip(tilecore.compile))
    rng.test_rng_matches_curand("cuda")
    for dtype in ("int32", "float32", "uint8", "float16"):
        atomics._check("cuda", dtype)
    atomics._check("cuda", "float32", nan=True)
    for dtype in ("int32", "uint8", "bool"):
        bits._check("cuda", dtype)
    transpose.test_transpose_matches_numpy("cuda")
