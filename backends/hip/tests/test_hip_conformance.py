"""Conformance of the hip lowering: generated programs on `emu:hip:gfx942` (wave64, MFMA)
against interp, and a sample of generated programs rendered as HIP that clang compiles for
gfx942 and gfx1100 (CI has no AMD GPU: executing them is the emulator's part)."""

from __future__ import annotations

import pytest
from hip_test_util import needs_clang
from hypothesis import HealthCheck, given, settings
from tilecore_hip import build

import tilecore
from tilecore.errors import TileTargetError

suite = pytest.importorskip("tilecore_conformance.suite")
from tilecore_conformance.generate import cases  # noqa: E402
from tilecore_conformance.loader import prim_func  # noqa: E402
from tilecore_conformance.runner import unsupported  # noqa: E402

profile = pytest.importorskip("tilecore_conformance.profile")
CI = profile.from_options(None, False, None, None)  # the CI profile: 300 programs, fixed seeds
COMPILED: dict[str, int] = {"compiled": 0, "refused": 0}


@pytest.mark.parametrize("shard", range(CI.shards), ids=lambda i: f"s{i}")
def test_generated_programs_on_emu_hip_match_interp(shard):
    """The CI profile's programs on emu:hip:gfx942, one shard (its fixed seed) per test item so
    pytest-xdist spreads the 300 over every core (about 140 CPU-s in all)."""
    stats, ran = suite.check_shard("emu:hip:gfx942", CI, shard)
    assert ran >= CI.share(shard) * 0.9, stats.summary()
    assert not stats.dtype_skips, stats.summary()


@needs_clang
@settings(max_examples=20, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(cases())
def test_generated_programs_compile_with_clang(case):
    """Each program compiles for gfx942 (wave64) or gfx1100 (wave32), chosen by its key, unless
    the renderer refuses it with a TileTargetError naming the documented limit (float64
    functions needing ocml)."""
    arch = ("gfx942", "gfx1100")[int(case.key, 16) % 2]
    if unsupported(case, f"hip:{arch}"):
        return
    try:
        kernel = tilecore.compile(prim_func(case), target=f"hip:{arch}")
    except TileTargetError as e:
        assert "ocml" in str(e), str(e)
        COMPILED["refused"] += 1
        return
    build.compile_hip(kernel.get_kernel_source(), arch, name=f"case_{case.key}")
    COMPILED["compiled"] += 1


@needs_clang
def test_most_sampled_programs_compiled():
    """The refusals above stay exceptions: most of the sample reached clang."""
    if COMPILED["compiled"] + COMPILED["refused"] == 0:
        pytest.skip("the compile sample did not run in this session")
    assert COMPILED["compiled"] >= 2 * COMPILED["refused"], COMPILED
