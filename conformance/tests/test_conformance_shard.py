"""Sharding the generated suite over the devices of a host (tilecore_conformance.shard), with a
simulated device list: every worker is pinned to its device and the programs add up."""

from tilecore_conformance.shard import plan, run, visible_devices


def test_plan_splits_programs_evenly_and_interleaves_devices():
    shards = plan(10, ["0", "1"], 2)
    assert [s.device for s in shards] == ["0", "1", "0", "1"]
    assert [s.programs for s in shards] == [3, 3, 2, 2]
    assert sum(s.programs for s in plan(1601, ["0", "1", "2"], 8)) == 1601
    assert [s.programs for s in plan(2, ["0", "1"], 4)] == [1, 1]  # no worker with nothing to do
    assert {s.device for s in plan(5, [], 3)} == {None}


def test_visible_devices_reads_the_environment_first():
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "2, 5"}) == ["2", "5"]
    assert visible_devices({"CUDA_VISIBLE_DEVICES": ""}) == []


def test_workers_are_pinned_and_totals_add_up():
    lines = []
    ran, exact, results = run("interp", 4, ["0", "1"], 1, echo=lines.append)
    assert ran == 4 and 0 <= exact <= 4
    assert sorted((r.device, r.seen_devices) for r in results) == [("0", "0"), ("1", "1")]
    assert not any(r.error for r in results)
    assert len(lines) == 2
