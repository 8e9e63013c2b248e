"""interp runs its kernels' matmuls on one BLAS thread (tilecore_interp.blas) and restores the
caller's setting afterwards; gemm results are those of NumPy's own product."""

import numpy as np
from tilecore_interp import blas

import tilecore
import tilecore.language as T


@T.prim_func
def mm(A: T.Tensor((64, 32), "float32"), B: T.Tensor((32, 64), "float32"),
       C: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, 1, threads=128):
        a = T.alloc_shared((64, 32), "float32")
        b = T.alloc_shared((32, 64), "float32")
        c = T.alloc_fragment((64, 64), "float32")
        T.copy(A, a)
        T.copy(B, b)
        T.gemm(a, b, c, clear_accum=True)
        T.copy(c, C)


def test_one_thread_inside_and_the_callers_count_after():
    with blas.one_thread():
        setter = blas._SETTER
    if not setter:  # not OpenBLAS with a thread-local count: nothing to check but the result
        return
    before = setter(3)  # the caller's thread-local setting, as a user might have set it
    try:
        with blas.one_thread():
            assert setter(1) == 1  # inside: one thread (setter returns the previous value)
        assert setter(3) == 3  # restored on exit
    finally:
        setter(before)


def test_gemm_result_matches_numpy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 64)).astype(np.float32)
    c = tilecore.jit(mm, out_idx=[2], target="interp")(a, b)
    np.testing.assert_array_equal(c, a @ b)
