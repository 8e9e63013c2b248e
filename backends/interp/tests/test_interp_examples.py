"""The oracle end to end: every example on interp against its NumPy reference, the example
scripts and the README quickstart (which default to interp), target discovery of interp, and
interp's runtime bounds errors naming the user's line."""

import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileRuntimeError
from tilecore.example_protocol import assert_outputs_match, example_files, sizes_for

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = [p.stem for p in example_files()]


def cases():
    for name in EXAMPLES:
        mod = importlib.import_module(name)
        for i, sizes in enumerate(mod.TEST_SIZES):
            yield pytest.param(name, sizes, id=f"{name}-{i}")


@pytest.mark.parametrize("name,sizes", list(cases()))
def test_example_on_interp(name, sizes):
    mod = importlib.import_module(name)
    kernel = tilecore.jit(mod.program(**sizes_for(mod.program, sizes)), out_idx=mod.OUT_IDX, target="interp")
    args = mod.make_inputs(np.random.default_rng(1), **sizes_for(mod.make_inputs, sizes))
    out = kernel(*args)
    ref = mod.reference(*args, **sizes_for(mod.reference, sizes))
    assert_outputs_match(out, ref, mod.TOLERANCE, check_nan=False)


@pytest.mark.parametrize("name", ["elementwise_add", "gemm"])
def test_example_script_runs(name):
    r = subprocess.run([sys.executable, str(ROOT / "examples" / f"{name}.py")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


def test_readme_quickstart_runs(tmp_path):
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"## Quickstart\n\n```python\n(.*?)```", readme, re.S).group(1)
    path = tmp_path / "quickstart.py"
    path.write_text(code)
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.splitlines()[0]) < 0.1


def test_targets_lists_interp_and_auto_resolves():
    assert "interp" in tilecore.targets()
    from tilecore.plugins import resolve

    assert resolve("auto").kind in tilecore.targets(runnable_only=True)


def test_cli_lists_interp():
    r = subprocess.run([sys.executable, "-m", "tilecore", "targets"], capture_output=True, text=True,
                       env={**os.environ}, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "interp" in r.stdout


def test_out_of_bounds_global_access_names_the_line():
    n = T.dynamic("n")  # symbolic, so only the run can see it (constant shapes fail to compile)

    def build():
        @T.prim_func
        def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(16):
                    B[i] = A[i]  # <- here
        return k

    lines, start = inspect.getsourcelines(build)
    line = start + next(i for i, s in enumerate(lines) if "# <- here" in s)
    kernel = tilecore.jit(build(), out_idx=[-1], target="interp",
                          pass_configs={"tl.disable_safe_memory_legalize": True})  # reported, not guarded
    with pytest.raises(TileRuntimeError) as e:
        kernel(np.zeros(10, np.float32))
    assert e.value.loc.file == __file__ and e.value.loc.line == line
    assert "out-of-bounds" in str(e.value)
