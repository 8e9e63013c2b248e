"""The fixed corpus: every kernel in `examples/` through the same runner as generated programs.

Examples follow the protocol read by `tilecore.example_protocol` (re-exported here). Each
target's outputs must match interp's within TOLERANCE, and interp with shuffled blocks and
poisoned memory must match plain interp.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tilecore import plugins
from tilecore.example_protocol import example_files, examples_dir, sizes_for  # noqa: F401 (re-exported)

from . import loader
from .runner import ORACLE, Outcome, _short_trace


def load(path: Path):
    """Import an example module once."""
    name = f"tilecore_conformance_example_{path.stem}"
    import sys

    return sys.modules.get(name) or loader.import_file(path, name)


def _run(func, out_idx, target, args, shuffle=None):
    import tilecore

    k = tilecore.compile(func, out_idx=out_idx, target=target)
    args = [a.copy() for a in args]
    if shuffle is None:
        out = k(*args)
    else:
        from tilecore_interp.runner import options

        with options(seed=shuffle, poison="value"):
            out = k(*args)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _differs(want, got, rtol, atol) -> str | None:
    for n, (w, g) in enumerate(zip(want, got)):
        w64, g64 = np.asarray(w).astype(np.float64), np.asarray(g).astype(np.float64)
        same = (w64 == g64) | (np.isnan(w64) & np.isnan(g64))
        bad = ~(same | (np.abs(g64 - w64) <= atol + rtol * np.abs(w64)))
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            return (f"output {n}: {int(bad.sum())}/{bad.size} elements differ (rtol={rtol}, atol={atol}); "
                    f"first at {idx}: interp {w64[idx]!r}, target {g64[idx]!r}")
    return None


def check_example(path: Path, sizes: dict, target: str) -> Outcome:
    """Run one example at one size on `target` and on the oracle; compare."""
    mod = load(path)
    func = mod.program(**sizes_for(mod.program, sizes))
    reason = plugins.unsupported(plugins.resolve(target), func)  # also asks the lowering target
    if reason:
        return Outcome("skip", str(reason))
    args = mod.make_inputs(np.random.default_rng(0), **sizes_for(mod.make_inputs, sizes))
    rtol, atol = float(mod.TOLERANCE.get("rtol", 0)), float(mod.TOLERANCE.get("atol", 0))
    where = f"{path} with sizes {sizes}"
    try:
        want = _run(func, mod.OUT_IDX, ORACLE, args)
        shuffled = _run(func, mod.OUT_IDX, ORACLE, args, shuffle=1)
    except Exception as e:
        return Outcome("error", f"{where}: the oracle failed: {_short_trace(e)}")
    bug = _differs(want, shuffled, rtol, atol)
    if bug:
        return Outcome("program_bug", f"{where}: the result depends on block order or uninitialized "
                       f"memory (interp shuffled+poisoned vs plain): {bug}")
    if plugins.resolve(target).kind == ORACLE:
        return Outcome("pass")
    try:
        got = _run(func, mod.OUT_IDX, target, args)
    except Exception as e:
        return Outcome("error", f"{where}: target {target} failed: {_short_trace(e)}")
    diff = _differs(want, got, rtol, atol)
    return Outcome("mismatch", f"{where}: target {target} disagrees with interp: {diff}") if diff else \
        Outcome("pass")
