"""Kernels in a module with `from __future__ import annotations` (string annotations)."""

from __future__ import annotations

import numpy as np

import tilecore
import tilecore.language as T


def scale(n, dtype):
    @T.prim_func
    def k(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(n):
                B[i] = A[i] * 2

    return k


def test_parameters_used_only_in_annotations_resolve():
    kernel = tilecore.jit(scale(8, "float32"), out_idx=[-1], target="toy:w4")
    a = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(kernel(a), 2 * a)
