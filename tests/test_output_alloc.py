"""Outputs are allocated uninitialized (torch.empty) unless the kernel accumulates into them:
an output that is the target of atomic adds (or is read) starts at zero on every call."""

import numpy as np
import pytest
from optional_backends import needs_interp

import tilecore
import tilecore.language as T

torch = pytest.importorskip("torch")


def _atomic_sum(n=64, block=16):
    @T.prim_func
    def f(X: T.Tensor((n,), "float32"), S: T.Tensor((1,), "float32")):
        with T.Kernel(n // block, threads=32) as bx:
            for i in T.serial(block):
                T.atomic_add(S[0], X[bx * block + i])
    return f


@needs_interp
def test_an_accumulated_output_starts_at_zero_on_every_call():
    k = tilecore.compile(_atomic_sum(), out_idx=[-1], target="interp")
    assert k._zero_out == {1}
    x = torch.arange(64, dtype=torch.float32)
    for _ in range(3):  # a reused (or uninitialized) buffer would drift
        assert float(k(x)[0]) == float(x.sum())


@needs_interp
def test_a_written_only_output_is_not_zero_filled():
    @T.prim_func
    def double(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                Y[i] = X[i] * 2

    k = tilecore.compile(double, out_idx=[-1], target="interp")
    assert not k._zero_out
    np.testing.assert_array_equal(k(torch.ones(32)).numpy(), np.full(32, 2, np.float32))
