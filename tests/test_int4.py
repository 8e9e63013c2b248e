"""`T.int4` and `uint4` (tilecore.subbyte) on interp, cpu and emu:sm_90a: every nibble pattern
in both halves of a packed byte (TileLang's layout: element 2j in the low nibble) and as an
ml_dtypes array, wrapping conversions and int32 arithmetic, a gemm into int32 exact against
NumPy, and the refusals (odd packed K at the call, targets without sub-byte storage, sub-byte
outputs)."""


import ml_dtypes
import numpy as np
import pytest
from optional_backends import HAVE, isolated_cache, needs_interp, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileCallError, TileTargetError, TileTypeError

RUNS = target_params("interp", "cpu", "emu:sm_90a")
DTYPES = [T.int4, T.uint4]


pytestmark = pytest.mark.usefixtures("isolated_cache")


def pack(v: np.ndarray) -> np.ndarray:
    """TileLang's packing of logical 4-bit values into uint8 pairs (low nibble first)."""
    u = (v.astype(np.int16) & 0xF).astype(np.uint8)
    return u[..., ::2] | (u[..., 1::2] << 4)


def as_4bit(v: np.ndarray, d) -> np.ndarray:
    """C's conversion of integers `v` to `d`: the low 4 bits, sign-extended for int4."""
    w = np.asarray(v, np.int64) & 0xF
    return np.where(w >= 8, w - 16, w) if d == T.int4 else w


def _mm(d, M, N, K, bm=16, bn=16, bk=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), d), B: T.Tensor((N, K), d), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=64) as (bx, by):
            a_s = T.alloc_shared((bm, bk), d)
            b_s = T.alloc_shared((bn, bk), d)
            c_l = T.alloc_fragment((bm, bn), T.int32)
            T.clear(c_l)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], a_s)
                T.copy(B[bx * bn, ko * bk], b_s)
                T.gemm(a_s, b_s, c_l, transpose_B=True)
            T.copy(c_l, C[by * bm, bx * bn])
    return main


def _cases(leave_out=()) -> list:
    """(target, dtype) params over RUNS x DTYPES, without the (target, dtype name) pairs given."""
    return [pytest.param(p.values[0], d, marks=p.marks, id=f"{p.values[0]}-{d}")
            for p in RUNS for d in DTYPES if (p.values[0], d.name) not in leave_out]


@pytest.mark.filterwarnings("ignore:T.gemm")  # emu: 4-bit operands have no tensor-core path there
# cpu's integer gemm reads int4 and uint4 storage alike (int8 / uint8 of the value): one compile
@pytest.mark.parametrize(("target", "d"), _cases(leave_out={("cpu", "int4")}))
def test_gemm_into_int32_is_exact(target, d):
    kern = tilecore.compile(_mm(d, 32, 16, 64), out_idx=-1, target=target)
    lo, hi = (-8, 8) if d == T.int4 else (0, 16)
    rng = np.random.default_rng(1)
    a, b = rng.integers(lo, hi, (32, 64)), rng.integers(lo, hi, (16, 64))
    a[0], b[0] = hi - 1, lo  # the extreme products, a whole row of them
    want = (a @ b.T).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(kern(pack(a), pack(b).view(np.int8))), want)
    # the unpacked NumPy form (one ml_dtypes value per element) is the same tensor
    np.testing.assert_array_equal(np.asarray(kern(a.astype(d.np), b.astype(d.np))), want)


