"""The hip target's facts, lane maps and tensorization answers (no compiler needed)."""

from __future__ import annotations

import pytest
from tilecore_hip import intrinsics as I
from tilecore_hip.lowering import plan_for

from tilecore import dtypes as dt
from tilecore import plugins
from tilecore.contract import Declined, GemmQuery, MmaPlan
from tilecore.target import Target


@pytest.mark.parametrize("spec,wave,family", [("hip", 64, "mfma"), ("hip:gfx90a", 64, "mfma"),
                                              ("hip:gfx942", 64, "mfma"), ("hip:gfx1100", 32, "wmma")])
def test_facts(spec, wave, family):
    t = plugins.resolve(spec)
    f = plugins.facts(t)
    assert f.lowers_to_threads and f.warp_size == wave
    assert f.shared_memory_bytes == 64 * 1024 and f.vector_bytes == 16
    assert f.get("shared_banks") == 32 and f.get("shared_bank_bytes") == 4
    assert f.get("matrix_core") == family
    assert not f.get("async_copy_sizes")  # no asynchronous global->LDS pipeline on hip
    if spec == "hip":
        assert (t.arch or "gfx942") == "gfx942"


def test_emu_short_forms_name_the_hip_lowering():
    from tilecore_emu.plugin import real_target

    assert real_target(Target("emu", "hip:gfx942")) == Target("hip", "gfx942")
    assert real_target(Target("emu", "gfx1100")) == Target("hip", "gfx1100")


def test_mfma_maps_hold_every_cell_once():
    for shape in I.MFMA_SHAPES:
        for name, lmap in I.mfma_maps(shape).items():
            assert lmap.is_bijective(), (shape, name)


def test_mfma_32x32x8_entries_from_the_isa_tables():
    """Spot values of the CDNA3 ISA / matrix instruction calculator layout, written out."""
    m = I.mfma_maps((32, 32, 8))
    assert m["A"].at(0, 0) == (0, 0) and m["A"].at(33, 2) == (1, 6) and m["A"].at(31, 3) == (31, 3)
    assert m["B"].at(0, 1) == (1, 0) and m["B"].at(45, 0) == (4, 13)
    # D: lane 0 holds rows 0-3, 8-11, 16-19, 24-27 of column 0; lane 32 rows 4-7, 12-15, ...
    rows = [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]
    assert [m["C"].at(0, e)[0] for e in range(16)] == rows
    assert [m["C"].at(32, e)[0] for e in range(4)] == [4, 5, 6, 7] and m["C"].at(40, 5) == (13, 8)


def test_mfma_16x16x16_entries_from_the_isa_tables():
    m = I.mfma_maps((16, 16, 16))
    assert m["A"].at(17, 1) == (1, 5) and m["A"].at(63, 3) == (15, 15)
    assert m["B"].at(20, 2) == (6, 4)
    assert [m["C"].at(48, e) for e in range(4)] == [(12, 0), (13, 0), (14, 0), (15, 0)]


def test_wmma_maps_replicate_a_and_b_over_half_waves():
    m = I.wmma_maps()
    assert m["C"].is_bijective()
    for name in ("A", "B"):
        lmap = m[name]
        for lane in range(16):
            assert [lmap.at(lane, e) for e in range(16)] == [lmap.at(lane + 16, e) for e in range(16)]
        assert len(set(lmap.table)) == 256  # every cell, each held by two lanes
    assert m["C"].at(0, 3) == (6, 0) and m["C"].at(17, 3) == (7, 1)


def test_builtin_names():
    assert I.builtin_name(I.mfma((32, 32, 8), dt.float16)) == "__builtin_amdgcn_mfma_f32_32x32x8f16"
    assert I.builtin_name(I.mfma((16, 16, 16), dt.bfloat16)) == "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k"
    assert I.builtin_name(I.wmma(dt.bfloat16)) == "__builtin_amdgcn_wmma_f32_16x16x16_bf16_w32"


def _q(m, n, k, threads, ws, a=dt.float16, c=dt.float32):
    return GemmQuery(a, a, c, m, n, k, False, False, "shared", "shared", threads, ws, "square")


def test_tensorize_prefers_32x32x8_then_16x16x16():
    t942, t1100 = Target("hip", "gfx942"), Target("hip", "gfx1100")
    p = plan_for(t942, _q(128, 128, 32, 256, 64))
    assert isinstance(p, MmaPlan) and p.mma.shape == (32, 32, 8) and p.warps == (2, 2)
    p = plan_for(t942, _q(32, 32, 32, 256, 64))  # 4 waves cannot each own a 32x32 tile
    assert p.mma.shape == (16, 16, 16) and p.mma.name == "v_mfma_f32_16x16x16f16"
    p = plan_for(t942, _q(64, 64, 8, 128, 64, a=dt.bfloat16))  # k = 8: only 32x32x8
    assert p.mma.name == "v_mfma_f32_32x32x8bf16_1k"
    p = plan_for(t1100, _q(64, 64, 32, 128, 32))
    assert p.mma.name == "v_wmma_f32_16x16x16_f16" and p.mma.lanes == 32


@pytest.mark.parametrize("query,needle", [
    (_q(64, 64, 32, 128, 64, a=dt.float32), "float16 or bfloat16"),
    (_q(64, 64, 32, 128, 64, c=dt.float16), "accumulate in float32"),
    (_q(64, 64, 32, 128, 64, a=dt.float8_e4m3fn), "FNUZ"),
    (_q(64, 64, 12, 128, 64), "instruction tiles"),
    (_q(16, 16, 16, 256, 64), "instruction tiles"),
])
def test_tensorize_declines_with_reason(query, needle):
    p = plan_for(Target("hip", "gfx942"), query)
    assert isinstance(p, Declined) and needle in p.reason
