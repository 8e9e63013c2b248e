"""The on-disk home of generated kernels: numba's `cache=True` needs a real source file, so each
generated module is written once under a directory keyed by a hash of its source, the runtime
helpers' source and the numba version; numba keeps its compiled objects beside it (`__pycache__`),
so a second process importing the same file loads machine code instead of compiling.

The directory is `tilecore.cache.root()/cpu` (`$TILECORE_CACHE_DIR/cpu`, else
`~/.cache/tilecore/cpu`, created 0700). numba's cache files are pickles that numba loads: a
cache directory must be trusted like code (it is per user by default). A damaged numba cache
file (truncated, garbage) is detected when loading fails, the kernel's cache files are deleted,
reported once, and the kernel is compiled again (`load_compiled`). A cache path that is not a
usable directory (a file, no permission) is replaced by a private temporary directory for the
process, with a warning.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import warnings
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from tilecore import cache as tcache

_fallback: list[Path] = []


def cache_dir() -> Path:
    """Where generated kernel modules (and numba's cache of them) live."""
    d = tcache.root() / "cpu"
    if tcache.ensure_dir(d):
        return d
    if not _fallback:
        _fallback.append(Path(tempfile.mkdtemp(prefix="tilecore_cpu_")))
        warnings.warn(f"tilecore cpu cache: {d} is not a writable directory; using {_fallback[0]} "
                      f"for this process (set {tcache.ENV_DIR} to a directory)",
                      tcache.TileCacheWarning, stacklevel=3)
    return _fallback[0]


@lru_cache(maxsize=1)
def runtime_tag() -> str:
    """A hash of everything compiled code depends on besides its own source: numba does not
    notice changes in functions a cached kernel calls, so a change here must change the file."""
    import numba

    from . import intops, runtime
    from .optlevel import SERIAL_OPT

    h = hashlib.sha256(Path(runtime.__file__).read_bytes())
    h.update(Path(intops.__file__).read_bytes())
    h.update(numba.__version__.encode())
    # numba's cache does not record the level code was optimized at (tilecore_cpu.optlevel)
    h.update(f"serial opt {SERIAL_OPT}, numba opt {numba.config.OPT}".encode())
    return h.hexdigest()[:16]


def load(source: str) -> tuple[ModuleType, Path]:
    """Import the generated module `source` from the cache directory (writing it once)."""
    key = hashlib.sha256(source.encode()).hexdigest()[:24]
    modname = f"tilecore_cpu_kernel_{key}"
    if modname in sys.modules:
        mod = sys.modules[modname]
        return mod, Path(mod.__file__)
    d = cache_dir()
    path = d / f"{modname}.py"
    if not _same_text(path, source):
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


def _same_text(path: Path, source: str) -> bool:
    try:
        return path.read_text() == source
    except (OSError, UnicodeDecodeError):
        return False


# What numba raises when one of its cache files is damaged: pickle's errors, a short read, a
# bad zlib stream, a header of the wrong shape.
def _damage_errors() -> tuple:
    import pickle
    import zlib

    return (EOFError, pickle.UnpicklingError, zlib.error, ValueError, TypeError, AttributeError,
            IndexError, KeyError, ImportError, OSError)


_reported: set[str] = set()


def numba_cache_files(path: Path) -> list[Path]:
    """numba's index and data files for the generated module at `path` (wherever numba keeps
    them: NUMBA_CACHE_DIR or `__pycache__` beside the file)."""
    stem = path.stem
    dirs = [path.parent / "__pycache__"]
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        dirs += [p for p in Path(env).rglob("*") if p.is_dir() and p.name == path.parent.name]
        dirs.append(Path(env))
    out = []
    for d in dirs:
        if d.is_dir():
            out += [p for p in d.iterdir() if p.name.startswith(stem + ".") and p.suffix in (".nbi", ".nbc")]
    return out


def load_compiled(path: Path, compile_fn) -> None:
    """Run `compile_fn()` (a numba dispatcher's compile, which loads from numba's cache); when
    a damaged cache file makes it fail, delete this module's numba cache files, report it once,
    and compile again from the source."""
    try:
        compile_fn()
        return
    except _damage_errors() as e:
        files = numba_cache_files(path)
        if not files:
            raise  # not a cache problem: a real error, shown as it is
        for f in files:
            try:
                f.unlink()
            except OSError:
                pass
        if path.stem not in _reported:
            _reported.add(path.stem)
            warnings.warn(f"tilecore cpu cache: numba's cache of {path.name} was damaged "
                          f"({type(e).__name__}: {e}); deleted {len(files)} file(s) and compiled "
                          "again", tcache.TileCacheWarning, stacklevel=3)
    compile_fn()


@contextmanager
def lazy_registries(dispatcher):
    """Around `dispatcher.compile(sig)`: numba's disk-cache load (`Cache.load_overload`) first
    refreshes the target context, which imports and installs every typing/lowering registry
    (numba.np.arraymath imports scipy.linalg to look for BLAS): about 0.25 s of a new process's
    first cache hit, and nothing a loaded kernel uses (its machine code is linked already).
    During that load only, the refresh just initialises numba's runtime (NRT: the kernels
    allocate through it). A cache miss is unaffected: numba's compiler refreshes both contexts
    itself before compiling; BLAS kernels import scipy when they first call np.dot. The global
    compiler lock keeps other threads' compiles away while the shortcut is in place; a numba
    without these internals gets the plain load."""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import rtsys

    cache = getattr(dispatcher, "_cache", None)
    if cache is None or not callable(getattr(cache, "load_overload", None)):
        yield
        return
    with global_compiler_lock:
        if "load_overload" in vars(cache):  # re-entered: the shortcut is in place already
            yield
            return
        plain = cache.load_overload

        def load_overload(sig, ctx):
            ctx.refresh = lambda: rtsys.initialize(ctx)
            try:
                return plain(sig, ctx)
            finally:
                del ctx.refresh

        cache.load_overload = load_overload
        try:
            yield
        finally:
            del cache.load_overload
