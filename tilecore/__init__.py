"""tilecore: a tile-programming language and multi-backend compiler for AI kernels."""

from .errors import TileError

__version__ = "0.1.0"


def __getattr__(name):
    # Lazy: `import tilecore` stays light (no backend, torch or numba import).
    if name in ("jit", "compile"):
        from . import jit as _jit

        return getattr(_jit, name)
    if name == "Kernel":
        from .kernel import Kernel

        return Kernel
    if name == "targets":
        from .plugins import targets

        return targets
    if name == "language":
        import importlib

        return importlib.import_module(".language", __name__)
    raise AttributeError(f"module 'tilecore' has no attribute {name!r}")


__all__ = ["TileError", "jit", "compile", "targets", "Kernel", "__version__"]
