"""The conformance suite on the toy targets: generated programs lowered by the core, executed by
its emulator and compared with interp. Runs only where tilecore_conformance and tilecore_interp
are installed (the core alone has no oracle to compare generated programs with; the examples'
NumPy references in test_examples.py cover that case)."""

import pytest

pytest.importorskip("tilecore_interp")
suite = pytest.importorskip("tilecore_conformance.suite")

PROGRAMS = 50


@pytest.mark.parametrize("target", ["toy:w4", "toy:w64"])
def test_generated_programs_on_toy_match_interp(target):
    stats = suite.check_target(target, max_examples=PROGRAMS)
    assert stats.ran >= PROGRAMS * 0.9, stats.summary()  # the toy declines nothing
    assert not stats.dtype_skips, stats.summary()
