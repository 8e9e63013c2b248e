"""TileLang-port additions (issue 14): T.copy of regions with different extents (TileLang's
rule), loops reusing an enclosing index's name, the builder-style and eager autotuners, the
profiler's torch inputs and TileLang's timing backends, and the carver / contrib.nvcc names."""

import importlib.util
import warnings

import numpy as np
import pytest
from optional_backends import isolated_cache, needs_interp, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileConfigWarning, TileError, TileShapeError, TileTargetError

HAVE_TORCH = importlib.util.find_spec("torch") is not None
TARGETS = target_params("interp", "cpu", "emu:sm_80")


pytestmark = pytest.mark.usefixtures("isolated_cache")


def _widen_and_shadow():
    """Rows 0..valid-1 of A's block go into a (16, 8) tile whose other rows are masked: the
    source region (valid rows) is smaller than the tile, as in TileLang's split-KV decoding;
    the inner loops reuse the outer loop's name `i`."""
    valid = 12

    @T.prim_func
    def k(A: T.Tensor((32, 8), "float32"), B: T.Tensor((2, 16, 8), "float32")):
        with T.Kernel(2, threads=32) as bx:
            s = T.alloc_shared((16, 8), "float32")
            f = T.alloc_fragment((16, 8), "float32")
            T.copy(A[bx * 16: bx * 16 + valid, :], s)  # 12 rows named, 16 copied (TileLang)
            for i in T.serial(2):
                for i, j in T.Parallel(16, 8):
                    f[i, j] = T.if_then_else(i < valid, s[i, j] * 2.0, 0.0)
                T.copy(f, B[bx, :, :])
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_copy_widens_a_smaller_source_region_and_loops_may_shadow(target):
    from tilecore.language import copy_extents

    copy_extents._told.clear()  # said once per line: each build here says it again
    with pytest.warns(TileConfigWarning, match="TileLang's rule"):
        func = _widen_and_shadow()
    kern = tilecore.compile(func, out_idx=[1], target=target)
    a = np.arange(32 * 8, dtype=np.float32).reshape(32, 8)
    want = np.zeros((2, 16, 8), np.float32)
    for b in range(2):
        want[b, :12] = a[b * 16: b * 16 + 12] * 2
    np.testing.assert_array_equal(np.asarray(kern(a)), want)


def test_copy_refuses_a_destination_smaller_than_the_source():
    with pytest.raises(TileShapeError, match="extents do not match") as e:
        @T.prim_func
        def k(A: T.Tensor((32, 8), "float32")):
            with T.Kernel(1, threads=32) as bx:
                s = T.alloc_shared((16, 8), "float32")
                f = T.alloc_fragment((8, 8), "float32")
                T.copy(A[0:16, :], s)
                T.copy(s, f)
    assert "test_tilelang_port_surface.py" in str(e.value)


def _scaled(N, block=16, scale=1.0):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] * scale
    return main


@needs_interp
def test_builder_autotuner_runs_the_decorators_search():
    from tilecore.autotuner import AutoTuner

    def kernel(block=None, scale=None):
        return _scaled(64, block, scale)

    configs = [dict(block=8, scale=1.0), dict(block=16, scale=3.0), dict(block=32, scale=1.0)]
    res = (AutoTuner.from_kernel(kernel=kernel, configs=configs)
           .set_compile_args(out_idx=[-1], target="interp")
           .set_profile_args(ref_prog=lambda a: a * 1.0, supply_type=tilecore.TensorSupplyType.Integer,
                             warmup=1, rep=2)
           .run(warmup=1, rep=2))
    assert res.config["scale"] == 1.0 and res.latency > 0
    bad = [r for r in res.results if r.config["scale"] == 3.0][0]
    assert bad.latency is None and "wrong result" in bad.error
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(res.kernel(a)), a)
    with pytest.warns(TileConfigWarning, match="every config"):
        AutoTuner.from_kernel(kernel=kernel, configs=configs[:1]).set_compile_args(
            out_idx=[-1], target="interp").run(warmup=1, rep=1, early_stop=True)
    with pytest.raises(TileError, match="unknown keyword"):
        AutoTuner.from_kernel(kernel=kernel, configs=configs).run(no_such=1)


