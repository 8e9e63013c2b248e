"""A T.gemm into a float16 accumulator lowered to SIMT multiply-adds sums its products in the
semantics' gemm accumulator (float32) and rounds into C once per call, as the oracle does; it
rounded every multiply-add into float16 before (one element in 10,000 generated programs of the
`--tile-long` profile differed, amplified by an fp8 output). Exact against interp."""

from __future__ import annotations

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T

pytestmark = [pytest.mark.usefixtures("isolated_cache"), pytest.mark.filterwarnings("ignore::UserWarning")]


def _kernel():
    @T.prim_func
    def main(A: T.Tensor((16, 48), "float16"), B: T.Tensor((48, 16), "float16"),
             C: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((16, 16), "float16")
            b = T.alloc_shared((16, 16), "float16")
            c = T.alloc_fragment((16, 16), "float16")
            T.fill(c, 0)
            for k in T.Pipelined(3, num_stages=2):
                T.copy(A[0, k * 16], a)
                T.copy(B[k * 16, 0], b)
                T.gemm(a, b, c)
            T.copy(c, C)

    return main


@pytest.mark.parametrize("target", target_params("emu:sm_80", "emu:sm_90a"))
def test_simt_gemm_into_float16_rounds_once_per_call(target):
    rng = np.random.default_rng(5)
    # multiples of 1/64 up to 2: products and their float32 sums are exact, the float16 roundings
    # of C are where a per-multiply-add rounding would differ
    a = (rng.integers(-128, 129, (16, 48)) / 64).astype(np.float16)
    b = (rng.integers(-128, 129, (48, 16)) / 64).astype(np.float16)
    want, got = np.zeros((16, 16), np.float16), np.zeros((16, 16), np.float16)
    tilecore.compile(_kernel(), target="interp")(a, b, want)
    tilecore.compile(_kernel(), target=target)(a, b, got)
    np.testing.assert_array_equal(got, want)
