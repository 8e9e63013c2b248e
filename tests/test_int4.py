"""`T.int4` (tilecore.subbyte): wrapping conversions and int32 arithmetic, packed int8 host
tensors (TileLang's layout: element 2j in the low nibble), an int4 gemm on interp and emu, and
the refusals (targets without sub-byte storage, int4 outputs)."""


import ml_dtypes
import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileTargetError, TileTypeError

RUNS = target_params("interp", "emu:sm_80")


pytestmark = pytest.mark.usefixtures("isolated_cache")


def pack(v: np.ndarray) -> np.ndarray:
    """TileLang's int4 packing of logical values -8..7 into int8 pairs (low nibble first)."""
    u = (v.astype(np.int16) & 0xF).astype(np.uint8)
    return (u[..., ::2] | (u[..., 1::2] << 4)).view(np.int8)


def _mm(M, N, K, bm=16, bn=16, bk=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.int4), B: T.Tensor((N, K), T.int4), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=64) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.int4)
            b_s = T.alloc_shared((bn, bk), T.int4)
            c_l = T.alloc_fragment((bm, bn), T.int32)
            T.clear(c_l)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], a_s)
                T.copy(B[bx * bn, ko * bk], b_s)
                T.gemm(a_s, b_s, c_l, transpose_B=True)
            T.copy(c_l, C[by * bm, bx * bn])
    return main


@pytest.mark.filterwarnings("ignore:T.gemm")  # emu: int4 has no tensor-core instruction there
@pytest.mark.parametrize("target", RUNS)
def test_int4_gemm_from_packed_host_tensors(target):
    kern = tilecore.compile(_mm(32, 16, 64), out_idx=-1, target=target)
    rng = np.random.default_rng(1)
    a, b = rng.integers(-8, 8, (32, 64)), rng.integers(-8, 8, (16, 64))
    want = (a @ b.T).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(kern(pack(a), pack(b))), want)
    # the unpacked NumPy form (one ml_dtypes.int4 per element) is the same tensor
    np.testing.assert_array_equal(np.asarray(kern(a.astype(ml_dtypes.int4), b.astype(ml_dtypes.int4))), want)


def test_packed_torch_tensors_too():
    torch = pytest.importorskip("torch")
    kern = tilecore.compile(_mm(16, 16, 32), out_idx=-1, target="interp")
    a = torch.randint(-8, 8, (16, 32), dtype=torch.int8)
    b = torch.randint(-8, 8, (16, 32), dtype=torch.int8)
    got = kern(torch.from_numpy(pack(a.numpy())), torch.from_numpy(pack(b.numpy())))
    assert torch.equal(torch.as_tensor(np.asarray(got)), a.int() @ b.int().T)


def _wrap():
    @T.prim_func
    def k(A: T.Tensor((16,), T.int4), B: T.Tensor((16,), T.int32)):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((16,), T.int4)
            for i in T.Parallel(16):
                s[i] = A[i] * 3 + 1  # computed in int32, wrapped to 4 bits on the store
            for i in T.Parallel(16):
                B[i] = T.cast(s[i], T.int32) * 100 + A[i]
    return k


@pytest.mark.parametrize("target", RUNS)
def test_int4_stores_wrap_and_arithmetic_is_int32(target):
    kern = tilecore.compile(_wrap(), out_idx=-1, target=target)
    a = np.arange(-8, 8)
    w = (a * 3 + 1) & 0xF
    w = np.where(w >= 8, w - 16, w)
    np.testing.assert_array_equal(np.asarray(kern(pack(a))), (w * 100 + a).astype(np.int32))


def test_targets_without_subbyte_storage_and_int4_outputs_are_refused():
    with pytest.raises(TileTargetError, match="target cpu does not run sub-byte types: A is int4"):
        tilecore.compile(_mm(16, 16, 32), out_idx=-1, target="cpu")

    @T.prim_func
    def out4(A: T.Tensor((8,), T.int32), B: T.Tensor((8,), T.int4)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                B[i] = A[i]
    with pytest.raises(TileTypeError, match="inputs only"):
        tilecore.compile(out4, out_idx=-1, target="interp")


def test_int4_dtype_and_call_checks():
    assert T.int4.bits == 4 and T.int4 == "int4" and T.int4.as_torch() is not None
    assert tilecore.dtypes.as_dtype(np.dtype(ml_dtypes.int4)) is T.int4
    kern = tilecore.compile(_mm(16, 16, 32), out_idx=-1, target="interp")
    # a packed (16, 8) int8 argument is a (16, 16) int4 tensor
    with pytest.raises(tilecore.errors.TileCallError, match=r"\(16, 16\), kernel expects \(16, 32\)"):
        kern(np.zeros((16, 16), np.int8), np.zeros((16, 8), np.int8))
