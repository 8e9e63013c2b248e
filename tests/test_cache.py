"""tilecore.cache (the store) and the compile cache keyed before lowering (tilecore.compile_cache).

The compile-cache tests use the stand-in `memo` backend (tests/cache_backend.py), which counts
builds and loads; the cpu and cuda entries are tested in their backends' tests.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import warnings

import cache_backend as cb
import numpy as np
import pytest

import tilecore
from tilecore import cache, compile_cache


@pytest.fixture
def store(tmp_path):
    return cache.Store("t", directory=tmp_path / "t")


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty cache root and no in-memory entries: what a new process on a new machine sees."""
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILECORE_DUMP_IR", raising=False)
    monkeypatch.delenv("TILECORE_COMPILE_CACHE", raising=False)
    compile_cache.clear_memory()
    cb.ensure_registered()
    cb.COUNTS.update(build=0, load=0)
    yield tmp_path
    compile_cache.clear_memory()


# --------------------------------------------------------------------------- the store
def test_bytes_json_and_records_round_trip(store):
    store.put("a", b"\x00\x01binary")
    store.put_json("j", {"x": [1, 2.5, "s"]})
    store.put_record("r", {"entry": "k", "grid": [1, 2, 3]}, {"cubin": b"\x7fELF...", "src": b"text"})
    store.clear_memory()  # read them back from disk
    assert store.get("a") == b"\x00\x01binary"
    assert store.get_json("j") == {"x": [1, 2.5, "s"]}
    assert store.get_record("r") == ({"entry": "k", "grid": [1, 2, 3]},
                                     {"cubin": b"\x7fELF...", "src": b"text"})
    assert store.get("missing") is None
    with pytest.raises(ValueError):
        store.get("../escape")


def test_files_are_private_and_honour_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "root"))
    s = cache.Store("ns")
    s.put("k", b"v")
    assert s.path("k").parent == tmp_path / "root" / "ns"
    for d in (tmp_path / "root", tmp_path / "root" / "ns"):  # created parents are private too
        assert (d.stat().st_mode & 0o777) == 0o700


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip", "empty", "bad-record",
                                    "other-version"])
def test_a_damaged_entry_is_deleted_reported_once_and_rebuilt(store, damage):
    store.put_record("k", {"a": 1}, {"b": b"x" * 100})
    path = store.path("k")
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif damage == "flip":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "other-version":  # intact, but another file format's magic
        path.write_bytes(b"TCC0" + data[len(cache.MAGIC):])
    else:  # an intact file whose payload is not a record
        path.write_bytes(cache.encode(b"\xff" * 20))
    store.clear_memory()
    with pytest.warns(cache.TileCacheWarning, match="damaged|malformed"):
        assert store.get_record("k") is None
    assert not path.exists()
    store.put_record("k", {"a": 2})  # rebuilt
    store.clear_memory()
    assert store.get_record("k") == ({"a": 2}, {})


def test_damaged_entries_are_reported_once_per_store(store):
    """Issue 16 item 15's "reported once": a cache full of bad entries says so once, not per
    entry; each bad entry is still deleted and rebuilt."""
    for k in ("a", "b", "c"):
        store.put(k, b"value " + k.encode())
        store.path(k).write_bytes(b"garbage")
    store.clear_memory()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert [store.get(k) for k in ("a", "b", "c")] == [None, None, None]
    assert len([w for w in seen if issubclass(w.category, cache.TileCacheWarning)]) == 1
    assert not any(store.path(k).exists() for k in ("a", "b", "c"))


