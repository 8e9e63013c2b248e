"""tilecore: a tile-programming language and multi-backend compiler for AI kernels.

`import tilecore` loads the core only: no backend, torch or numba is imported until a kernel
is compiled for a target (backends are discovered through entry points at that moment).
`tilecore.torch` (torch custom ops) and `tilecore.plot_layout` are imported on first use.
"""

from .autotuner import autotune
from .compiler import compile, jit  # noqa: A004 - tilecore.compile mirrors tilelang.compile
from .errors import TileError
from .kernel import Kernel
from .plugins import targets

__version__ = "0.1.0"

__all__ = ["TileError", "jit", "compile", "targets", "Kernel", "autotune", "plot_layout",
           "__version__"]


def __getattr__(name: str):
    """Lazy attributes: `tilecore.torch` imports torch, `plot_layout` may import matplotlib."""
    import importlib

    if name == "torch":
        return importlib.import_module(".torch", __name__)
    if name == "plot_layout":
        return importlib.import_module(".visual", __name__).plot_layout
    raise AttributeError(f"module 'tilecore' has no attribute {name!r}")
