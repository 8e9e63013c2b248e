"""The example protocol: how tests and the conformance corpus read `examples/*.py`.

An example module exposes `program(**sizes)` (a PrimFunc factory), `make_inputs(rng, **sizes)`,
`reference(*inputs, **sizes)` (NumPy), `TEST_SIZES` (a list of size dicts), `OUT_IDX` and
`TOLERANCE` (rtol/atol against the reference; (0, 0) means exact). An eager-style example
(`@tilecore.jit` on the kernel body) that is the twin of a factory-style one also sets
`TWIN = "<the factory example's stem>"`: its `program(**sizes)` builds the same PrimFunc as the
twin's at each of the twin's TEST_SIZES (tests/test_eager_examples.py holds it to that), so the
corpus readers skip it (`example_files(twins=False)`): every target's run of the twin covers
the lowering of both, and the eager call path is tested once. This module is the one
reader of that protocol; it lives in the core so that the core's own tests (run with no
backend distribution installed) and `tilecore_conformance.corpus` share it.
"""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

REQUIRED = ("program", "make_inputs", "TEST_SIZES", "OUT_IDX", "TOLERANCE")
TWIN_LINE = re.compile(r"^TWIN = ", re.MULTILINE)  # an eager twin's marker (see the docstring)


def examples_dir() -> Path | None:
    """$TILECORE_EXAMPLES, else the `examples/` folder next to the installed tilecore package."""
    env = os.environ.get("TILECORE_EXAMPLES")
    if env:
        return Path(env)
    d = Path(__file__).resolve().parent.parent / "examples"
    return d if d.is_dir() else None


def example_files(directory: Path | None = None, twins: bool = False) -> list[Path]:
    """Every example file that follows the protocol (checked by reading, not importing); an
    eager twin (a `TWIN = ...` line: the same PrimFunc as a factory example) only with `twins`."""
    d = directory or examples_dir()
    if d is None:
        return []
    out = []
    for p in sorted(d.glob("*.py")):
        text = p.read_text()
        if all(name in text for name in REQUIRED) and (twins or TWIN_LINE.search(text) is None):
            out.append(p)
    return out


def sizes_for(fn, sizes: dict) -> dict:
    """The entries of `sizes` that `fn` takes (TEST_SIZES mix program, input and reference
    parameters). Every example-driven test uses this one rule."""
    params = inspect.signature(fn).parameters
    return {k: v for k, v in sizes.items() if k in params}


def as_outputs(value) -> list:
    """A kernel call's (or a reference's) result as a list of arrays: one output comes back as
    an array, several (out_idx with more than one entry) as a list or tuple."""
    return list(value) if isinstance(value, (list, tuple)) else [value]


def assert_outputs_match(out, ref, tolerance: dict, check_nan: bool = True) -> None:
    """Every output of `out` equals the matching one of `ref`: exactly when the example's
    TOLERANCE is (0, 0), else within it (compared in float32); no output may hold a NaN."""
    import numpy as np

    outs, refs = as_outputs(out), as_outputs(ref)
    assert len(outs) == len(refs), f"{len(outs)} outputs, but the reference has {len(refs)}"
    exact = tolerance["rtol"] == 0 and tolerance["atol"] == 0
    for o, r in zip(outs, refs):
        if check_nan:
            assert not np.isnan(np.asarray(o).astype(np.float32)).any()
        if exact:
            np.testing.assert_array_equal(o, r)
        else:
            np.testing.assert_allclose(np.asarray(o).astype(np.float32), np.asarray(r).astype(np.float32),
                                       **tolerance)
