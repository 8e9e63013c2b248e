"""TileLang-port surfaces (issue 14): dtypes that are strings, TileLang's dtype spellings and
`tilecore.language.dtypes`, views of global tensors (`T.Tensor(shape, dtype, buf.data)`),
`T.im2col`, `T.fill` of one element, `buf[i].astype`, `tilecore.cuda`, `tilecore.transform`."""

import copy
import pickle

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore import dtypes as dt
from tilecore.errors import TileShapeError, TileTargetError, TileTypeError

TARGETS = target_params("interp", "cpu", "emu:sm_80")


pytestmark = pytest.mark.usefixtures("isolated_cache")


# ------------------------------------------------------------------------------- dtypes
def test_dtypes_are_strings_of_their_canonical_name():
    torch = pytest.importorskip("torch")
    assert getattr(torch, T.float16) is torch.float16  # TileLang's `getattr(torch, dtype)`
    assert getattr(torch, T.int8) is torch.int8
    assert isinstance(T.bfloat16, str) and T.bfloat16.startswith("bfloat")
    assert f"{T.float32}" == "float32" and repr(T.float32) == "T.float32"
    # equality with spellings, and != its exact negation (str's own != compares raw names)
    assert T.float16 == "half" and not (T.float16 != "half")
    assert T.float16 != "float32" and T.float16 != T.bfloat16
    assert {T.int32: 1}["int32"] == 1
    assert pickle.loads(pickle.dumps(T.int16)) == T.int16
    assert copy.deepcopy(T.uint8).bits == 8
    assert dt.as_dtype(T.float16) is T.float16


def test_tilelang_c_spellings_and_the_dtypes_module():
    torch = pytest.importorskip("torch")
    from tilecore.language import dtypes as tld

    assert (T.int, T.uint, T.long, T.short, T.double) == (T.int32, T.uint32, T.int64, T.int16,
                                                          T.float64)
    assert T.uint in [T.int, T.uint] and T.int not in [T.uint]
    assert tld.dtype("half") is T.float16 and tld.get_tvm_dtype(torch.bfloat16) is T.bfloat16
    assert tld._TORCH_DTYPE_TO_STR[torch.float16] == "float16"
    assert tld._STR_TO_TORCH_DTYPE["int32"] is torch.int32
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tld.nope  # noqa: B018


