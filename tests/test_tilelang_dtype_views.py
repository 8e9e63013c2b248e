"""TileLang's `T.view(buf, shape=..., dtype=...)` with another dtype (issue 14): a buffer over
another's bytes, against NumPy's `ndarray.view` on the targets that run it (interp, cpu), the
located refusal on thread-lowered targets, and the misuse errors."""

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileRuntimeError, TileShapeError, TileTargetError, TileTypeError

pytestmark = pytest.mark.usefixtures("isolated_cache")
TARGETS = target_params("interp", "cpu")


def _reuse():
    """sparse_mla_bwd's idiom: float32 values staged in the bytes of a bfloat16 shared tile."""

    @T.prim_func
    def k(A: T.Tensor((8, 8), T.float32), H: T.Tensor((16, 8), T.bfloat16),
          O: T.Tensor((8, 8), T.float32), P: T.Tensor((16, 8), T.bfloat16)):
        with T.Kernel(1, threads=64) as bx:
            s = T.alloc_shared((16, 8), T.bfloat16)
            acc = T.view(s, shape=[8, 8], dtype=T.float32)
            T.copy(H, s)
            T.copy(s, P)  # the bf16 values, before the float32 view overwrites their bytes
            for i, j in T.Parallel(8, 8):
                acc[i, j] = A[i, j] * 2.0
            T.copy(acc, O)

    return k


@pytest.mark.parametrize("target", TARGETS)
def test_a_view_reuses_the_bytes_of_another_dtype(target):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 8)).astype(np.float32)
    h = rng.standard_normal((16, 8)).astype(np.float32)
    import ml_dtypes

    hb = h.astype(ml_dtypes.bfloat16)
    o, p = tilecore.compile(_reuse(), out_idx=[2, 3], target=target)(a, hb)
    np.testing.assert_array_equal(np.asarray(o), a * 2.0)
    np.testing.assert_array_equal(np.asarray(p).view(np.uint16), hb.view(np.uint16))


def _bytes_as_words():
    """Bytes read as int32 words, float32 values read back as their bytes (fragment scope),
    and float16 bits as uint16 (the same item size) through a view of a view's shape."""

    @T.prim_func
    def k(B: T.Tensor((32,), T.uint8), F: T.Tensor((4, 2), T.float32), Hf: T.Tensor((8,), T.float16),
          W: T.Tensor((8,), T.int32), Fb: T.Tensor((32,), T.uint8), Hb: T.Tensor((2, 4), T.uint16)):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((32,), T.uint8)
            T.copy(B, s)
            w = T.view(s, shape=(8,), dtype=T.int32)
            for i in T.Parallel(8):
                W[i] = w[i]
            f = T.alloc_fragment((4, 8), T.uint8)
            fv = T.view(f, shape=(4, 2), dtype=T.float32)
            T.copy(F, fv)
            for i, j in T.Parallel(4, 8):
                Fb[i * 8 + j] = f[i, j]
            h = T.alloc_fragment((8,), T.float16)
            T.copy(Hf, h)
            hv = T.view(T.reshape(h, (2, 4)), dtype=T.uint16)  # the source's shape: (2, 4)
            T.copy(hv, Hb)

    return k


@pytest.mark.parametrize("target", TARGETS)
def test_views_reinterpret_bits_like_numpy(target):
    rng = np.random.default_rng(1)
    b = rng.integers(0, 256, 32, dtype=np.uint8)
    f = rng.standard_normal((4, 2)).astype(np.float32)
    hf = rng.standard_normal(8).astype(np.float16)
    w, fb, hb = tilecore.compile(_bytes_as_words(), out_idx=[3, 4, 5], target=target)(b, f, hf)
    np.testing.assert_array_equal(np.asarray(w), b.view(np.int32))
    np.testing.assert_array_equal(np.asarray(fb), f.reshape(-1).view(np.uint8))
    np.testing.assert_array_equal(np.asarray(hb), hf.view(np.uint16).reshape(2, 4))


