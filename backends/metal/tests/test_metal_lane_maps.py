"""The simdgroup_matrix lane map is one table: the lowering and emu:metal read it from the
intrinsic's declaration, the shim implements it in C++. A plan whose map differs from the
shim's is caught: a consistent swap keeps emu:metal right (it executes the declared table) but
breaks metal-cpu (the shim holds the real one); a duplicated entry breaks both."""

import importlib

import numpy as np
import pytest
from metal_test_util import needs_clang
from tilecore_metal import lowering
from tilecore_metal.intrinsics import MATRIX_MAP, simdgroup_mma

import tilecore
from tilecore import dtypes as dt
from tilecore import plugins
from tilecore.contract import MmaPlan
from tilecore.example_protocol import sizes_for
from tilecore.hookspec import hookimpl


class _Variant:
    """Answers tile_gemm_tensorize first, with the real plan's mma maps replaced."""

    def __init__(self, **maps):
        self.maps = maps

    @hookimpl(tryfirst=True)
    def tile_gemm_tensorize(self, target, query):
        plan = lowering.tile_gemm_tensorize(target, query)
        if not isinstance(plan, MmaPlan):
            return plan
        # no loaders: operands are gathered element by element through the (changed) map
        return MmaPlan(mma=simdgroup_mma(query.a_dtype, **self.maps), warps=plan.warps)


def _run(target, variant):
    mod = importlib.import_module("gemm")
    sizes = mod.TEST_SIZES[0]
    args = mod.make_inputs(np.random.default_rng(3), **sizes_for(mod.make_inputs, sizes))
    plugins.register(variant, name="metal-variant")
    try:
        kernel = tilecore.jit(mod.program(**sizes_for(mod.program, sizes)), out_idx=mod.OUT_IDX,
                              target=target)
        out = kernel(*args).astype(np.float32)
    finally:
        plugins.unregister("metal-variant")
    ref = mod.reference(*args).astype(np.float32)
    return np.allclose(out, ref, **mod.TOLERANCE)


def _swapped():
    a, b = (0, 0), (5, 1)
    return MATRIX_MAP.with_entry(*a, MATRIX_MAP.at(*b)).with_entry(*b, MATRIX_MAP.at(*a))


def test_a_consistent_swap_is_invisible_to_the_emulator():
    assert _run("emu:metal", _Variant(a_map=_swapped()))


@needs_clang
def test_a_map_the_shim_does_not_hold_breaks_metal_cpu():
    assert _run("metal-cpu", _Variant())  # the real maps, element-gathered operands: right
    assert not _run("metal-cpu", _Variant(a_map=_swapped()))


@pytest.mark.parametrize("operand", ["a_map", "c_map"])
def test_a_duplicated_entry_breaks_the_emulator(operand):
    bad = MATRIX_MAP.with_entry(3, 1, MATRIX_MAP.at(4, 0))
    assert not bad.is_bijective()
    assert not _run("emu:metal", _Variant(**{operand: bad}))
    assert simdgroup_mma(dt.float16) != simdgroup_mma(dt.float16, **{operand: bad})
