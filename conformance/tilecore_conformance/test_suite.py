"""The conformance suite: generated programs and the examples corpus on every selected target.

Collected by `pytest conformance` in the tilecore tree, and added by the plugin to any run
given `--tile-target` (so `pytest --tile-target=cpu` works in a backend's own tree).
"""

from __future__ import annotations

import pytest

from .corpus import check_example
from .regressions import REGRESSIONS
from .runner import check_case
from .suite import check_target


def test_generated_programs(tile_target, tile_examples, request):
    """Hypothesis-generated programs agree with interp (300 per target in the CI profile, or the
    target's declared `TargetInfo.ci_programs`; --tile-examples overrides both)."""
    n, derandomize = tile_examples
    if request.config.getoption("tile_examples", None) is None:
        from tilecore import plugins
        from tilecore.target import Target

        info = plugins.target_infos().get(Target.parse(tile_target).kind)
        if info is not None and info.ci_programs is not None:
            n = info.ci_programs
    stats = check_target(tile_target, max_examples=n, derandomize=derandomize)
    print(stats.summary())
    if stats.ran == 0 and stats.dtype_skips:
        pytest.skip(f"{tile_target} supports none of the generated dtypes: {stats.dtype_skips}")
    assert stats.ran >= n, f"only {stats.ran} of {n} programs could run on {tile_target}"


def test_corpus_example(tile_target, tile_example):
    """Every kernel in examples/ agrees with interp at each of its test sizes."""
    path, sizes = tile_example
    out = check_example(path, sizes, tile_target)
    if out.status == "skip":
        pytest.skip(f"{tile_target} declares it unsupported: {out.detail}")
    assert out.ok, f"tilecore conformance ({out.status}): {out.detail}"


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression_program(tile_target, name):
    """Programs for drifts found once (values far from zero) agree with interp exactly."""
    out = check_case(REGRESSIONS[name], tile_target, seed=0)
    if out.status == "skip":
        pytest.skip(f"{tile_target} declares it unsupported: {out.detail}")
    assert out.ok, f"tilecore conformance regression {name} ({out.status}): {out.detail}"
