"""@tilecore.autotune and the profiler on the interp oracle: the search keeps the fastest
correct config, rejects wrong ones, stores its result and reads it back without searching."""

import numpy as np
import pytest
from optional_backends import needs_interp

import tilecore
import tilecore.autotuner as at
import tilecore.language as T
from tilecore.errors import TileError

pytestmark = needs_interp

CONFIGS = [dict(block=8, scale=1.0), dict(block=32, scale=1.0), dict(block=16, scale=2.0)]


def scaled_add(N, block=16, scale=1.0):
    """C = (A + B) * scale; scale != 1 is a deliberately wrong config."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"),
             C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = (A[bx * block + i] + B[bx * block + i]) * scale

    return main


add_factory = tilecore.jit(scaled_add, out_idx=[-1], target="interp")
tuned_add = tilecore.autotune(configs=CONFIGS[:2], warmup=1, rep=3, workers=2)(add_factory)


def ref(a, b):
    return a + b


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path))
    return tmp_path


def _tuner(**kw):
    kw.setdefault("configs", CONFIGS)
    kw.setdefault("warmup", 1)
    kw.setdefault("rep", 3)
    return tilecore.autotune(**kw)(tilecore.jit(scaled_add, out_idx=[-1], target="interp"))


def test_search_keeps_the_fastest_correct_config_and_rejects_a_wrong_one():
    tuner = _tuner(ref_prog=ref)
    k = tuner(64)
    res = tuner.last_result
    assert not res.from_cache
    by_block = {r.config["block"]: r for r in res.results}
    assert by_block[16].latency is None and "wrong result" in by_block[16].error
    ok = [r for r in res.results if r.latency is not None]
    assert len(ok) == 2
    assert k.config == min(ok, key=lambda r: r.latency).config == res.config
    assert k.latency == res.latency > 0
    a, b = np.arange(64, dtype=np.float32), np.ones(64, np.float32)
    np.testing.assert_array_equal(k(a, b), a + b)


def test_without_ref_prog_the_first_config_is_the_reference():
    cfgs = [dict(block=16, scale=1.0), dict(block=32, scale=3.0)]
    tuner = _tuner(configs=cfgs)
    k = tuner(64)
    assert k.config == cfgs[0]
    assert "wrong result" in tuner.last_result.results[1].error


def test_second_run_reads_the_cache_and_searches_nothing(monkeypatch, cache_dir):
    first = _tuner(ref_prog=ref)
    k1 = first(64)
    assert (cache_dir / "autotune").is_dir()
    built, timed = [], []
    monkeypatch.setattr(at.AutoTuner, "_compile", lambda self, p, _c=at.AutoTuner._compile:
                        built.append(p) or _c(self, p))
    monkeypatch.setattr(at, "time_call", lambda *a, **k: timed.append(a) or pytest.fail("timed"))
    second = _tuner(ref_prog=ref)  # a new tuner: nothing in memory, the record on disk
    k2 = second(64)
    assert second.last_result.from_cache
    assert k2.config == k1.config and k2.latency == k1.latency
    assert built == [dict(N=64, **k1.config)] and not timed  # the winner only, no search
    assert second(64) is k2 and len(built) == 1  # in-memory hit: nothing built at all


def test_key_parameters_decide_when_to_search_again(cache_dir):
    tuner = _tuner(configs=CONFIGS[:2], key=["N"])
    for n in (64, 96):
        tuner(n)
        assert not tuner.last_result.from_cache  # a new N: a new search
    again = _tuner(configs=CONFIGS[:2], key=["N"])
    for n in (64, 96):
        again(n)
        assert again.last_result.from_cache
    other = _tuner(configs=CONFIGS[:2], key=["N"], rtol=0.5)  # the key ignores check settings
    other(64)
    assert other.last_result.from_cache


def test_a_non_key_argument_shares_the_result_but_builds_its_own_kernel():
    cfgs = [dict(block=8), dict(block=16)]
    tuner = _tuner(configs=cfgs, key=["N"])
    k1 = tuner(64, scale=1.0)
    k2 = tuner(64, scale=2.0)  # not a key: no new search, but a kernel for scale=2
    assert k2 is not k1 and k2.config == k1.config
    a, b = np.ones(64, np.float32), np.ones(64, np.float32)
    np.testing.assert_array_equal(k1(a, b), 2 * a)
    np.testing.assert_array_equal(k2(a, b), 4 * a)


def test_all_tuned_values_given_skips_the_search():
    tuner = _tuner()
    k = tuner(64, block=8, scale=1.0)
    assert tuner.last_result is None and not hasattr(k, "config")
    with pytest.raises(TileError, match="tuned parameter"):
        tuner(64, block=8)


def test_user_mistakes_are_tile_errors():
    with pytest.raises(TileError, match="unknown keyword"):
        tilecore.autotune(configs=CONFIGS, bogus=1)
    with pytest.raises(TileError, match="kernel factory"):
        tilecore.autotune(configs=CONFIGS)(scaled_add)
    with pytest.raises(TileError, match="not a parameter"):
        _tuner(configs=[dict(blok=8)])(64)
    with pytest.raises(TileError, match="autotune key"):
        _tuner(key=["Q"])


def test_workers_compile_in_spawned_processes(monkeypatch):
    seen = []
    orig = at.AutoTuner._precompile
    monkeypatch.setattr(at.AutoTuner, "_precompile",
                        lambda self, p, c: seen.append(orig(self, p, c)) or seen[-1])
    k = tuned_add(32)
    (pre,) = seen  # {config index: (seconds, error)} from the worker processes
    assert sorted(pre) == [0, 1] and all(err is None for _, err in pre.values())
    res = tuned_add.last_result
    assert [r.error for r in res.results] == [None, None]
    assert k.config in CONFIGS[:2]


def test_timing_fans_out_over_devices():
    torch = pytest.importorskip("torch")
    tuner = _tuner(configs=CONFIGS[:2], devices=[torch.device("cpu"), torch.device("cpu")])
    k = tuner(64)
    assert all(r.latency is not None for r in tuner.last_result.results)
    assert k.config in CONFIGS[:2]


def test_profiler_times_and_checks():
    k = tilecore.jit(scaled_add(64, 16, 1.0), out_idx=[-1], target="interp")
    prof = k.get_profiler(tensor_supply_type="integer")
    ms = prof.do_bench(warmup=1, rep=2)
    assert ms > 0 and prof.last_timing.clock == "wall"
    assert prof.do_bench(ref, n_warmup=1, n_repeat=3) > 0
    prof.assert_allclose(ref, rtol=0, atol=0)
    with pytest.raises(AssertionError, match="differ"):
        prof.assert_allclose(lambda a, b: a - b, rtol=0, atol=0)
    q = prof.do_bench(n_warmup=1, n_repeat=4, quantiles=[0.2, 0.8])
    assert len(q) == 2 and q[0] <= q[1]


def test_gemm_autotune_example_on_interp():
    import gemm
    import gemm_autotune

    tuned = gemm_autotune.tuned_gemm("interp", warmup=1, rep=2,
                                     configs=[dict(block_M=32, block_N=32, block_K=16, num_stages=0,
                                                   threads=128),
                                              dict(block_M=64, block_N=32, block_K=32, num_stages=0,
                                                   threads=128)])
    k = tuned(M=64, N=48, K=32)
    assert [r.error for r in tuned.last_result.results] == [None, None]
    a, b = gemm.make_inputs(np.random.default_rng(1), M=64, N=48, K=32)
    np.testing.assert_allclose(k(a, b).astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)


def test_progress_bar_through_tqdm(monkeypatch):
    import sys
    import types

    updates = []

    class FakeBar:
        def __init__(self, total, desc, unit):
            updates.append(("start", total, desc))

        def update(self, n):
            updates.append(("update", n))

        def close(self):
            updates.append(("close",))

    monkeypatch.setitem(sys.modules, "tqdm", types.ModuleType("tqdm"))
    monkeypatch.setitem(sys.modules, "tqdm.auto", types.SimpleNamespace(tqdm=FakeBar))
    _tuner(configs=CONFIGS[:2], progress=True)(64)
    assert updates == [("start", 2, "autotune scaled_add"), ("update", 1), ("update", 1), ("close",)]
    updates.clear()
    _tuner(configs=CONFIGS[:2])(32)  # two configs: too short a search for a bar
    assert updates == []
