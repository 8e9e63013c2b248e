"""Every example runs on interp and matches its NumPy reference, at every test size."""

import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tilecore_conformance.corpus import example_files
from tilecore_conformance.corpus import sizes_for as _split

import tilecore

EXAMPLES = [p.stem for p in example_files()]


def cases():
    for name in EXAMPLES:
        mod = importlib.import_module(name)
        for i, sizes in enumerate(mod.TEST_SIZES):
            yield pytest.param(name, sizes, id=f"{name}-{i}")



@pytest.mark.parametrize("name,sizes", list(cases()))
def test_example_on_interp(name, sizes):
    mod = importlib.import_module(name)
    kernel = tilecore.jit(mod.program(**_split(mod.program, sizes)), out_idx=mod.OUT_IDX, target="interp")
    rng = np.random.default_rng(1)
    args = mod.make_inputs(rng, **_split(mod.make_inputs, sizes))
    out = kernel(*args)
    ref = mod.reference(*args, **_split(mod.reference, sizes))
    if mod.TOLERANCE["rtol"] == 0 and mod.TOLERANCE["atol"] == 0:
        np.testing.assert_array_equal(out, ref)
    else:
        np.testing.assert_allclose(out.astype(np.float32), ref.astype(np.float32), **mod.TOLERANCE)


@pytest.mark.parametrize("name", ["elementwise_add", "gemm"])
def test_example_script_runs(name):
    path = Path(__file__).parent.parent / "examples" / f"{name}.py"
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout
