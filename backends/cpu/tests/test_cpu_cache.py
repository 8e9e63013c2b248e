"""Compiled kernels live in an on-disk cache that a second process reuses."""

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tilecore
    import tilecore.language as T

    @T.prim_func
    def scale(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(32):
                B[bx * 32 + i] = A[bx * 32 + i] * 3.0

    k = tilecore.jit(scale, out_idx=[-1], target="cpu")
    out = k(np.arange(64, dtype=np.float32))
    assert np.array_equal(out, np.arange(64, dtype=np.float32) * 3)
    st = k.artifact.launch_serial.stats
    print(json.dumps({"hits": sum(st.cache_hits.values()), "misses": sum(st.cache_misses.values()),
                      "path": str(k.artifact.path)}))
""")


def _run(cache_dir):
    env = dict(os.environ, TILECORE_CACHE_DIR=str(cache_dir))
    script = cache_dir / "scale_kernel.py"  # kernels are parsed from their source file
    script.write_text(SCRIPT)
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_second_process_loads_compiled_code_from_disk(tmp_path):
    first = _run(tmp_path)
    assert first["misses"] == 1 and first["hits"] == 0
    assert first["path"].startswith(str(tmp_path / "cpu"))
    second = _run(tmp_path)
    assert second == {"hits": 1, "misses": 0, "path": first["path"]}
