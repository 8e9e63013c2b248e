"""On a CUDA device: the hand-built mma kernel against NumPy, and every example against interp.

Skipped without a GPU; `tools/gpu_check.sh` runs these on the lent H200.
"""

import numpy as np
import pytest
from cuda_test_util import example_cases, needs_gpu, split
from hand_kernels import atomic_module, mma_module
from tilecore_conformance.regressions import REGRESSIONS
from tilecore_conformance.runner import check_case

import tilecore
from tilecore import dtypes as dt
from tilecore.target import Target

pytestmark = needs_gpu


def _torch(x):
    from tilecore.kernel import _from_numpy, _is_torch

    return x if _is_torch(x) else _from_numpy(np.ascontiguousarray(x)).cuda()


def _numpy(t):
    from tilecore.kernel import _to_numpy

    return _to_numpy(t)


@pytest.mark.parametrize("dtype", [dt.float16, dt.bfloat16])
@pytest.mark.parametrize("n", [16, 45])
def test_hand_mma_kernel_on_gpu(dtype, n):
    import torch
    from tilecore_cuda.plugin import tile_build

    rng = np.random.default_rng(n)
    a = rng.integers(-4, 5, (n, 16)).astype(dtype.np)
    b = rng.integers(-4, 5, (16, 8)).astype(dtype.np)
    art = tile_build(Target("cuda", None), mma_module(dtype))
    ta, tb = _torch(a), _torch(b)
    tc = torch.full((n, 8), float("nan"), device="cuda")
    art.run([ta, tb, tc], {"N": n})
    torch.cuda.synchronize()
    want = a.astype(np.float64) @ b.astype(np.float64)  # small integers: exact in every order
    assert np.array_equal(tc.cpu().numpy(), want.astype(np.float32))


@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "uint16", "float16", "bfloat16",
                                  "float8_e4m3fn", "float8_e5m2", "int32", "int64", "float32"])
def test_atomic_add_every_width(name):
    import torch
    from tilecore_cuda.plugin import tile_build

    d = dt.as_dtype(name)
    x = np.random.default_rng(1).integers(-1, 2, 32).astype(d.np)  # partial sums exact in any order
    y = (np.arange(8) % 4).astype(d.np)  # with x: |partial sums| <= 7, exact even in fp8 e5m2
    art = tile_build(Target("cuda", None), atomic_module(d))
    tx, ty = _torch(x), _torch(y)
    art.run([tx, ty], {})
    torch.cuda.synchronize()
    want = (np.arange(8) % 4 + x.astype(np.int64).reshape(4, 8).sum(0)).astype(d.np)
    assert np.array_equal(_numpy(ty).astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("mod, sizes", example_cases())
def test_example_on_gpu_matches_interp(mod, sizes):
    import torch

    rng = np.random.default_rng(0)
    inputs = mod.make_inputs(rng, **split(mod.make_inputs, sizes))
    func = mod.program(**split(mod.program, sizes))
    want = tilecore.compile(func, out_idx=mod.OUT_IDX, target="interp")(*inputs)
    k = tilecore.compile(func, out_idx=mod.OUT_IDX, target="cuda")
    got = k(*[_torch(x) for x in inputs])
    torch.cuda.synchronize()
    got = got if isinstance(got, list) else [got]
    want = want if isinstance(want, list) else [want]
    for g, w in zip(got, want):
        g = _numpy(g)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), **mod.TOLERANCE)


def test_more_than_48k_shared_memory_and_d128_attention():
    """64 KB of shared memory needs the driver's opt-in (cuFuncSetAttribute)."""
    import flash_attention  # examples/ is on sys.path through cuda_test_util

    sizes = dict(batch=1, heads=2, seq_len=128, dim=128, is_causal=True)
    func = flash_attention.program(**sizes, block_M=64, block_N=64)
    k = tilecore.compile(func, out_idx=[-1], target="cuda")
    assert k.artifact.rendered.smem_bytes > 48 * 1024
    q, kk, v = flash_attention.make_inputs(np.random.default_rng(3), **sizes)
    want = tilecore.compile(func, out_idx=[-1], target="interp")(q, kk, v)
    np.testing.assert_allclose(k(q, kk, v).astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2)


