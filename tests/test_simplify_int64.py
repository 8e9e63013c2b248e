"""The thread lowering's affine simplifier keeps an integer cast's width: `cast(i, int64) * c`
with a 32-bit loop or thread index computes in int64 (it was rebuilt as an int32 product that
wrapped at 2**32: a silent wrong result on emu/cuda for int64 arithmetic on indices, found by
T.rng_rand's Philox multiplies). Unit level on `tilecore.lower.indexing.simplify`, then kernels
on the emulator and the thread-level path of interp."""

from __future__ import annotations

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore import dtypes as dt
from tilecore.ir.expr import Var, cast
from tilecore.lower.indexing import evaluate, simplify

pytestmark = pytest.mark.usefixtures("isolated_cache")
C = 3528531795  # Philox's multiplier: above 2**31


def test_simplify_keeps_the_cast_width():
    i = Var("i", dt.int32)
    for e in (cast(i + 1, dt.int64) * C, cast(i, dt.int64) * C + cast(i, dt.int64) * 7):
        s = simplify(e, {id(i): (0, 1000)})
        assert s.dtype == dt.int64
        xs = np.arange(1000, dtype=np.int64)
        np.testing.assert_array_equal(evaluate(s, {id(i): xs}), evaluate(e, {id(i): xs}))


@pytest.mark.parametrize("target", target_params("emu:sm_80", "emu:sm_90a"))
def test_int64_products_of_indices_do_not_wrap(target):
    @T.prim_func
    def k(Out: T.Tensor((4,), "int64")):
        with T.Kernel(1, threads=4) as bx:
            for i in T.Parallel(4):
                Out[i] = T.cast(i + 1, "int64") * C

    out = np.zeros(4, np.int64)
    tilecore.compile(k, target=target)(out)
    np.testing.assert_array_equal(out, np.arange(1, 5, dtype=np.int64) * C)


@pytest.mark.parametrize("target", target_params("interp", "emu:sm_80"))
def test_int64_products_of_the_thread_index_do_not_wrap(target):
    @T.prim_func
    def k(Out: T.Tensor((4, 2), "int64")):
        with T.Kernel(1, threads=4) as bx:
            tx = T.get_thread_binding()
            p = C * T.cast(tx + 1, "int64")
            Out[tx, 0] = p
            Out[tx, 1] = T.shift_right(p, 32)

    out = np.zeros((4, 2), np.int64)
    tilecore.compile(k, target=target)(out)
    want = np.arange(1, 5, dtype=np.int64) * C
    np.testing.assert_array_equal(out, np.stack([want, want >> 32], axis=1))
