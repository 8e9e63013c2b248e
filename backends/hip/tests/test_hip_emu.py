"""The hip lowering executed lane by lane on `emu:hip:<arch>` against the `interp` oracle:
every example, ragged gemm shapes on both MFMA shapes and WMMA, and a corrupted lane map."""

from __future__ import annotations

import dataclasses
import functools
import importlib

import ml_dtypes
import numpy as np
import pytest
from hip_test_util import EXAMPLES, assert_matches, example
from tilecore_hip import intrinsics as I
from tilecore_hip import lowering as L

import tilecore
from tilecore import plugins
from tilecore.hookspec import hookimpl

EMU_ARCHS = ("gfx942", "gfx1100")


def _cases():
    for arch in EMU_ARCHS:
        for name in EXAMPLES:
            mod = importlib.import_module(name)
            # every test size on gfx942 (wave64); the first on gfx1100 (wave32) keeps CI short
            sizes = mod.TEST_SIZES if arch == "gfx942" else mod.TEST_SIZES[:1]
            for i in range(len(sizes)):
                yield pytest.param(arch, name, i, id=f"{arch}-{name}-{i}")


@functools.cache
def _emu_run(arch: str, name: str, size: int):
    """(module, PrimFunc, inputs, emu:hip:`arch`'s outputs, interp's outputs) of example `name`
    at its TEST_SIZES[`size`], once per process: the lane-map mutation test below starts from
    the same gfx942 gemm run as the example test (the emu artifact is not in the compile cache,
    so a second run would lower and emulate it again)."""
    mod = importlib.import_module(name)
    mod, func, args = example(name, mod.TEST_SIZES[size])
    ref = tilecore.jit(func, out_idx=mod.OUT_IDX, target="interp")(*args)
    out = tilecore.jit(func, out_idx=mod.OUT_IDX, target=f"emu:hip:{arch}")(*args)
    return mod, func, args, out, ref


@pytest.mark.parametrize("arch,name,size", list(_cases()))
def test_example_on_emu_hip_matches_interp(arch, name, size):
    mod, _, _, out, ref = _emu_run(arch, name, size)
    assert_matches(mod, out, ref)


def gemm_program(M, N, K, bm, bn, bk, threads, dtype="float16"):
    """C = A @ B, tiled with bounds-checked edge tiles (ragged M, N, K)."""
    import tilecore.language as T

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bm, bx * bn])

    return gemm


# (arch, M, N, K, block m, n, k, threads, instruction expected)
RAGGED = [
    ("gfx942", 100, 72, 40, 32, 32, 16, 256, "v_mfma_f32_16x16x16f16"),
    ("gfx942", 70, 130, 24, 64, 64, 8, 128, "v_mfma_f32_32x32x8f16"),
    ("gfx90a", 33, 65, 56, 64, 64, 8, 128, "v_mfma_f32_32x32x8bf16_1k"),
    ("gfx1100", 50, 40, 40, 32, 32, 16, 128, "v_wmma_f32_16x16x16_f16"),
]


@pytest.mark.parametrize("arch,M,N,K,bm,bn,bk,threads,instr", RAGGED,
                         ids=[f"{r[0]}-{r[1]}x{r[2]}x{r[3]}" for r in RAGGED])
def test_ragged_gemm_on_emu(arch, M, N, K, bm, bn, bk, threads, instr):
    dtype = "bfloat16" if "bf16" in instr else "float16"
    func = gemm_program(M, N, K, bm, bn, bk, threads, dtype)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    np_dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    a, b = a.astype(np_dtype), b.astype(np_dtype)
    kernel = tilecore.jit(func, out_idx=[-1], target=f"emu:hip:{arch}")
    assert instr in kernel.get_ir("lower-threads")
    out = kernel(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3)


class CorruptMfma:
    """Answers hip tensorization with one entry of an MFMA lane map replaced."""

    def __init__(self, operand: str, lane: int, elem: int):
        self.operand, self.lane, self.elem = operand, lane, elem

    @hookimpl(tryfirst=True)
    def tile_gemm_tensorize(self, target, query):
        plan = L.tile_gemm_tensorize(target=target, query=query)
        if not isinstance(plan, tilecore.contract.MmaPlan):
            return plan
        good = plan.mma.operand(self.operand).map
        # the entry now claims its neighbour's cell: one cell twice, one never
        bad = good.with_entry(self.lane, self.elem, good.at(self.lane, (self.elem + 1) % good.elems))
        return dataclasses.replace(plan, mma=I.mfma(plan.mma.shape, query.a_dtype, {self.operand: bad}))


@pytest.mark.parametrize("operand", ["A"])
def test_corrupt_mfma_lane_map_breaks_the_emulated_result(operand):
    mod, func, args, good, ref = _emu_run("gfx942", "gemm", 0)  # example() defaults to TEST_SIZES[0]
    assert_matches(mod, good, ref)
    bad_plugin = CorruptMfma(operand, 37, 1)
    plugins.register(bad_plugin, name="corrupt-mfma")
    try:
        kernel = tilecore.jit(func, out_idx=mod.OUT_IDX, target="emu:hip:gfx942")
        out = kernel(*args)
    finally:
        plugins.unregister("corrupt-mfma")
    got, want = out.astype(np.float32), ref.astype(np.float32)
    bad = np.isnan(got) | ~np.isclose(got, want, rtol=mod.TOLERANCE["rtol"], atol=mod.TOLERANCE["atol"])
    assert bad.any()