@needs_interp
def test_per_config_pass_configs_reach_the_compile():
    key = tilecore.PassConfigKey.TL_ENABLE_FAST_MATH
    configs = [dict(block=16, pass_configs={key: True}), dict(block=32, pass_configs={key: False})]
    tuner = tilecore.autotune(configs=configs, warmup=1, rep=1, cache_results=False)(
        tilecore.jit(_scaled, out_idx=[-1], target="interp"))
    k = tuner(64)
    assert tuner.last_result.config in configs
    assert k.desc.options.fast_math == tuner.last_result.config["pass_configs"][key]


@needs_interp
def test_autotune_over_an_eager_kernel():
    @tilecore.autotune(configs=[dict(block=8), dict(block=32)], warmup=1, rep=1)
    @tilecore.jit(target="interp")
    def double(A, block=16):
        N = T.const("N")
        A: T.Tensor((N,), "float32")
        C = T.empty((N,), "float32")
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] * 2.0
        return C

    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(double(a)), a * 2)
    assert double.last_result.config["block"] in (8, 32)
    k = double.compile(N=64)
    assert k.config["block"] in (8, 32)
    k16 = double.compile(N=64, block=16)  # every tuned value given: no search
    np.testing.assert_array_equal(np.asarray(k16(a)), a * 2)


@needs_interp
@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
def test_profiler_gives_torch_tensors_and_accepts_tilelangs_backends():
    import torch

    k = tilecore.compile(_scaled(32, 16, 2.0), out_idx=[-1], target="interp")
    prof = k.get_profiler(tensor_supply_type=tilecore.TensorSupplyType.Integer)
    (x,) = prof.supply_inputs()
    assert isinstance(x, torch.Tensor) and x.device.type == "cpu"
    prof.assert_allclose(lambda a: a.mul(2.0), atol=0, rtol=0)  # a torch-only reference
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for backend in ("event", "cupti", "cudagraph"):
            assert prof.do_bench(backend=backend, warmup=1, rep=1) > 0
    assert any("wall clock" in str(m.message) for m in w)
    with pytest.raises(TileError, match="backend"):
        prof.do_bench(backend="nvtx")


def test_carver_and_nvcc_names():
    from tilecore.carver.arch import CUDA, driver
    from tilecore.carver.roller.rasterization import NoRasterization, Rasterization
    from tilecore.carver.template import MatmulTemplate
    from tilecore.contrib import nvcc

    assert nvcc.get_target_compute_version("cuda:sm_90a") == "9.0"
    assert nvcc.get_target_compute_version("cuda -arch=sm_120") == "12.0"
    assert nvcc.parse_compute_version("8.6") == (8, 6)
    assert issubclass(NoRasterization, Rasterization)
    t = MatmulTemplate(M=64, N=64, K=64).with_arch(None)
    with pytest.raises(TileError, match="no roller") as e:
        t.recommend_hints(topk=4)
    assert "autotune" in e.value.hint
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if not gpu:
        with pytest.raises(TileTargetError):
            driver.get_num_sms()
        with pytest.raises(TileTargetError):
            CUDA("cuda")


@needs_interp
def test_set_autotune_inputs_are_the_search_inputs():
    from tilecore.autotuner import set_autotune_inputs

    seen = []

    def ref(a):
        seen.append(np.asarray(a).copy())
        return a * 1.0

    tuner = tilecore.autotune(configs=[dict(block=16)], warmup=1, rep=1, ref_prog=ref,
                              cache_results=False)(tilecore.jit(_scaled, out_idx=[-1], target="interp"))
    a = np.full(64, 7.0, np.float32)
    with set_autotune_inputs(a):
        tuner(64)
    assert seen and np.array_equal(seen[0], a)


def _persistent(m=3, n=5, sms=4, group=2):
    @T.prim_func
    def k(Out: T.Tensor((3, 5), "int32")):
        with T.Kernel(sms, threads=32) as bid:
            for bx, by in T.Persistent([m, n], sms, bid, group):
                Out[bx, by] = Out[bx, by] + bid * 100 + bx * 10 + by + 1
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_persistent_visits_every_tile_once(target):
    kern = tilecore.compile(_persistent(), target=target)
    out = np.zeros((3, 5), np.int32)
    kern(out)
    tiles = out % 100 - 1
    np.testing.assert_array_equal(tiles, np.add.outer(np.arange(3) * 10, np.arange(5)))
    owners = out // 100
    assert set(np.unique(owners)) <= set(range(4)) and len(np.unique(owners)) == 4