def _tf32_gemm_kernel():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "tfloat32"), B: T.Tensor((16, 16), "tf32"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a_s = T.alloc_shared((16, 16), "tfloat32")
            b_s = T.alloc_shared((16, 16), T.tfloat32)
            c = T.alloc_fragment((16, 16), "float32")
            T.copy(A[0, 0], a_s)
            T.copy(B[0, 0], b_s)
            T.gemm(a_s, b_s, c, clear_accum=True)
            T.copy(c, C[0, 0])
    return k


def _tf32_round(x: np.ndarray) -> np.ndarray:
    """float32 rounded to TF32's 10 mantissa bits (nearest, ties away: cvt.rna.tf32.f32)."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_tfloat32_is_float32_storage_and_its_gemm_is_float32(target):
    """The strings "tfloat32" / "tf32" name T.tfloat32, which is float32 storage; a gemm on it
    keeps float32's 23 mantissa bits (TileLang's TF32 tensor cores keep 10: the documented
    difference). A = n + 2^-12 needs 12 mantissa bits; every sum below is exact in float32."""
    assert dt.as_dtype("tfloat32") is T.float32 and T.tfloat32 is T.float32 and T.float32 == "tf32"
    rng = np.random.default_rng(5)
    a = (rng.integers(-4, 5, (16, 16)) + 2.0 ** -12).astype(np.float32)
    b = rng.integers(-4, 5, (16, 16)).astype(np.float32)
    c = tilecore.compile(_tf32_gemm_kernel(), out_idx=[-1], target=target)(a, b)
    assert c.dtype == np.float32
    np.testing.assert_array_equal(c, (a.astype(np.float64) @ b).astype(np.float32))
    assert not np.array_equal(c, _tf32_round(a) @ b)  # not what TF32 inputs would give


def _scalar_param_kernel():
    @T.prim_func
    def k(A: T.Tensor((8,), T.float32), n: T.int32):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(8):
                A[i] = A[i] + T.cast(n, T.float32)
    return k


def test_a_dtype_annotation_is_still_a_scalar_parameter():
    kern = tilecore.compile(_scalar_param_kernel(), target="interp")
    a = np.zeros(8, np.float32)
    kern(a, 3)
    np.testing.assert_array_equal(a, np.full(8, 3, np.float32))


# ------------------------------------------------------------------------- element fills
def _fill_one_and_astype():
    @T.prim_func
    def k(A: T.Tensor((4,), T.float16), B: T.Tensor((2, 4), T.float32)):
        with T.Kernel(2, threads=32) as bx:
            s = T.alloc_shared((4,), T.float32)
            T.fill(s, 1.0)
            T.fill(s[2], 7.0)  # one element, as TileLang's fill of a BufferLoad
            for i in T.serial(4):
                B[bx, i] = s[i] + A[i].astype(T.float32) * (bx + 1)
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_fill_of_one_element_and_element_astype(target):
    kern = tilecore.compile(_fill_one_and_astype(), out_idx=[1], target=target)
    a = np.array([0.5, 1.5, -2.0, 4.0], np.float16)
    want = np.array([1, 1, 7, 1], np.float32)[None] + a.astype(np.float32)[None] * np.array([[1], [2]])
    np.testing.assert_array_equal(np.asarray(kern(a)), want.astype(np.float32))


# --------------------------------------------------------------------- views and im2col
def _conv(N, H, W, C, F, K, S, D, P, bm=16, bn=16, bk=16):
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    @T.prim_func
    def conv(data: T.Tensor((N, H, W, C), T.float16), kernel: T.Tensor((K, K, C, F), T.float16),
             out: T.Tensor((N, OH, OW, F), T.float32)):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(N * OH * OW, bm), threads=64) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            kernel_flat = T.Tensor((K * K * C, F), T.float16, kernel.data)
            out_flat = T.Tensor((N * OH * OW, F), T.float32, out.data)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K * K * C, bk), num_stages=2):
                T.im2col(data, a_s, by, k, K, S, D, P)
                T.copy(kernel_flat[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, out_flat[by * bm, bx * bn])
    return conv, (N, OH, OW, F)


def _conv_ref(x, w, S, D, P):
    """NHWC x (K, K, C, F) convolution in float64 (exact for these small integer inputs)."""
    N, H, W, C = x.shape
    K, _, _, F = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (P, P), (P, P), (0, 0)))
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    out = np.zeros((N, OH, OW, F))
    for kh in range(K):
        for kw in range(K):
            patch = xp[:, kh * D: kh * D + S * (OH - 1) + 1: S, kw * D: kw * D + S * (OW - 1) + 1: S, :]
            out += patch @ w[kh, kw].astype(np.float64)
    return out


CONV_CASES = [pytest.param(t.values[0], (2, 5, 6, 8, 24, 3, 1, 1, 1), marks=t.marks,
                           id=f"{t.values[0]}-pad1") for t in TARGETS]
# stride and dilation change only index arithmetic: once on interp keeps the cpu/emu cost down
CONV_CASES.append(pytest.param("interp", (1, 7, 7, 4, 16, 3, 2, 2, 2), id="interp-stride2-dil2"))


@pytest.mark.parametrize(("target", "shape"), CONV_CASES)
def test_im2col_convolution_through_global_views(target, shape):
    N, H, W, C, F, K, S, D, P = shape
    func, oshape = _conv(N, H, W, C, F, K, S, D, P)
    kern = tilecore.compile(func, out_idx=[2], target=target)
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, (N, H, W, C)).astype(np.float16)
    w = rng.integers(-3, 4, (K, K, C, F)).astype(np.float16)
    np.testing.assert_array_equal(np.asarray(kern(x, w)), _conv_ref(x, w, S, D, P).astype(np.float32))


def _view_elements():
    @T.prim_func
    def k(A: T.Tensor((2, 3, 4), T.float32), B: T.Tensor((2, 3, 4), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            a2 = T.Tensor((6, 4), T.float32, A.data)
            b1 = T.Tensor((24,), T.float32, B.data)
            for i, j in T.Parallel(6, 4):
                b1[i * 4 + j] = a2[i, j] * 2.0 + a2[5 - i, j]
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_views_of_global_tensors_element_by_element(target):
    kern = tilecore.compile(_view_elements(), out_idx=[1], target=target)
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a2 = a.reshape(6, 4)
    np.testing.assert_array_equal(np.asarray(kern(a)), (a2 * 2 + a2[::-1]).reshape(2, 3, 4))


def test_view_mistakes_are_located_errors():
    with pytest.raises(TileTypeError, match="another dtype is not provided"):
        @T.prim_func
        def k1(A: T.Tensor((4, 4), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                v = T.Tensor((16,), T.int32, A.data)  # noqa: F841
    with pytest.raises(TileShapeError, match="has 8 elements"):
        @T.prim_func
        def k2(A: T.Tensor((4, 4), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                v = T.Tensor((8,), T.float32, A.data)  # noqa: F841
    with pytest.raises(TileShapeError, match="regroups its dimensions"):
        @T.prim_func
        def k3(A: T.Tensor((4, 4), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                v = T.Tensor((2, 8), T.float32, A.data)
                f = T.alloc_fragment((2, 8), T.float32)
                T.fill(f, 0.0)
                T.reduce_sum(v[0:2, 0:8], f, dim=1)


# --------------------------------------------------------------- tilecore.cuda / transform
def test_cuda_module_swizzle_helpers_and_refused_emitters():
    from tilecore.cuda.intrinsics import TensorCoreIntrinEmitter, get_swizzle_layout
    from tilecore.cuda.intrinsics.macro.mma_macro_generator import INT4TensorCoreIntrinEmitter

    # 128-byte rows of float16: chunk c of row r goes to chunk c ^ (r % 8)
    for r in range(16):
        for c in range(64):
            tile, row, col = get_swizzle_layout(r, c, 64, "float16")
            assert (tile, row) == (0, r) and col == ((c // 8) ^ (r % 8)) * 8 + c % 8
    # 64-byte rows: 4 chunks, phase (r % 8) // 2
    assert get_swizzle_layout(3, 9, 32, T.float16) == (0, 3, (1 ^ 1) * 8 + 1)
    with pytest.raises(TileShapeError, match="not a multiple of 32"):
        get_swizzle_layout(0, 0, 8, "float16")
    for cls in (TensorCoreIntrinEmitter, INT4TensorCoreIntrinEmitter):
        with pytest.raises(TileTargetError, match="T.gemm"):
            cls(a_dtype="float16")


def _swizzled_copy():
    from tilecore.cuda.intrinsics import make_mma_swizzle_layout

    @T.prim_func
    def k(A: T.Tensor((16, 64), T.float16), B: T.Tensor((16, 64), T.float16)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((16, 64), T.float16)
            t = T.alloc_shared((16, 4), T.float16)
            T.annotate_layout({s: make_mma_swizzle_layout(s), t: make_mma_swizzle_layout(t)})
            T.copy(A, s)
            T.copy(s, B)
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_make_mma_swizzle_layout_places_without_changing_values(target):
    kern = tilecore.compile(_swizzled_copy(), out_idx=[1], target=target)
    a = np.arange(16 * 64).astype(np.float16).reshape(16, 64)
    np.testing.assert_array_equal(np.asarray(kern(a)), a)


def test_simplify_prim_func_returns_the_prim_func():
    from tilecore.transform import apply_simplify, simplify_prim_func

    made = simplify_prim_func(_scalar_param_kernel)
    func = made()
    assert made.__name__ == "_scalar_param_kernel"
    kern = tilecore.compile(func, target="interp")
    a = np.zeros(8, np.float32)
    kern(a, 2)
    np.testing.assert_array_equal(a, np.full(8, 2, np.float32))
    with pytest.raises(TileTypeError, match="takes a T.prim_func"):
        apply_simplify(lambda: None)
