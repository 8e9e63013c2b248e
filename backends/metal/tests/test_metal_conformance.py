"""Conformance of the Metal lowering beyond the plugin's default run.

metal-cpu is a runnable target wherever clang++ is installed, so the conformance plugin already
runs its CI profile (300 derandomized programs, every example, the regressions) on it: measured
at about 0.34 CPU-seconds per program (0.25 s of it clang++), about 100 s for the 300 on one CI
core. `emu` alone resolves to the highest-priority lowering (cuda), so the Metal lowering on the
emulator is checked here, with bfloat (apple9), on the same 300-program profile (about 50 s).
"""

import pytest
from tilecore_conformance.profile import from_options
from tilecore_conformance.suite import check_shard

CI = from_options(None, False, None, None)  # the conformance CI profile: 300 programs, fixed seeds


@pytest.mark.parametrize("shard", range(CI.shards), ids=lambda i: f"s{i}")
def test_generated_programs_on_emu_metal_apple9(shard):
    """One shard (its fixed seed) of the CI profile per test item, so pytest-xdist spreads the
    300 programs over every core."""
    stats, ran = check_shard("emu:metal:apple9", CI, shard)
    print(stats.summary())
    assert ran >= CI.share(shard)
