"""The generated-program profiles: how programs split into shards and which seeds they use."""

import os

import pytest
from tilecore_conformance.profile import CI_EXAMPLES, CI_SHARDS, LONG_EXAMPLES, LONG_SHARDS, from_options


def test_ci_profile_is_fixed_seeds_in_shards():
    p = from_options(None, False, None, None)
    assert (p.programs, p.shards, p.seed, p.fixed) == (CI_EXAMPLES, CI_SHARDS, 0, True)
    assert [p.shard_seed(i) for i in range(p.shards)] == list(range(CI_SHARDS))
    assert sum(p.share(i) for i in range(p.shards)) == CI_EXAMPLES
    assert sum(p.share(i, 100) for i in range(p.shards)) == 100  # a target's ci_programs


def test_long_profile_draws_a_random_base_seed_unless_given():
    a, b = from_options(None, True, None, None), from_options(None, True, None, None)
    assert (a.programs, a.shards, a.fixed) == (LONG_EXAMPLES, LONG_SHARDS, False)
    assert a.seed != b.seed  # 1 in 2**32 to collide
    c = from_options(50, True, 7, 1000)
    assert (c.programs, c.shards, c.seed) == (50, 7, 1000)
    assert [c.share(i) for i in range(7)] == [8, 7, 7, 7, 7, 7, 7]


def test_examples_option_keeps_fixed_seeds_only_up_to_the_ci_count():
    small, big = from_options(20, False, None, None), from_options(5000, False, 10, None)
    assert (small.programs, small.shards, small.seed) == (20, 1, 0)
    assert not small.fixed  # a target's ci_programs applies to the CI profile only
    assert (big.programs, big.shards, big.fixed) == (5000, 10, False)  # new programs every run
    assert from_options(5000, False, 10, 42).seed == 42
    assert from_options(3, False, 8, None).shards == 3  # never a shard without programs
    with pytest.raises(ValueError, match="--tile-examples"):
        from_options(0, False, None, None)
    with pytest.raises(ValueError, match="--tile-shards"):
        from_options(10, False, 0, None)


def test_ci_keeps_300_programs_per_target_and_the_long_profile_10000():
    """Issue 16, item 16: CI's speed is bought by sharding and faster targets, never by fewer
    programs (>= 300 per target, also where a target declares its own count), and the long
    profile runs >= 10,000."""
    from tilecore import plugins

    assert CI_EXAMPLES >= 300 and LONG_EXAMPLES >= 10_000
    low = {k: i.ci_programs for k, i in plugins.target_infos().items()
           if i.ci_programs is not None and i.ci_programs < 300}
    assert not low, f"targets below 300 generated programs in CI: {low}"


def test_the_plugin_turns_the_uninitialized_read_report_on(pytestconfig, monkeypatch):
    """Issue 16 item 4: the report of reads of memory nothing wrote is on by default in
    conformance (a generated program must never read such memory): configuring the plugin
    sets TILECORE_CHECK_UNINIT when the environment leaves it unset, and keeps a user's 0."""
    from tilecore_conformance import plugin

    # configuring again re-draws the seed of a --tile-long run: the session's is put back after
    monkeypatch.setattr(pytestconfig.option, "tile_seed", pytestconfig.option.tile_seed)
    monkeypatch.delenv("TILECORE_CHECK_UNINIT", raising=False)
    plugin.pytest_configure(pytestconfig)
    assert os.environ["TILECORE_CHECK_UNINIT"] == "1"
    monkeypatch.setenv("TILECORE_CHECK_UNINIT", "0")
    plugin.pytest_configure(pytestconfig)
    assert os.environ["TILECORE_CHECK_UNINIT"] == "0"
