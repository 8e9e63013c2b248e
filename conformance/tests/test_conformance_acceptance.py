"""Acceptance: deliberately broken backends are caught, and the reported program is short."""

import subprocess
import sys

import pytest
from tilecore_conformance.report import ConformanceFailure
from tilecore_conformance.suite import check_target


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