def _values(d):
    @T.prim_func
    def k(A: T.Tensor((16, 32), d), X: T.Tensor((64,), T.int32), B: T.Tensor((16, 32), T.int32),
          W: T.Tensor((16, 32), T.int32), C: T.Tensor((64,), T.int32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((16, 32), d)
            for i, j in T.Parallel(16, 32):
                B[i, j] = A[i, j]  # the stored value, widened
                s[i, j] = A[i, j] * 3 + 1  # computed in int32, wrapped to 4 bits on the store
            for i, j in T.Parallel(16, 32):
                W[i, j] = T.cast(s[i, j], T.int32) * 100 + A[i, j]
            for i in T.Parallel(64):
                C[i] = T.cast(T.cast(X[i], d), T.int32)
    return k


@pytest.mark.parametrize(("target", "d"), _cases())
def test_every_nibble_pattern_and_wrapping_conversions(target, d):
    kern = tilecore.compile(_values(d), out_idx=[2, 3, 4], target=target)
    packed = np.arange(256, dtype=np.uint8).reshape(16, 16)  # every byte: all pairs of nibbles
    logical = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(16, 32)  # 2j low, 2j+1 high
    a = as_4bit(logical, d)
    x = np.arange(-32, 32, dtype=np.int32) * 5  # both ways past the range, every residue
    want = (a, as_4bit(a * 3 + 1, d) * 100 + a, as_4bit(x, d))
    for arg in (packed, packed.view(np.int8), a.astype(d.np)):
        for got, w in zip(kern(arg, x), want):
            np.testing.assert_array_equal(np.asarray(got), w.astype(np.int32))


@needs_interp
def test_packed_torch_tensors_too():
    torch = pytest.importorskip("torch")
    kern = tilecore.compile(_mm(T.uint4, 16, 16, 32), out_idx=-1, target="interp")
    a = torch.randint(0, 16, (16, 32), dtype=torch.int32)
    b = torch.randint(0, 16, (16, 32), dtype=torch.int32)
    got = kern(torch.from_numpy(pack(a.numpy())), torch.from_numpy(pack(b.numpy())))
    assert torch.equal(torch.as_tensor(np.asarray(got)), a @ b.T)


@needs_interp
def test_a_packed_argument_needs_an_even_last_dimension():
    @T.prim_func
    def odd(A: T.Tensor((4, 7), T.uint4), B: T.Tensor((4, 7), T.int32)):
        with T.Kernel(1, threads=32) as bx:
            for i, j in T.Parallel(4, 7):
                B[i, j] = A[i, j]

    kern = tilecore.compile(odd, out_idx=-1, target="interp")
    with pytest.raises(TileCallError, match=r"A's last dimension is 7: packed uint4 pairs") as e:
        kern(np.zeros((4, 4), np.uint8))
    assert "test_int4.py" in str(e.value) and "ml_dtypes.uint4" in e.value.hint
    v = np.arange(28).reshape(4, 7) % 16  # the one-value-per-element form has no such limit
    np.testing.assert_array_equal(np.asarray(kern(v.astype(ml_dtypes.uint4))), v)


@pytest.mark.parametrize("target", target_params("cuda:sm_90", "hip:gfx942", "metal:apple9", "tvm"))
def test_targets_without_subbyte_storage_refuse_with_the_fix(target):
    for d in DTYPES:
        with pytest.raises(TileTargetError, match=f"does not run sub-byte types: A is {d}") as e:
            tilecore.compile(_mm(d, 16, 16, 32), out_idx=-1, target=target)
        assert "test_int4.py" in str(e.value) and "interp" in e.value.hint
        assert "cpu" in e.value.hint or not HAVE["cpu"]  # the targets that run it
        assert e.value.hint.endswith("int8" if d == T.int4 else "uint8")


def test_subbyte_outputs_are_refused():
    @T.prim_func
    def out4(A: T.Tensor((8,), T.int32), B: T.Tensor((8,), T.uint4)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                B[i] = A[i]
    with pytest.raises(TileTypeError, match="inputs only") as e:
        tilecore.compile(out4, out_idx=-1, target="toy:w4")  # refused before any target's say
    assert "uint8" in e.value.hint


@needs_interp
def test_the_dtypes_and_call_checks():
    torch = pytest.importorskip("torch")
    assert T.int4.bits == 4 and T.int4 == "int4" and T.int4.as_torch() is torch.int8
    assert T.uint4.bits == 4 and T.uint4 == "uint4" and T.uint4.as_torch() is torch.uint8
    assert T.dtype("uint4") is T.uint4 and T.uint4 != T.int4 and T.uint4 != "uint8"
    from tilecore.language import dtypes as tl_dtypes  # TileLang's module path has it too

    assert tl_dtypes.uint4 is T.uint4
    assert T.dtype(torch.uint8) is T.uint8  # the packed storage does not shadow uint8
    for d in DTYPES:
        assert tilecore.dtypes.as_dtype(np.dtype(d.np)) is d
    assert (T.min_value(T.uint4).value, T.max_value(T.uint4).value) == (0, 15)
    kern = tilecore.compile(_mm(T.int4, 16, 16, 32), out_idx=-1, target="interp")
    # a packed (16, 8) int8 argument is a (16, 16) int4 tensor
    with pytest.raises(tilecore.errors.TileCallError, match=r"\(16, 16\), kernel expects \(16, 32\)"):
        kern(np.zeros((16, 16), np.int8), np.zeros((16, 8), np.int8))