def test_persistent_binds_one_name_per_dimension():
    with pytest.raises(TileError, match="binds 1 name") as e:
        @T.prim_func
        def k(Out: T.Tensor((3, 5), "int32")):
            with T.Kernel(4, threads=32) as bid:
                for t in T.Persistent([3, 5], 4, bid):
                    Out[0, 0] = t
    assert "test_tilelang_port_surface.py" in str(e.value) and e.value.hint


def _reinterpret_kernel(n=65536):
    @T.prim_func
    def k(A: T.Tensor((n,), "uint16"), B: T.Tensor((n,), "float16"), C: T.Tensor((n,), "bfloat16"),
          D: T.Tensor((256,), "uint8"), E: T.Tensor((256,), "int8")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(n):
                B[i] = T.reinterpret(A[i], "float16")
                C[i] = T.reinterpret("bfloat16", A[i])  # either argument order
            for i in T.Parallel(256):
                E[i] = T.reinterpret(D[i], T.int8)
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_reinterpret_reads_every_bit_pattern_exactly(target):
    import ml_dtypes

    # every pattern on interp; on the (slower) emulator every sign/exponent pair with varied
    # mantissas (subnormals, infinities and NaNs included)
    n = 65536 if target == "interp" else 2048
    a = np.arange(65536, dtype=np.uint16) if n == 65536 else \
        (np.arange(n, dtype=np.uint32) * 32 + np.arange(n) * 7 % 32).astype(np.uint16)
    d = np.arange(256, dtype=np.uint8)
    b, c, e = (np.asarray(x) for x in
               tilecore.compile(_reinterpret_kernel(n), out_idx=[1, 2, 4], target=target)(a, d))
    for got, want in ((b, a.view(np.float16)), (c, a.view(ml_dtypes.bfloat16))):
        got32, want32 = got.astype(np.float32), want.astype(np.float32)
        same = (got.view(np.uint16) == a) | (np.isnan(got32) & np.isnan(want32))
        assert same.all(), int((~same).sum())
    np.testing.assert_array_equal(e, d.view(np.int8))


def test_reinterpret_refuses_other_widths_and_fp8_bits():
    with pytest.raises(TileError, match="widths differ") as e:
        @T.prim_func
        def k(A: T.Tensor((4,), "uint8"), B: T.Tensor((4,), "float16")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(4):
                    B[i] = T.reinterpret(A[i], "float16")
    assert "test_tilelang_port_surface.py" in str(e.value)
    with pytest.raises(TileError, match="not provided"):
        @T.prim_func
        def k2(A: T.Tensor((4,), "float8_e4m3"), B: T.Tensor((4,), "uint8")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(4):
                    B[i] = T.reinterpret(A[i], "uint8")


@needs_interp
def test_tvm_names_alloc_buffer_and_astype():
    from tilecore.tvm import DataType, tirx

    assert DataType("float16").bits == 16 and DataType(T.int8).lanes == 1
    assert DataType("bfloat16") == "bfloat16" and str(DataType("uint32")) == "uint32"
    assert tilecore.DataType is DataType

    @T.prim_func
    def k(A: T.Tensor((8,), "uint8"), B: T.Tensor((8,), "int8"), C: T.Tensor((8,), "float32")):
        S = T.alloc_buffer((8,), "float32")  # global scratch (TileLang's default scope)
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_buffer((8,), "uint8", scope="shared")
            T.copy(A, s)
            for i in T.Parallel(8):
                v = (s[i] >> tirx.const(4, T.uint8)) & tirx.const(15, "uint8")
                B[i] = tirx.reinterpret(T.int8, v.astype(T.uint8) << tirx.const(4, T.uint8))
                S[i] = tirx.Select(v > tirx.const(7, "uint8"), tirx.Cast("float32", v), 0.0)
            for i in T.Parallel(8):
                C[i] = S[i]

    a = np.array([0x00, 0x10, 0x70, 0x80, 0xF0, 0x3C, 0x9A, 0xFF], np.uint8)
    b, c = tilecore.compile(k, out_idx=[1, 2], target="interp")(a)
    hi = a >> 4
    np.testing.assert_array_equal(np.asarray(b), (hi << 4).astype(np.uint8).view(np.int8))
    np.testing.assert_array_equal(np.asarray(c), np.where(hi > 7, hi, 0).astype(np.float32))
    with pytest.raises(AttributeError, match="tilecore.tvm"):
        tilecore.tvm.runtime  # noqa: B018 - the missing name is the point


def _private_var():
    @T.prim_func
    def k(A: T.Tensor((16, 8), "float32"), B: T.Tensor((16, 8), "float32")):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((16, 8), "float32")
            T.copy(A, f)
            for i, j in T.Parallel(16, 8):
                relu = T.alloc_var("float32")  # one per iteration, as in TileLang
                if f[i, j] > 0:
                    relu = 1.0
                else:
                    relu = 0.0
                f[i, j] = f[i, j] * relu + relu
            T.copy(f, B)
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_alloc_var_inside_parallel_is_private_to_each_iteration(target):
    a = (np.arange(128, dtype=np.float32).reshape(16, 8) - 60.0)
    b = tilecore.compile(_private_var(), out_idx=[1], target=target)(a)
    np.testing.assert_array_equal(np.asarray(b), np.where(a > 0, a + 1, 0.0).astype(np.float32))


def _views():
    @T.prim_func
    def k(A: T.Tensor((8, 6), "float32"), S: T.Tensor((8,), "float32"), B: T.Tensor((8, 6), "float32")):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((8, 6), "float32")
            g = T.alloc_fragment((8, 6), "float32")
            s = T.alloc_fragment((8, 1), "float32")
            T.copy(A, f)
            v = T.reshape(f, (8, 1, 6))      # a unit dimension added: also a tile operand
            w = T.reshape(g, (4, 2, 3, 2))   # regrouped: element by element
            for i, o, h in T.Parallel(8, 1, 6):
                v[i, o, h] = v[i, o, h] * 2.0
            T.reduce_sum(v, s, dim=-1)
            for a, b, c, d in T.Parallel(4, 2, 3, 2):
                w[a, b, c, d] = f[a * 2 + b, c * 2 + d] + 1.0
            T.copy(s, S)
            T.copy(g, B)
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_reshape_views(target):
    a = np.arange(48, dtype=np.float32).reshape(8, 6)
    s, b = (np.asarray(x) for x in tilecore.compile(_views(), out_idx=[1, 2], target=target)(a))
    np.testing.assert_array_equal(s, (2 * a).sum(axis=1))
    np.testing.assert_array_equal(b, 2 * a + 1)


def test_views_refuse_regrouped_tile_operands():
    # (views with another dtype: test_tilelang_dtype_views.py)
    with pytest.raises(TileError, match="regroups") as e:
        @T.prim_func
        def k2(A: T.Tensor((8, 6), "float32")):
            with T.Kernel(1, threads=32) as bx:
                f = T.alloc_fragment((8, 6), "float32")
                T.copy(A[0:2, 0:6], T.reshape(f, (4, 12))[0:1, 0:12])  # a slice of a regrouping view
    assert "test_tilelang_port_surface.py" in str(e.value)
    with pytest.raises(TileError, match="same number of elements"):
        @T.prim_func
        def k3(A: T.Tensor((8, 6), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.reshape(T.alloc_fragment((8, 6), "float32"), (5, 10))


@needs_interp
def test_profiler_supplies_follow_tilelangs_distributions():
    @T.prim_func
    def k(A: T.Tensor((4096,), "float32"), B: T.Tensor((4096,), "int8"), C: T.Tensor((4096,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(4096):
                C[i] = A[i] + B[i]

    kern = tilecore.compile(k, out_idx=[2], target="interp")
    auto = [np.asarray(x, dtype=np.float64) for x in kern.get_profiler("auto").supply_inputs()]
    assert auto[0].min() >= -1 and auto[0].max() < 1 and abs(auto[0].mean()) < 0.1
    assert set(np.unique(auto[1])) <= {-2, -1, 0, 1, 2}
    normal = [np.asarray(x, dtype=np.float64) for x in kern.get_profiler("normal").supply_inputs()]
    assert abs(normal[0].mean() + 1.0) < 0.1 and abs(normal[0].std() - 1.0) < 0.1
    assert (normal[1] == 1).all()  # int8 under Normal: ones, as in TileLang