def test_launches_on_the_current_torch_stream():
    """The kernel reads a tensor a long matmul on a side stream produces: it must queue behind it."""
    import elementwise_add
    import torch

    k = tilecore.compile(elementwise_add.program(), out_idx=[-1], target="cuda")
    big = torch.randn(4096, 4096, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            prod = big @ big  # milliseconds of work ahead of the kernel on stream s
        a = prod[0].contiguous()
        c = k(a, a)
    torch.cuda.synchronize()
    assert torch.equal(c, a + a)


def narrow_int_program():
    """int8 sums that leave int8's range before a division: the oracle computes ints wide and
    wraps only on store, so (100 + 100) // 2 is 100, not (-56) // 2."""
    import tilecore.language as T

    @T.prim_func
    def narrow_int(A: T.Tensor((64,), "int8"), B: T.Tensor((64,), "int8"), C: T.Tensor((64,), "int8")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                C[i] = (A[i] + B[i]) // 2 + (A[i] * B[i]) % 7

    return narrow_int


def test_narrow_int_arithmetic_matches_interp():
    rng = np.random.default_rng(5)
    a, b = (rng.integers(-128, 128, 64).astype(np.int8) for _ in range(2))
    want = tilecore.compile(narrow_int_program(), out_idx=[-1], target="interp")(a, b)
    got = tilecore.compile(narrow_int_program(), out_idx=[-1], target="cuda")(a, b)
    assert np.array_equal(got, want)


def rounding_program(dtype: str):
    """float32 -> `dtype` stores, values across the whole range and past it."""
    import tilecore.language as T

    @T.prim_func
    def rounding(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(256):
                B[i] = A[i]

    return rounding


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_narrow_float_rounding_and_overflow_match_interp(dtype):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(256) * np.exp2(rng.integers(-30, 20, 256))).astype(np.float32)
    a[:4] = [1e6, -1e6, np.inf, np.nan]
    want = tilecore.compile(rounding_program(dtype), out_idx=[-1], target="interp")(a)
    got = tilecore.compile(rounding_program(dtype), out_idx=[-1], target="cuda")(a)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_target_arch_other_than_the_device_still_runs():
    """cuda:sm_80 on a newer device: the sm_80 cubin cannot load there, so the device's own arch
    is compiled at first launch (same source)."""
    import elementwise_add

    k = tilecore.compile(elementwise_add.program(), out_idx=[-1], target="cuda:sm_80")
    a, b = elementwise_add.make_inputs(np.random.default_rng(2), n=3000)
    np.testing.assert_array_equal(k(a, b), a + b)


def big_grid_program(dynamic: bool):
    """A (4, M) grid with M past CUDA's 65535 limit on gridDim.y (static or T.dynamic)."""
    import tilecore.language as T

    M = T.dynamic("M") if dynamic else 70001

    @T.prim_func
    def big_grid(A: T.Tensor((M, 128), "float32"), B: T.Tensor((M, 128), "float32")):
        with T.Kernel(4, M, threads=32) as (bx, by):
            for i in T.Parallel(32):
                B[by, bx * 32 + i] = A[by, bx * 32 + i] * 2 + by

    return big_grid


@pytest.mark.parametrize("dynamic", [False, True])
def test_grid_beyond_65535_blocks_in_y(dynamic):
    a = np.random.default_rng(4).standard_normal((70001, 128)).astype(np.float32)
    k = tilecore.compile(big_grid_program(dynamic), out_idx=[-1], target="cuda")
    assert "blockIdx.y" not in k.get_kernel_source()
    np.testing.assert_array_equal(k(a), a * 2 + np.arange(70001, dtype=np.float32)[:, None])


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_wide_integer_reductions_match_interp(name):
    """int32 rows near 2**30 summed into int64 and uint32 values >= 2**31 (issue 19) agree with
    interp exactly: the CUDA code accumulates in the accumulator dtype of tilecore.semantics."""
    out = check_case(REGRESSIONS[name], "cuda", seed=0)
    assert out.status == "pass", out.detail
