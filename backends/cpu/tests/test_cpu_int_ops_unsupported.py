"""The cpu backend declares floor division and the bit operations unsupported (a TileTargetError
before any code is generated), rather than computing them at the wrong width."""

import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileTargetError


@pytest.mark.parametrize("which", ["floordiv", "shift", "not"])
def test_int_ops_are_declared_unsupported(which):
    @T.prim_func
    def k(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(8):
                if which == "floordiv":
                    B[i] = T.floordiv(A[i], 3)
                elif which == "shift":
                    B[i] = A[i] >> 1
                else:
                    B[i] = ~A[i]

    with pytest.raises(TileTargetError, match="not implemented by the cpu backend"):
        tilecore.jit(k, out_idx=[-1], target="cpu")
