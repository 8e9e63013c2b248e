"""The emulator computes what tilecore.semantics defines, for values the generator never makes:
reductions and cumsum of int32 near 2**30 and uint32 >= 2**31 (issue 19: the thread lowering
accumulated below 64 bits) and comparisons with constants outside the compared type (issue 16),
checked against NumPy and against interp."""

from __future__ import annotations

import numpy as np
import pytest
from tilecore_conformance.regressions import REGRESSIONS
from tilecore_conformance.runner import check_case, execute

TARGET = "emu:sm_80"


def _numpy_reference(name: str, a: np.ndarray, out_dtype) -> np.ndarray:
    x = a.astype(np.int64)
    if name.startswith("negative_bound"):  # values compare as values: never <= -1, always > -3
        r = np.where(~(x <= -1), 1 + (x > -3), 5)
    elif name.startswith("compare_constants"):  # regressions.COMPARE_CONSTANTS, on int64 values
        r = ((x < -1) * 1 + (x >= -2) * 2 + (x == -1) * 4 + (-1 < x) * 8 + (x != -2) * 16
             + (x <= 4294967295) * 32 + (x > -2147483649) * 64 + (x == 4294967295) * 128)
    elif name.startswith("cumsum"):
        r = np.cumsum(x, axis=1)
    elif name.startswith("abssum"):
        r = np.abs(x).sum(axis=1)
    elif name.startswith("sum"):
        r = x.sum(axis=1)
    elif name.startswith(("max", "absmax")):
        r = np.abs(x).max(axis=1)
    else:
        r = x.min(axis=1)
    return r.astype(out_dtype)  # wraps mod 2**32 for the uint32 sums, as C does


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_wide_integer_reductions_match_numpy_and_interp(name):
    case = REGRESSIONS[name]
    a, out = execute(case, TARGET, seed=1)
    np.testing.assert_array_equal(out, _numpy_reference(name, a, out.dtype))
    assert check_case(case, TARGET, seed=2).status == "pass"


def test_int32_sum_into_int64_needs_more_than_32_bits():
    """The issue's case: the row sums exceed int32, so a 32-bit accumulator cannot give them."""
    a, out = execute(REGRESSIONS["sum_int32_to_int64"], TARGET, seed=1)
    assert out.dtype == np.int64 and np.all(out > 2**37)
    np.testing.assert_array_equal(out, a.astype(np.int64).sum(axis=1))
