"""Failure reports: a runnable tilecore source file per failing case, and its rerun entry point."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import loader
from .case import KERNEL_NAME, Case

_FOOTER = '''

# ---- conformance case data: rerun with `python {name}` (or pass another target name)
from tilecore_conformance.case import Param  # noqa: E402

PARAMS = {params}
TARGET = {target!r}
SEED = {seed}

if __name__ == "__main__":
    from tilecore_conformance.report import rerun

    rerun(__file__, {kernel}, PARAMS, TARGET, SEED)
'''


class ConformanceFailure(AssertionError):
    """A target disagreed with the oracle (or a program was found to be ill-formed)."""

    def __init__(self, message: str, path: Path, case: Case, seed: int, status: str):
        super().__init__(message)
        self.path = path
        self.case = case
        self.seed = seed
        self.status = status


def failures_dir() -> Path:
    """Where failing cases are written ($TILECORE_CONFORMANCE_FAILURES or <work dir>/failures)."""
    d = Path(os.environ.get("TILECORE_CONFORMANCE_FAILURES") or loader.work_dir() / "failures")
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_case(case: Case, target: str, seed: int, summary: str) -> Path:
    """Write the case as a runnable file (kernel source, parameters, seed); returns its path."""
    safe = "".join(c if c.isalnum() else "_" for c in target)
    path = failures_dir() / f"{safe}_{case.key}_seed{seed}.py"
    header = "".join(f"# {ln}\n" for ln in
                     [f"tilecore conformance failure on target {target} (inputs' seed {seed})",
                      *summary.splitlines(), f"rerun: python {path}"])
    params = "[\n" + "".join(f"    {p!r},\n" for p in case.params) + "]"
    body = header + case.source + _FOOTER.format(name=path.name, params=params, target=target,
                                                  seed=seed, kernel=KERNEL_NAME)
    path.write_text(body)
    return path


def failure(case: Case, target: str, seed: int, status: str, detail: str) -> ConformanceFailure:
    """Write the failing case and build the exception whose message names the file."""
    what = {"mismatch": f"target {target} disagrees with interp",
            "program_bug": "PROGRAM BUG (not a backend bug)",
            "error": f"target {target} (or the oracle) failed to run a valid program"}[status]
    path = write_case(case, target, seed, f"{what}: {detail}")
    msg = (f"tilecore conformance: {what}\n  {detail}\n"
           f"  case ({case.lines} kernel lines): {path}\n  inputs' seed: {seed}\n"
           f"  rerun: python {path}   (failures are written under {path.parent})")
    return ConformanceFailure(msg, path, case, seed, status)


def rerun(path: str, func, params, target: str, seed: int) -> None:
    """Entry point of a written failure file: run it on `target` (argv[1] overrides) again."""
    from .runner import check_case

    target = sys.argv[1] if len(sys.argv) > 1 else target
    case = Case(Path(path).read_text(), tuple(params))
    out = check_case(case, target, seed, func=func)
    print(f"{target}: {out.status}" + (f"\n  {out.detail}" if out.detail else ""))
    sys.exit(0 if out.ok else 1)
