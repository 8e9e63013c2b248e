"""`T.dp4a`, `T.index_to_coordinates` and the macro buffer annotations (`T.SharedBuffer`,
`T.FragmentBuffer`, `T.LocalBuffer`) of TileLang's long tail (issue 14), against NumPy."""

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileShapeError, TileTypeError

pytestmark = pytest.mark.usefixtures("isolated_cache")
K = 32


def _dp4a(dtype):
    @T.prim_func
    def k(A: T.Tensor((8, K), T.int8), B: T.Tensor((8, K), dtype), C: T.Tensor((8,), T.int32)):
        with T.Kernel(8, threads=32) as bx:
            a = T.alloc_local((K,), T.int8)
            w = T.alloc_local((K,), dtype)
            acc = T.alloc_local((1,), T.int32)
            for i in T.serial(K):
                a[i] = A[bx, i]
                w[i] = B[bx, i]
            acc[0] = 7
            for q in T.serial(K // 4):
                T.dp4a(a[q * 4], w[q * 4], acc[0])
            C[bx] = acc[0]
    return k


@pytest.mark.parametrize("target", target_params("interp", "cpu", "emu:sm_80"))
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_dp4a_accumulates_four_products_exactly(target, dtype):
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (8, K), dtype=np.int8)
    w = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1, (8, K)).astype(dtype)
    c = np.zeros(8, np.int32)
    tilecore.compile(_dp4a(dtype), target=target)(a, w, c)
    np.testing.assert_array_equal(c, 7 + (a.astype(np.int64) * w.astype(np.int64)).sum(axis=1))


def test_dp4a_mistakes_are_located():
    with pytest.raises(TileTypeError, match="accumulates into int32") as e:
        @T.prim_func
        def k(A: T.Tensor((4,), T.int8)):
            with T.Kernel(1, threads=32) as bx:
                a = T.alloc_local((4,), T.int8)
                c = T.alloc_local((1,), T.float32)
                T.dp4a(a, a, c[0])
    assert "test_tilelang_dot_macros.py" in str(e.value)
    with pytest.raises(TileShapeError, match=r"reads A\[..., 2:6\]"):
        @T.prim_func
        def k2(A: T.Tensor((4,), T.int8)):
            with T.Kernel(1, threads=32) as bx:
                a = T.alloc_local((4,), T.int8)
                c = T.alloc_local((1,), T.int32)
                T.dp4a(a[2], a[0], c[0])


def test_index_to_coordinates_is_row_major():
    assert T.index_to_coordinates(23, (2, 3, 4)) == [1, 2, 3]

    @T.prim_func
    def k(A: T.Tensor((24,), T.float32), B: T.Tensor((2, 3, 4), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(24):
                x, y, z = T.index_to_coordinates(i, (2, 3, 4))
                B[x, y, z] = A[i]

    a = np.arange(24, dtype=np.float32)
    b = np.zeros((2, 3, 4), np.float32)
    tilecore.compile(k, target="interp")(a, b)
    np.testing.assert_array_equal(b, a.reshape(2, 3, 4))


@T.macro
def _double(s: T.SharedBuffer([16], T.float32), f: T.FragmentBuffer((16,), T.float32)):
    for i in T.Parallel(16):
        f[i] = s[i] * 2


def test_macro_buffer_annotations_check_their_arguments():
    @T.prim_func
    def k(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((16,), T.float32)
            f = T.alloc_fragment((16,), T.float32)
            T.copy(A, s)
            _double(s, f)
            T.copy(f, B)

    a = np.arange(16, dtype=np.float32)
    b = np.zeros(16, np.float32)
    tilecore.compile(k, target="interp")(a, b)
    np.testing.assert_array_equal(b, 2 * a)
    with pytest.raises(TileTypeError, match=r"'s' is annotated T.SharedBuffer\(\[16\], float32\): "
                                            r"f is a fragment buffer") as e:
        @T.prim_func
        def k2(A: T.Tensor((16,), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                f = T.alloc_fragment((16,), T.float32)
                _double(f, f)
    assert "test_tilelang_dot_macros.py" in str(e.value)
    with pytest.raises(TileTypeError, match="has shape"):
        @T.prim_func
        def k3(A: T.Tensor((16,), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                _double(T.alloc_shared((8,), T.float32), T.alloc_fragment((16,), T.float32))


def test_get_block_binding_is_the_kernels_block_index():
    @T.prim_func
    def k(A: T.Tensor((3, 4), T.int32)):
        with T.Kernel(4, 3, threads=32) as (bx, by):
            A[T.get_block_binding(1), T.get_block_binding(0)] = by * 10 + bx

    a = np.zeros((3, 4), np.int32)
    tilecore.compile(k, target="interp")(a)
    np.testing.assert_array_equal(a, np.arange(3)[:, None] * 10 + np.arange(4))
    with pytest.raises(TileShapeError, match="the grid has 2 dimension"):
        @T.prim_func
        def k2(A: T.Tensor((3, 4), T.int32)):
            with T.Kernel(4, 3, threads=32) as (bx, by):
                A[0, 0] = T.get_block_binding(2)
