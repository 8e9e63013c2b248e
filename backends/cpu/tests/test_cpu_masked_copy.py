"""Tiles sticking out of a tensor on every side: the masked copy path (`runtime.load_masked*` /
`store_masked*`) reads zeros outside the tensor and drops writes there, bit-exact with interp."""

import numpy as np
import pytest
from tilecore_cpu import artifact

import tilecore
import tilecore.language as T


def _program(dtype, rows):
    """Each block loads the 4x8 tile at (4*by - 2, 8*bx - 3) of A (or a row of it when `rows` is
    1) into shared memory, then stores it at the same place of B: B is A inside the covered part,
    and the tile parts outside the tensors are read as zero and never written."""
    m, n = T.dynamic("m"), T.dynamic("n")

    if rows == 1:
        @T.prim_func
        def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
            with T.Kernel(T.ceildiv(n + 6, 8), threads=32) as bx:
                s = T.alloc_shared((8,), dtype)
                T.copy(A[bx * 8 - 3], s)
                T.copy(s, B[bx * 8 - 3])
        return main

    @T.prim_func
    def main(A: T.Tensor((m, n), dtype), B: T.Tensor((m, n), dtype)):
        with T.Kernel(T.ceildiv(n + 6, 8), T.ceildiv(m + 4, 4), threads=32) as (bx, by):
            s = T.alloc_shared((4, 8), dtype)
            T.copy(A[by * 4 - 2, bx * 8 - 3], s)
            T.copy(s, B[by * 4 - 2, bx * 8 - 3])
    return main


@pytest.mark.parametrize("dtype,rows", [("float32", 2), ("float16", 2), ("int8", 1)])
def test_partial_tiles_copy_like_interp(dtype, rows, monkeypatch):
    sources = []
    real_load = artifact.load

    def spy(source):
        sources.append(source)
        return real_load(source)

    monkeypatch.setattr(artifact, "load", spy)
    func = _program(dtype, rows)
    cpu = tilecore.compile(func, out_idx=None, target="cpu")
    oracle = tilecore.compile(func, out_idx=None, target="interp")
    assert f"load_masked{rows}(" in sources[-1] and f"store_masked{rows}(" in sources[-1]
    rng = np.random.default_rng(0)
    shape = (7,) if rows == 1 else (5, 11)
    a = (rng.integers(-50, 50, shape)).astype(dtype)
    got, want = np.full_like(a, 7), np.full_like(a, 7)
    cpu(a, got)
    oracle(a, want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, a)  # every element is covered by some tile
