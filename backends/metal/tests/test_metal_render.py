"""The MSL the metal backend generates, the lowering facts, the tensorization it chooses and the
programs it refuses (no compiler needed)."""

import importlib

import numpy as np
import pytest
from tilecore_metal.build import find_clang
from tilecore_metal.intrinsics import MATRIX_MAP, simdgroup_mma
from tilecore_metal.lowering import tile_gemm_tensorize, unsupported_reason

import tilecore
import tilecore.language as T
from tilecore import dtypes as dt
from tilecore.contract import Declined, GemmQuery, MmaPlan
from tilecore.errors import TileTargetError
from tilecore.example_protocol import sizes_for
from tilecore.target import Target


def _source(name, target="metal", **over):
    mod = importlib.import_module(name)
    sizes = {**mod.TEST_SIZES[0], **over}
    func = mod.program(**sizes_for(mod.program, sizes))
    return tilecore.compile(func, out_idx=mod.OUT_IDX, target=target).get_kernel_source()


def test_gemm_renders_simdgroup_matrices_and_metal_spellings():
    src = _source("gemm")
    assert "kernel void gemm(device half* A [[buffer(0)]]" in src
    assert "uint3 tilecore_tid [[thread_position_in_threadgroup]]" in src
    assert "uint3 tilecore_bid [[threadgroup_position_in_grid]]" in src
    assert "threadgroup uint4 tilecore_smem_words[" in src  # kernel scope, 16-byte aligned
    assert "threadgroup_barrier(mem_flags::mem_threadgroup);" in src
    assert "simdgroup_load(tc_m, &A_shared[" in src
    assert "simdgroup_multiply_accumulate(tc_d, tc_a, tc_b, tc_c);" in src
    assert "simdgroup_matrix<half, 8, 8> tc_a;" in src and "simdgroup_matrix<float, 8, 8> tc_c;" in src
    for cxx in ("reinterpret_cast", "__syncthreads", "__shared__", "long long", "double", "asm"):
        assert cxx not in src


def test_row_kernels_use_simd_shuffles_and_precise_math():
    src = _source("softmax")
    assert "simd_shuffle_xor(" in src and "metal::precise::exp2(" in src
    assert "expf(" not in src and "exp2f(" not in src
    gelu = _source("gemm_bias_gelu")
    assert "tilecore_erf(" in gelu or "metal::precise::tanh(" in gelu


def test_emu_metal_runs_the_metal_lowering():
    mod = importlib.import_module("gemm")
    func = mod.program(**sizes_for(mod.program, mod.TEST_SIZES[0]))
    k = tilecore.compile(func, out_idx=mod.OUT_IDX, target="emu:metal")
    assert str(k.desc.lowering) == "metal:apple7"
    assert "simdgroup_multiply_accumulate.half.float" in k.get_ir("lower-threads")
    assert "simdgroup_load.half" in k.get_ir("lower-threads")
    assert k.desc.warp_size == 32 and k.desc.facts.shared_memory_bytes == 32 * 1024
    assert k.desc.get("async_copy_sizes") is None  # no cp.async-like pipelines on Metal


def test_metal_cpu_lowers_as_metal_with_bfloat_by_default():
    from tilecore import plugins

    assert plugins.lowering_target(Target("metal-cpu")) == Target("metal", "apple9")


def _query(a="float16", c="float32", m=64, n=64, k=32, threads=128):
    return GemmQuery(dt.BY_NAME[a], dt.BY_NAME[a], dt.BY_NAME[c], m, n, k, False, False, "shared",
                     "shared", threads, 32, "square")


def test_tensorization_answers():
    plan = tile_gemm_tensorize(Target("metal", "apple7"), _query())
    assert isinstance(plan, MmaPlan) and plan.mma == simdgroup_mma(dt.float16)
    assert plan.warps[0] * plan.warps[1] == 4 and len(plan.loaders) == 2
    assert isinstance(tile_gemm_tensorize(Target("metal", "apple7"), _query("float32")), MmaPlan)
    bf = tile_gemm_tensorize(Target("metal", "apple7"), _query("bfloat16"))
    assert isinstance(bf, Declined) and "bfloat16" in bf.reason
    assert isinstance(tile_gemm_tensorize(Target("metal", "apple9"), _query("bfloat16")), MmaPlan)
    assert "int8" in tile_gemm_tensorize(Target("metal"), _query("int8", "int32")).reason
    assert "accumulates in float32" in tile_gemm_tensorize(Target("metal"), _query(c="float16")).reason
    assert "multiple of" in tile_gemm_tensorize(Target("metal"), _query(k=12)).reason
    assert tile_gemm_tensorize(Target("cuda"), _query()) is None
    assert MATRIX_MAP.is_bijective()


def _elementwise(dtype):
    @T.prim_func
    def copy_kernel(A: T.Tensor((64,), dtype), B: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = A[i] + bx

    return copy_kernel


def _atomic(dtype):
    @T.prim_func
    def atomic_kernel(A: T.Tensor((64,), dtype), B: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                T.atomic_add(B[0], A[i])

    return atomic_kernel


@pytest.mark.parametrize("dtype,words", [("float64", "no double"), ("float8_e4m3fn", "8-bit float"),
                                         ("float8_e5m2", "8-bit float")])
def test_dtypes_metal_lacks_are_refused(dtype, words):
    for target in ("metal", "metal:apple9", "metal-cpu"):
        with pytest.raises(TileTargetError, match=words):
            tilecore.compile(_elementwise(dtype), out_idx=[-1], target=target)


def test_bfloat_only_on_apple9_and_no_64_bit_atomics():
    assert "apple9" in unsupported_reason(Target("metal", "apple7"), _elementwise("bfloat16"))
    assert unsupported_reason(Target("metal", "apple9"), _elementwise("bfloat16")) is None
    assert "64-bit atomic" in unsupported_reason(Target("metal", "apple9"), _atomic("int64"))
    assert unsupported_reason(Target("metal", "apple9"), _atomic("float16")) is None


def test_narrow_atomics_render_a_compare_and_swap_loop():
    src = tilecore.compile(_atomic("float16"), out_idx=[-1], target="metal").get_kernel_source()
    assert "atomic_compare_exchange_weak_explicit(word, &expected, desired" in src
    assert "tilecore_atomic_add_float16_global((device atomic_uint*)B, " in src
    f32 = tilecore.compile(_atomic("float32"), out_idx=[-1], target="metal").get_kernel_source()
    assert "atomic_fetch_add_explicit((device atomic_float*)&B[" in f32


@pytest.mark.parametrize("target", ["emu:metal", "metal-cpu"])
@pytest.mark.parametrize("dtype", ["float16", "int8", "float32", "int32"])
def test_atomics_match(target, dtype):
    if target == "metal-cpu" and find_clang() is None:
        pytest.skip("metal-cpu needs clang++")
    a = (np.arange(64) % 3).astype(dtype)
    out = tilecore.jit(_atomic(dtype), out_idx=[-1], target=target)(a)
    assert out[0] == a.astype(np.int64).sum()
