"""Compiled kernels live in an on-disk cache that a second process reuses: the compile cache
(tilecore.compile_cache: no lowering or code generation on a hit) and numba's cache of the
generated module (no numba compile); damaged numba cache files are deleted and rebuilt."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

from tilecore import cache as tcache

SCRIPT = textwrap.dedent("""
    import json, sys, time, warnings
    t0 = time.perf_counter()
    import numpy as np
    import tilecore
    import tilecore.language as T
    from tilecore_cpu import codegen

    generated = []
    _generate = codegen.Codegen.generate
    codegen.Codegen.generate = lambda self: generated.append(1) or _generate(self)

    @T.prim_func
    def scale(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(32):
                B[bx * 32 + i] = A[bx * 32 + i] * 3.0

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        t1 = time.perf_counter()
        k = tilecore.jit(scale, out_idx=[-1], target="cpu")
        out = k(np.arange(64, dtype=np.float32))
        t2 = time.perf_counter()
    assert np.array_equal(out, np.arange(64, dtype=np.float32) * 3)
    st = k.artifact.launch_serial.stats
    print(json.dumps({"hits": sum(st.cache_hits.values()), "misses": sum(st.cache_misses.values()),
                      "path": str(k.artifact.path), "generated": len(generated),
                      "warnings": [str(w.message) for w in seen if "cache" in str(w.message)],
                      "jit_call_s": t2 - t1}))
""")


def _run(cache_dir):
    env = dict(os.environ, TILECORE_CACHE_DIR=str(cache_dir))
    env.pop("NUMBA_CACHE_DIR", None)  # numba's files beside the generated module
    script = cache_dir / "scale_kernel.py"  # kernels are parsed from their source file
    script.write_text(SCRIPT)
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_second_process_loads_compiled_code_from_disk_and_recovers_from_damage(tmp_path):
    first = _run(tmp_path)
    assert first["misses"] == 1 and first["hits"] == 0 and first["generated"] == 1
    assert first["path"].startswith(str(tmp_path / "cpu"))
    second = _run(tmp_path)
    # a compile-cache hit: no code generation, numba loads the machine code
    assert {k: second[k] for k in ("hits", "misses", "path", "generated", "warnings")} == {
        "hits": 1, "misses": 0, "path": first["path"], "generated": 0, "warnings": []}
    # damage numba's files: truncate the index, overwrite the data with garbage
    numba_files = list((tmp_path / "cpu" / "__pycache__").glob("tilecore_cpu_kernel_*"))
    assert {p.suffix for p in numba_files} == {".nbi", ".nbc"}
    for p in numba_files:
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 3] if p.suffix == ".nbi" else os.urandom(len(data)))
    third = _run(tmp_path)
    assert third["misses"] == 1 and len(third["warnings"]) == 1 and "damaged" in third["warnings"][0]
    fourth = _run(tmp_path)  # rebuilt: a clean hit again
    assert fourth["hits"] == 1 and fourth["misses"] == 0 and fourth["warnings"] == []


def test_a_cache_path_that_is_a_file_falls_back_to_a_private_directory(tmp_path, monkeypatch):
    from tilecore_cpu import cache

    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(blocker))
    monkeypatch.setattr(cache, "_fallback", [])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        d = cache.cache_dir()
    assert d.is_dir() and not str(d).startswith(str(blocker))
    assert [w for w in seen if issubclass(w.category, tcache.TileCacheWarning)]
