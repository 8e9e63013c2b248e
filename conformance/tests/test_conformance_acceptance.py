"""Acceptance: deliberately broken backends are caught, and the reported program is short."""

import subprocess
import sys

import pytest
from tilecore_conformance import suite
from tilecore_conformance.report import ConformanceFailure
from tilecore_conformance.suite import check_target


@pytest.fixture(autouse=True)
def _short_shrink(monkeypatch):
    """Hypothesis shrinks each planted bug for at most 15 s instead of the suite's 60: these
    bugs shrink to <= 16 lines within a few CPU-seconds (the simple-family search finishes the
    job), and the full budget was a minute of CI per test on a quiet machine."""
    monkeypatch.setattr(suite, "SHRINK_BUDGET_S", 15.0)


def _caught(target: str) -> ConformanceFailure:
    with pytest.raises(ConformanceFailure) as info:
        check_target(target, max_examples=300)
    return info.value


def _reruns_clean_on_interp(f: ConformanceFailure) -> None:
    # The written file is a runnable program: on the oracle itself it passes.
    r = subprocess.run([sys.executable, str(f.path), "interp"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "interp: pass" in r.stdout


def test_exp2_one_ulp_off_is_caught(broken_exp2):
    f = _caught(broken_exp2)
    print(f)
    text = f.path.read_text()
    assert "disagrees with interp" in str(f) and str(f.path) in str(f)
    assert "T.exp2(" in text and "exact comparison" in text
    assert f.case.lines <= 16, f"minimal program has {f.case.lines} kernel lines:\n{text}"
    _reruns_clean_on_interp(f)


def test_gemm_dropping_k_tail_is_caught(broken_gemm):
    f = _caught(broken_gemm)
    print(f)
    text = f.path.read_text()
    assert "T.gemm(" in text
    assert f.case.lines <= 16, f"minimal program has {f.case.lines} kernel lines:\n{text}"
    _reruns_clean_on_interp(f)
