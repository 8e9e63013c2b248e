"""tilecore: a tile-programming language and multi-backend compiler for AI kernels.

`import tilecore` loads the core only: no backend, torch or numba is imported until a kernel
is compiled for a target (backends are discovered through entry points at that moment).
"""

from . import layout, math, testing  # TileLang's tilelang.layout / .math / .testing
from .autotuner import autotune
from .compat import disable_cache, get_num_sms, set_log_level
from .compiler import compile, jit  # noqa: A004 - tilecore.compile mirrors tilelang.compile
from .errors import TileError
from .kernel import Kernel
from .kernel import Kernel as JITKernel  # TileLang's name for a compiled kernel
from .math import cdiv
from .plugins import targets
from .transform import PassConfigKey
from .utils.tensor import TensorSupplyType

__version__ = "0.1.0"

__all__ = ["TileError", "jit", "compile", "targets", "Kernel", "__version__", "cdiv",
           "PassConfigKey", "TensorSupplyType", "set_log_level", "disable_cache", "get_num_sms",
           "layout", "math", "testing", "autotune", "JITKernel"]
