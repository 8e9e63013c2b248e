"""Element-wise add in the eager style: the `@tilecore.jit` function is the kernel, `n` a
compile-time constant bound from the arguments' length (one compile per distinct length; the
factory-style examples/elementwise_add.py instead compiles once for every length with T.dynamic).

Run: python examples/elementwise_add_eager.py [target]
"""

import sys

import numpy as np

import tilecore
import tilecore.language as T

OUT_IDX = [-1]
TEST_SIZES = [dict(n=1000), dict(n=4096)]
TOLERANCE = dict(rtol=0, atol=0)  # one rounding per element: exact on every target


@tilecore.jit
def add(A, B, block=256, dtype="float32"):
    """C = A + B; each block handles `block` elements, the tail is masked."""
    n = T.const("n")
    A: T.Tensor((n,), dtype)
    B: T.Tensor((n,), dtype)
    C = T.empty((n,), dtype)
    with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
        for i in T.Parallel(block):
            idx = bx * block + i
            if idx < n:
                C[idx] = A[idx] + B[idx]
    return C


def program(n=1000, block=256, dtype="float32"):
    """The example protocol's PrimFunc: the eager kernel with `n` given explicitly."""
    return add.get_prim_func(n=n, block=block, dtype=dtype)


def make_inputs(rng, n=1000, dtype="float32"):
    return [rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)]


def reference(a, b):
    return a + b


def main(target="interp"):
    kernel = tilecore.jit(add.fn, target=target)
    a, b = make_inputs(np.random.default_rng(0), n=100_000)
    c = kernel(a, b)
    np.testing.assert_array_equal(c, reference(a, b))
    print(f"elementwise_add_eager on {kernel.compile(a, b).target}: OK ({c.shape[0]} elements)")


if __name__ == "__main__":
    main(*sys.argv[1:])
