"""The race tracker's fast paths (added for CI time, issue 16) report exactly what the general
paths do: reader ranges of one read statement with repeated elements, rising offsets, several
warpgroups, and aliased buffers tracked in units wider than a byte."""

import numpy as np
import pytest

from tilecore.emulator.race import SharedTracker, SyncClock
from tilecore.emulator.shared_alias import AliasedTracker
from tilecore.errors import TileRuntimeError

LOCS = [None]


def test_one_read_statement_with_repeated_elements_records_each_elements_thread_range():
    clock = SyncClock(8)
    tr = SharedTracker("s", 4, clock)
    # threads 0..3 read element 2 (a broadcast), threads 4..5 elements 0 and 1: not rising
    tr.read(np.array([2, 2, 2, 2, 0, 1]), np.arange(6), 0, LOCS)
    assert tr.rlo[0].tolist() == [4, 5, 0, -1] and tr.rhi[0].tolist() == [4, 5, 3, -1]
    with pytest.raises(TileRuntimeError, match="element 2 that threads 0..3 read"):
        tr.write(np.array([2]), np.array([7]), 0, LOCS)
    tr.write(np.array([3]), np.array([7]), 0, LOCS)  # nobody read element 3: fine
    assert tr._scratch_lo.min() == np.iinfo(np.int64).max and tr._scratch_hi.max() == -1  # reset


def test_rising_reads_and_writes_take_the_fast_paths_with_the_same_reports():
    clock = SyncClock(4)
    tr = SharedTracker("s", 8, clock)
    tr.write(np.array([0, 1, 2, 3]), np.arange(4), 0, LOCS)
    with pytest.raises(TileRuntimeError, match="reads element 1 written by thread 1"):
        tr.read(np.array([1]), np.array([0]), 0, LOCS)
    clock.barrier()
    tr.read(np.array([4, 5, 6, 7]), np.arange(4), 0, LOCS)
    assert tr.rlo[0, 4:].tolist() == [0, 1, 2, 3] == tr.rhi[0, 4:].tolist()
    with pytest.raises(TileRuntimeError, match="both write element 1"):  # not rising: sorted
        tr.write(np.array([1, 1]), np.array([1, 2]), 0, LOCS, np.array([1.0, 2.0]))


def test_reader_slots_of_two_warpgroups_stay_apart():
    clock = SyncClock(256)
    tr = SharedTracker("s", 4, clock)
    tr.read(np.array([0, 0, 1]), np.array([3, 130, 200]), 0, LOCS)
    assert tr.rlo[:, :2].tolist() == [[3, -1], [130, 200]]
    assert tr.rhi[:, :2].tolist() == [[3, -1], [130, 200]]


@pytest.mark.parametrize("unit", [1, 2])
def test_aliased_buffers_race_alike_in_bytes_and_in_wider_units(unit):
    clock = SyncClock(4)
    storage = SharedTracker("a/b", 16 // unit, clock)
    a = AliasedTracker(storage, 0, 4, 4, unit)  # float32 a[0:4] at byte 0
    b = AliasedTracker(storage, 0, 2, 8, unit)  # float16 b[0:8] over the same bytes
    a.read(np.array([0]), np.array([0]), 0, LOCS)  # thread 0 reads bytes 0..3
    b.write(np.array([2]), np.array([1]), 0, LOCS, np.array([1], np.float16))  # bytes 4..5: fine
    with pytest.raises(TileRuntimeError, match="that thread 0 read"):
        b.write(np.array([1]), np.array([1]), 0, LOCS, np.array([1], np.float16))  # bytes 2..3