def test_the_default_root_is_per_user_and_private(tmp_path, monkeypatch):
    """Without TILECORE_CACHE_DIR: $XDG_CACHE_HOME/tilecore, else ~/.cache/tilecore, created
    with mode 0700 (numba's pickles live there: other users must not plant entries)."""
    monkeypatch.delenv("TILECORE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.root() == tmp_path / "xdg" / "tilecore"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.root() == tmp_path / "home" / ".cache" / "tilecore"
    cache.Store("ns").put("k", b"v")
    for d in (tmp_path / "home", tmp_path / "home" / ".cache", cache.root(), cache.root() / "ns"):
        assert (d.stat().st_mode & 0o777) == 0o700, d


def test_lru_eviction_keeps_the_cap_and_the_recently_used(tmp_path):
    s = cache.Store("lru", max_bytes=2500, directory=tmp_path / "lru")
    for i in range(4):
        s.put(f"k{i}", bytes(500))
        os.utime(s.path(f"k{i}"), (1000 + i, 1000 + i))  # k0 oldest
    s.clear_memory()
    assert s.get("k0") is not None  # a hit makes k0 the most recently used
    s.put("k4", bytes(500))  # 5 x ~550 bytes > 2500: the least recently used (k1) goes
    names = {p.name[:-4] for p, _, _ in s.entries()}
    assert names == {"k0", "k2", "k3", "k4"}
    assert s.size() <= 2500


def test_an_unusable_directory_degrades_to_memory_with_a_warning(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    s = cache.Store("x", directory=blocker / "x")
    with pytest.warns(cache.TileCacheWarning, match="not a writable directory"):
        assert s.put("k", b"v") is False
    assert s.get("k") == b"v"  # still served from memory


def _writer(args):
    root, i = args
    s = cache.Store("conc", max_bytes=40_000, directory=root)
    shared = bytes(range(256)) * 40  # every writer writes the same value under "same"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for j in range(30):
            s.put("same", shared)
            s.put(f"w{i}-{j}", bytes([i]) * (300 + j))
            got = s.get("same")
            assert got is None or got == shared  # None: evicted by another writer meanwhile
            s.clear_memory()
    # a reader never saw a partly written file (it would have been reported as damaged)
    assert not [w for w in seen if issubclass(w.category, cache.TileCacheWarning)]
    return i


def test_eight_concurrent_writers_leave_only_whole_entries(tmp_path):
    root = tmp_path / "conc"
    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    with ctx.Pool(8) as pool:
        assert sorted(pool.map(_writer, [(root, i) for i in range(8)])) == list(range(8))
    s = cache.Store("conc", max_bytes=40_000, directory=root)
    entries = s.entries()
    assert entries and s.size() <= 40_000 + 8 * 12_000  # each writer evicts after its own put
    for path, _, _ in entries:
        assert cache.decode(path.read_bytes()) is not None, path  # no torn or mixed file
    assert not [p for p in root.iterdir() if p.suffix == ".part"]  # no temporary left behind


def test_digest_is_unambiguous_and_fingerprints_follow_edits(tmp_path):
    assert cache.digest("ab", "c") != cache.digest("a", "bc")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text("x = 1\n")
    before = cache.package_fingerprint(pkg)
    cache._fingerprints.clear()
    (pkg / "m.py").write_text("x = 22\n")
    assert cache.package_fingerprint(pkg) != before


# --------------------------------------------------------------------------- compile cache
def test_a_second_compile_is_a_hit_in_memory_then_on_disk(fresh):
    k1 = tilecore.compile(cb.add_const(), out_idx=[-1], target="memo")
    k2 = tilecore.compile(cb.add_const(), out_idx=[-1], target="memo")
    assert cb.COUNTS == {"build": 1, "load": 0} and k2.artifact is k1.artifact
    compile_cache.clear_memory()
    k3 = tilecore.compile(cb.add_const(), out_idx=[-1], target="memo")
    assert cb.COUNTS == {"build": 1, "load": 1}
    np.testing.assert_array_equal(k3(np.zeros(16, np.float32)), np.ones(16, np.float32))
    # the pipeline did not run for the hit; the IR is still there when asked for
    assert "B[i] = A[i] + 1.0" in k3.get_ir("input") and k3.stage_names[0] == "input"


@pytest.mark.parametrize("change", ["ir", "target", "options", "line"])
def test_what_changes_the_build_changes_the_key(fresh, change):
    tilecore.compile(cb.add_const(), out_idx=[-1], target="memo")
    compile_cache.clear_memory()
    if change == "ir":
        tilecore.compile(cb.add_const(c=2.0), out_idx=[-1], target="memo")
    elif change == "target":
        tilecore.compile(cb.add_const(), out_idx=[-1], target="memo:b")
    elif change == "options":
        tilecore.compile(cb.add_const(), out_idx=[-1], target="memo",
                         pass_configs={"tl.enable_fast_math": True})
    else:  # the same kernel defined on other lines: its errors would name other lines
        import tilecore.language as T

        @T.prim_func
        def add(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                for i in T.Parallel(16):
                    B[i] = A[i] + 1.0

        tilecore.compile(add, out_idx=[-1], target="memo")
    assert cb.COUNTS == {"build": 2, "load": 0}


def test_a_hit_asks_no_backend_about_the_program(fresh, monkeypatch):
    """The key needs no `describe` (the gemm answers follow from code, program and target) and
    a stored entry was supported: a hit calls neither; `Kernel.desc` describes on demand."""
    from tilecore import plugins

    built = tilecore.compile(cb.add_const(), out_idx=[-1], target="memo")
    compile_cache.clear_memory()
    calls = []
    describe, unsupported = plugins.describe, plugins.unsupported
    monkeypatch.setattr(plugins, "describe",
                        lambda *a, **k: calls.append("describe") or describe(*a, **k))
    monkeypatch.setattr(plugins, "unsupported",
                        lambda *a, **k: calls.append("unsupported") or unsupported(*a, **k))
    before = compile_cache.stats()
    k = tilecore.compile(cb.add_const(), out_idx=[-1], target="memo")
    assert calls == [] and cb.COUNTS == {"build": 1, "load": 1}
    after = compile_cache.stats()
    assert after["disk_hits"] == before["disk_hits"] + 1 and after["misses"] == before["misses"]
    assert k.desc == built.desc and calls == ["describe"]
    np.testing.assert_array_equal(k(np.zeros(16, np.float32)), np.ones(16, np.float32))


def test_backends_hear_of_a_build_on_a_miss_only(fresh):
    """`tile_build_begin` (where cuda starts reading NVRTC beside the pipeline) is called once
    per miss, before the build, and never on a hit."""
    from tilecore import plugins
    from tilecore.hookspec import hookimpl

    class Recorder:
        def __init__(self):
            self.seen = []

        @hookimpl
        def tile_build_begin(self, target):
            self.seen.append((str(target), cb.COUNTS["build"]))

    rec = Recorder()
    plugins.register(rec, name="build-begin-recorder")
    try:
        tilecore.compile(cb.add_const(c=3.0), out_idx=[-1], target="memo")
        compile_cache.clear_memory()
        tilecore.compile(cb.add_const(c=3.0), out_idx=[-1], target="memo")  # a disk hit
    finally:
        plugins.unregister("build-begin-recorder")
    assert rec.seen == [("memo:a", 0)] and cb.COUNTS == {"build": 1, "load": 1}


def test_a_new_process_loads_instead_of_building(fresh):
    env = dict(os.environ, TILECORE_CACHE_DIR=str(fresh),
               PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), *sys.path]))
    cmd = [sys.executable, "-c", "import cache_backend; cache_backend.main()"]
    first = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout)
    second = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout)
    # a miss checks the program in full (the shared-memory budget imports the lowering's
    # planner); a hit skips that one check and so never imports tilecore.lower (~100 ms)
    assert first == {"build": 1, "load": 0, "ok": True, "lowering_imported": True}
    assert second == {"build": 0, "load": 1, "ok": True, "lowering_imported": False}


def test_a_damaged_kernel_entry_is_rebuilt(fresh):
    tilecore.compile(cb.add_const(), out_idx=[-1], target="memo")
    compile_cache.clear_memory()
    (entry,) = (fresh / "kernels").glob("*.tcc")
    entry.write_bytes(entry.read_bytes()[:-7])
    with pytest.warns(cache.TileCacheWarning):
        k = tilecore.compile(cb.add_const(), out_idx=[-1], target="memo")
    assert cb.COUNTS == {"build": 2, "load": 0}
    np.testing.assert_array_equal(k(np.zeros(16, np.float32)), np.ones(16, np.float32))


def test_the_cache_can_be_turned_off(fresh, monkeypatch):
    monkeypatch.setenv("TILECORE_COMPILE_CACHE", "0")
    for _ in range(2):
        tilecore.compile(cb.add_const(), out_idx=[-1], target="memo")
    assert cb.COUNTS["build"] == 2 and not (fresh / "kernels").exists()


def test_artifacts_without_an_entry_are_never_reused(fresh):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = tilecore.compile(cb.add_const(), out_idx=[-1], target="toy:w4")
        b = tilecore.compile(cb.add_const(), out_idx=[-1], target="toy:w4")
    assert a.artifact is not b.artifact
