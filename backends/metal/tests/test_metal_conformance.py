"""Conformance of the Metal lowering beyond the plugin's default run.

metal-cpu is a runnable target wherever clang++ is installed, so the conformance plugin already
runs its CI profile (300 derandomized programs, every example, the regressions) on it: measured
at about 0.34 CPU-seconds per program (0.25 s of it clang++), about 100 s for the 300 on one CI
core. `emu` alone resolves to the highest-priority lowering (cuda), so the Metal lowering on the
emulator is checked here, with bfloat (apple9), on the same 300-program profile (about 50 s).
"""

from tilecore_conformance.suite import check_target

EMU_PROGRAMS = 300  # the conformance CI profile


def test_generated_programs_on_emu_metal_apple9():
    stats = check_target("emu:metal:apple9", max_examples=EMU_PROGRAMS, derandomize=True)
    print(stats.summary())
    assert stats.ran >= EMU_PROGRAMS
