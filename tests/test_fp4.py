"""`T.float4_e2m1fn` (TileLang's FP4, tilecore.subbyte): round-to-nearest-even saturating
conversions, the `T.reinterpret` code idiom both ways, packed host tensors (uint8 pairs, low
nibble first, and torch.float4_e2m1fn_x2) dequantized on interp and emu:sm_90, and the located
refusals on cpu and cuda (no sub-byte storage there). Its unpacked form, TileLang's shared-memory
storage tag `T.float4_e2m1_unpacked` (one value per byte), is a float4_e2m1fn shared tile and a
located error anywhere else."""

import ml_dtypes
import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileNameError, TileTargetError, TileTypeError

pytestmark = pytest.mark.usefixtures("isolated_cache")
M, K = 16, 64
RUNS = target_params("interp", "emu:sm_90")
FP4 = ml_dtypes.float4_e2m1fn


def _encode():
    @T.prim_func
    def enc(X: T.Tensor((M, K), T.float32), C: T.Tensor((M, K), T.uint8),
            Y: T.Tensor((M, K), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(M, K):
                C[i, j] = T.reinterpret(T.cast(X[i, j], T.float4_e2m1fn), T.uint8)
                Y[i, j] = T.cast(T.reinterpret(C[i, j] | 0xF0, T.float4_e2m1fn), T.float32)

    return enc


def _dequant(shared=T.float4_e2m1fn):
    @T.prim_func
    def deq(A: T.Tensor((M, K), T.float4_e2m1fn), S: T.Tensor((M,), T.float32),
            O: T.Tensor((M, K), T.bfloat16)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((M, K), shared)
            f = T.alloc_fragment((M, K), T.float32)
            T.copy(A, a)
            for i, j in T.Parallel(M, K):
                f[i, j] = T.cast(a[i, j], T.float32) * S[i]
            T.copy(f, O)

    return deq


def test_the_dtype_is_in_the_one_table():
    assert T.float4_e2m1fn == "float4_e2m1fn" and T.float4_e2m1fn.bits == 4
    assert T.dtype("float4_e2m1fn") is T.float4_e2m1fn and T.float4_e2m1fn.np == np.dtype(FP4)
    assert T.max_value(T.float4_e2m1fn).value == 6.0
    with pytest.raises(TileTypeError, match="has no infinity"):
        @T.prim_func
        def k(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                A[0] = T.cast(T.infinity(T.float4_e2m1fn), T.float32)


@pytest.mark.parametrize("target", RUNS)
def test_encode_rounds_saturates_and_round_trips(target):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((M, K)) * 3).astype(np.float32)
    x[0, :8] = [100.0, -100.0, 0.25, 0.75, 2.5, 5.0, -0.3, 1.75]  # saturation and ties to even
    c, y = np.zeros((M, K), np.uint8), np.zeros((M, K), np.float32)
    tilecore.compile(_encode(), target=target)(x, c, y)
    ref = x.astype(FP4)
    codes = ref.view(np.uint8) & 0xF
    codes = np.where(ref.astype(np.float32) == 0, 0, codes)  # -0.0 encodes as code 0 (bitcast.py)
    np.testing.assert_array_equal(c, codes)
    np.testing.assert_array_equal(y, ref.astype(np.float32))  # the high nibble is ignored


@pytest.mark.parametrize("shared", [T.float4_e2m1fn, T.float4_e2m1_unpacked, "float4_e2m1_unpacked"])
@pytest.mark.parametrize("target", RUNS)
def test_packed_fp4_tensor_dequantizes(target, shared):
    """A packed global tensor copied into a shared tile of FP4 (one value per byte in the kernel,
    whether spelled float4_e2m1fn or TileLang's unpacked storage tag) and dequantized."""
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 16, (M, K)).astype(np.uint8)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    s = rng.standard_normal(M).astype(np.float32)
    want = (codes.view(FP4).astype(np.float32) * s[:, None]).astype(ml_dtypes.bfloat16)
    kern = tilecore.compile(_dequant(shared), target=target)
    o = np.zeros((M, K), ml_dtypes.bfloat16)
    kern(packed, s, o)
    np.testing.assert_array_equal(o.astype(np.float32), want.astype(np.float32))
    if target == "interp":  # torch's packed pair type is the same bytes
        import torch

        o2 = np.zeros((M, K), ml_dtypes.bfloat16)
        kern(torch.from_numpy(packed).view(torch.float4_e2m1fn_x2), s, o2)
        np.testing.assert_array_equal(o2.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("target", target_params("cpu", "cuda:sm_90"))
def test_targets_without_sub_byte_storage_refuse_with_the_fix(target):
    for kern, what in ((_dequant(), "A is float4_e2m1fn"), (_encode(), "computes a float4_e2m1fn")):
        with pytest.raises(TileTargetError, match=f"does not run sub-byte types: .*{what}") as e:
            tilecore.compile(kern, target=target)
        assert "test_fp4.py" in str(e.value) and "interp or emu" in e.value.hint


def test_the_unpacked_storage_tag_is_refused_outside_shared_memory():
    """TileLang's `T.float4_e2m1_unpacked` is a shared-memory storage tag: a tensor annotation,
    a fragment or a cast with it is a located TileNameError naming the fix."""
    assert T.float4_e2m1_unpacked == "float4_e2m1_unpacked"
    with pytest.raises(TileNameError, match="storage tag") as e:
        @T.prim_func
        def g(A: T.Tensor((M, K), T.float4_e2m1_unpacked)):
            with T.Kernel(1, threads=32) as bx:
                T.clear(A)
    assert "test_fp4.py" in str(e.value) and "T.alloc_shared" in e.value.hint
    with pytest.raises(TileNameError, match="storage tag") as e:
        @T.prim_func
        def f(A: T.Tensor((M, K), T.float4_e2m1fn), O: T.Tensor((M, K), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                a = T.alloc_fragment((M, K), T.float4_e2m1_unpacked)
                T.copy(A, a)
                T.copy(a, O)
    assert "test_fp4.py" in str(e.value) and "alloc_fragment" in str(e.value)
    with pytest.raises(TileNameError, match="storage tag"):
        @T.prim_func
        def c(A: T.Tensor((M, K), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                for i, j in T.Parallel(M, K):
                    A[i, j] = T.cast(T.cast(A[i, j], T.float4_e2m1_unpacked), T.float32)
