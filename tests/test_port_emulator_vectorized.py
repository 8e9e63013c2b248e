"""The core emulator's array-wise paths (issue 14: TileLang's radix top-k spent its time in a
per-thread Python loop for atomics and in a per-range loop of the race detector): the results
are those of the one-thread-after-another definition, element for element."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecore import dtypes as dt
from tilecore import semantics as S
from tilecore.emulator.atomics import atomic_add
from tilecore.emulator.race import SyncClock


def _sequential(store, off, v, lanes, d):
    """The definition: thread after thread, each update seeing the previous ones."""
    store = store.copy()
    old = np.zeros(len(lanes), dtype=store.dtype)
    for t in np.nonzero(lanes)[0]:
        old[t] = store[off[t]]
        cur = S.from_storage(store[off[t]], d)
        if d.is_int:
            store[off[t]] = S.to_storage(S.wrap_int(cur + int(v[t]), d), d)
        else:
            store[off[t]] = S.to_storage(S.round_to(cur + S.round_to(v[t], d), d), d)
    return store, old


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 64), cells=st.integers(1, 6),
       dname=st.sampled_from(["int32", "int8", "uint16", "int64", "float32", "float16", "bfloat16"]))
def test_atomic_add_matches_the_sequential_definition(seed, n, cells, dname):
    d = dt.as_dtype(dname)
    rng = np.random.default_rng(seed)
    off = rng.integers(0, cells, n).astype(np.int64)  # many threads per address
    lanes = rng.random(n) < 0.8
    if d.is_int:
        # values near the type's edges, so the wrap-around is exercised
        v = rng.integers(-300, 300, n).astype(np.int64) * (1 << max(0, d.bits - 9))
        store = S.to_storage(rng.integers(-100, 100, cells), d)
    else:
        v = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)
        store = S.to_storage(S.round_to(rng.standard_normal(cells).astype(np.float32), d), d)
    want_store, want_old = _sequential(store, off, v, lanes, d)
    got_store = store.copy()
    got_old = atomic_add(got_store, off, v, lanes, d)
    np.testing.assert_array_equal(got_store.view(np.uint8), want_store.view(np.uint8))
    np.testing.assert_array_equal(got_old.view(np.uint8), want_old.view(np.uint8))


def test_atomic_add_of_no_thread_changes_nothing():
    store = np.arange(4, dtype=np.int32)
    old = atomic_add(store, np.zeros(8, np.int64), np.ones(8, np.int64), np.zeros(8, bool),
                     dt.as_dtype("int32"))
    assert old.tolist() == [0] * 8 and store.tolist() == [0, 1, 2, 3]


def _ordered_range_loop(clock, lo, hi, t, b):
    """The definition: every thread of lo..hi except b has a common barrier with b after t."""
    return np.array([all(clock.sync[r, b[i]] > t[i] for r in range(lo[i], hi[i] + 1) if r != b[i])
                     for i in range(len(lo))])


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_ordered_range_matches_its_definition(seed):
    rng = np.random.default_rng(seed)
    clock = SyncClock(16)
    for _ in range(int(rng.integers(1, 6))):  # named barriers over random thread subsets
        clock.barrier(np.flatnonzero(rng.random(16) < 0.5))
    n = 20
    lo = rng.integers(0, 16, n)
    hi = np.minimum(15, lo + rng.integers(0, 5, n))
    t = rng.integers(0, clock.epoch + 1, n)
    b = rng.integers(0, 16, n)
    np.testing.assert_array_equal(clock.ordered_range(lo, hi, t, b), _ordered_range_loop(clock, lo, hi, t, b))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31), neg=st.booleans(), scalar=st.booleans())
def test_c_div_and_mod_match_cs_truncation(seed, neg, scalar):
    """C's truncating division and remainder on int64 arrays (the fast path for a positive
    scalar divisor and non-negative dividends included), against Python ints."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-1000 if neg else 0, 1000, 50).astype(np.int64)
    b = np.int64(rng.integers(1, 40)) if scalar else rng.integers(-40, 40, 50).astype(np.int64)
    if not scalar:
        b[b == 0] = 7
    bs = np.broadcast_to(b, a.shape)
    want_q = [abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1) for x, y in zip(a.tolist(), bs.tolist())]
    want_r = [x - q * y for x, y, q in zip(a.tolist(), bs.tolist(), want_q)]
    assert S.c_div(a, b).tolist() == want_q
    assert S.c_mod(a, b).tolist() == want_r