def test_a_same_size_view_shares_the_uninitialized_read_check(monkeypatch):
    """A view of the base's item size is tracked with it: a write through either name marks
    the element; a read of an element nothing wrote is reported at the reading line."""
    monkeypatch.setenv("TILECORE_CHECK_UNINIT", "1")

    @T.prim_func
    def k(A: T.Tensor((4,), T.float32), O: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((8,), T.float32)
            v = T.view(s, dtype=T.int32)
            for i in T.Parallel(4):
                s[i] = A[i]
            for i in T.Parallel(8):
                O[i] = v[i]  # elements 4..7 were never written

    with pytest.raises(TileRuntimeError, match="uninitialized shared buffer") as e:
        tilecore.compile(k, target="interp")(np.ones(4, np.float32), np.zeros(8, np.int32))
    assert "test_tilelang_dtype_views.py" in str(e.value)

    @T.prim_func
    def ok(A: T.Tensor((4,), T.float32), O: T.Tensor((4,), T.int32)):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((4,), T.float32)
            v = T.view(s, dtype=T.int32)
            T.copy(A, s)
            T.copy(v, O)

    a = np.arange(4, dtype=np.float32)
    o = np.zeros(4, np.int32)
    tilecore.compile(ok, target="interp")(a, o)
    np.testing.assert_array_equal(o, a.view(np.int32))


@pytest.mark.parametrize("target", target_params("emu:sm_80", "emu:sm_90a"))
def test_thread_lowered_targets_refuse_dtype_views_with_the_fix(target):
    with pytest.raises(TileTargetError, match=r"does not run T.view\(s, dtype=float32\)") as e:
        tilecore.compile(_reuse(), out_idx=[2, 3], target=target)
    assert "T.alloc_shared((8, 8), T.float32)" in e.value.hint
    assert "test_tilelang_dtype_views.py" in str(e.value)


def test_dtype_view_misuse_is_located():
    with pytest.raises(TileShapeError, match="covers 72 bytes") as e:
        @T.prim_func
        def big(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                s = T.alloc_shared((32,), T.float16)
                T.view(s, shape=(18,), dtype=T.float32)
    assert "test_tilelang_dtype_views.py" in str(e.value)
    with pytest.raises(TileTypeError, match="whole bytes"):
        @T.prim_func
        def boolean(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                T.view(T.alloc_shared((8,), T.uint8), dtype="bool")
    with pytest.raises(TileTypeError, match="only a shared, fragment or local buffer"):
        @T.prim_func
        def glob(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                T.view(A, dtype=T.int32)
    with pytest.raises(TileShapeError, match=r"covers 24 bytes.*defaults to the source's") as e:
        @T.prim_func
        def odd(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                T.view(T.alloc_shared((6,), T.uint8), dtype=T.float32)
    assert "no float32 view covers 6 bytes exactly" in e.value.hint
    with pytest.raises(TileShapeError, match="covers 16 bytes") as e:  # TileLang: exactly the bytes
        @T.prim_func
        def part(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                T.view(T.alloc_shared((16,), T.float16), shape=(4,), dtype=T.float32)
    assert "a shape of 8 float32 elements" in e.value.hint


def _global_views():
    """`T.reshape` / `T.view` (same dtype) of a global tensor: TileLang's
    `T.Tensor(shape, dtype, src.data)`, on every target."""

    @T.prim_func
    def k(A: T.Tensor((8, 6), T.float32), B: T.Tensor((4, 12), T.float32), C: T.Tensor((48,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            a = T.reshape(A, (4, 12))
            c = T.view(C, shape=(8, 6))
            f = T.alloc_fragment((4, 12), T.float32)
            T.copy(a, f)
            T.copy(f, B)
            for i, j in T.Parallel(8, 6):
                c[i, j] = A[i, j] + 1.0

    return k


@pytest.mark.parametrize("target", target_params("interp", "cpu", "emu:sm_80"))
def test_reshape_and_view_of_global_tensors(target):
    a = np.arange(48, dtype=np.float32).reshape(8, 6)
    b, c = tilecore.compile(_global_views(), out_idx=[1, 2], target=target)(a)
    np.testing.assert_array_equal(np.asarray(b), a.reshape(4, 12))
    np.testing.assert_array_equal(np.asarray(c), a.reshape(48) + 1.0)
