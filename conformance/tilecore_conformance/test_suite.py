"""The conformance suite: generated programs and the examples corpus on every selected target.

Collected by `pytest conformance` in the tilecore tree, and added by the plugin to any run
given `--tile-target` (so `pytest --tile-target=cpu` works in a backend's own tree).
"""

from __future__ import annotations

import pytest

from .corpus import check_example
from .regressions import REGRESSIONS
from .runner import check_case
from .suite import check_shard


def test_generated_programs(tile_target, tile_profile, tile_shard):
    """Hypothesis-generated programs agree with interp: this shard's share of the profile's
    programs per target (CI: 300 in 6 shards, or the target's declared
    `TargetInfo.ci_programs`; --tile-examples / --tile-long override both)."""
    total = tile_profile.programs
    if tile_profile.fixed:
        from tilecore import plugins
        from tilecore.target import Target

        info = plugins.target_infos().get(Target.parse(tile_target).kind)
        if info is not None and info.ci_programs is not None:
            total = info.ci_programs
    n = tile_profile.share(tile_shard, total)
    if n == 0:
        return  # a target declaring fewer programs than there are shards
    stats, ran = check_shard(tile_target, tile_profile, tile_shard, total)
    print(f"shard {tile_shard} (seed {tile_profile.shard_seed(tile_shard)}): {ran} programs")
    print(stats.summary())
    if ran == 0 and stats.dtype_skips:
        pytest.skip(f"{tile_target} supports none of the generated dtypes: {stats.dtype_skips}")
    assert ran >= n, f"only {ran} of {n} programs could run on {tile_target}"


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
