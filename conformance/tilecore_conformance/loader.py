"""Turning generated source into kernels: files on disk (the frontend reads real source files),
imported once, compiled once per target."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from .case import KERNEL_NAME, Case

_MODULES: dict[str, object] = {}
_KERNELS: dict[tuple[str, str], object] = {}


def work_dir() -> Path:
    """Where generated files live: $TILECORE_CONFORMANCE_DIR, or a per-user temp folder."""
    base = os.environ.get("TILECORE_CONFORMANCE_DIR")
    if not base:
        user = os.environ.get("USER") or str(os.getuid())
        base = os.path.join(tempfile.gettempdir(), f"tilecore-conformance-{user}")
    p = Path(base)
    p.mkdir(parents=True, exist_ok=True)
    return p


def import_file(path: Path, name: str):
    """Import the module at `path` under `name` (kept in sys.modules so inspect finds it)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def prim_func(case: Case):
    """The case's PrimFunc, parsed by the frontend from a file holding the case's source."""
    mod = _MODULES.get(case.key)
    if mod is None:
        d = work_dir() / "kernels"
        d.mkdir(exist_ok=True)
        path = d / f"case_{case.key}.py"
        if not path.exists() or path.read_text() != case.source:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(case.source)
            os.replace(tmp, path)
        mod = import_file(path, f"tilecore_conformance_case_{case.key}")
        _MODULES[case.key] = mod
    return getattr(mod, KERNEL_NAME)


def kernel(case: Case, target: str):
    """The case compiled for `target` (cached: shrinking and repeated seeds reuse it)."""
    key = (case.key, target)
    k = _KERNELS.get(key)
    if k is None:
        import tilecore

        k = tilecore.compile(prim_func(case), out_idx=None, target=target)
        _KERNELS[key] = k
    return k


def forget() -> None:
    """Drop cached modules and kernels (tests that register backends at run time)."""
    for key in list(_MODULES):
        sys.modules.pop(f"tilecore_conformance_case_{key}", None)
    _MODULES.clear()
    _KERNELS.clear()
