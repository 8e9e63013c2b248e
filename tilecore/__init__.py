"""tilecore: a tile-programming language and multi-backend compiler for AI kernels.

`import tilecore` loads the core only: no backend, torch or numba is imported until a kernel
is compiled for a target (backends are discovered through entry points at that moment).
"""

from .compiler import compile, jit  # noqa: A004 - tilecore.compile mirrors tilelang.compile
from .errors import TileError
from .kernel import Kernel
from .plugins import targets

__version__ = "0.1.0"

__all__ = ["TileError", "jit", "compile", "targets", "Kernel", "__version__"]
