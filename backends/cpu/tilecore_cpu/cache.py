"""The on-disk home of generated kernels: numba's `cache=True` needs a real source file, so each
generated module is written once under a directory keyed by a hash of its source, the runtime
helpers' source and the numba version; numba keeps its compiled objects beside it (`__pycache__`),
so a second process importing the same file loads machine code instead of compiling.

The directory is `$TILECORE_CACHE_DIR/cpu` when that variable is set, else `~/.cache/tilecore/cpu`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from types import ModuleType


def cache_dir() -> Path:
    """Where generated kernel modules (and numba's cache of them) live."""
    root = os.environ.get("TILECORE_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "tilecore"
    return base / "cpu"


@lru_cache(maxsize=1)
def runtime_tag() -> str:
    """A hash of everything compiled code depends on besides its own source: numba does not
    notice changes in functions a cached kernel calls, so a change here must change the file."""
    import numba

    from . import runtime

    h = hashlib.sha256(Path(runtime.__file__).read_bytes())
    h.update(numba.__version__.encode())
    return h.hexdigest()[:16]


def load(source: str) -> tuple[ModuleType, Path]:
    """Import the generated module `source` from the cache directory (writing it once)."""
    key = hashlib.sha256(source.encode()).hexdigest()[:24]
    modname = f"tilecore_cpu_kernel_{key}"
    if modname in sys.modules:
        mod = sys.modules[modname]
        return mod, Path(mod.__file__)
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{modname}.py"
    if not path.exists() or path.read_text() != source:
        # write-then-rename: a concurrent process never imports a half-written file; the file
        # is never rewritten afterwards, so numba's index (keyed by its mtime) stays valid
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[modname]
        raise
    return mod, path
