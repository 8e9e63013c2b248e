"""tilecore: a tile-programming language and multi-backend compiler for AI kernels.

`import tilecore` loads almost nothing: `tilecore.jit`, `tilecore.compile`, `tilecore.Kernel`,
`tilecore.targets` and every submodule (`tilecore.plugins`, ...) are imported on first use
(PEP 562), and no backend, torch, numba or CUDA is touched until a kernel is compiled for a
target (backends are discovered through entry points at that moment). `tilecore.torch`
(torch custom ops) imports torch and `tilecore.plot_layout` may import matplotlib, on first use.
"""

from __future__ import annotations

import importlib

from .errors import TileError

__version__ = "0.1.0"

# public name -> (submodule, attribute), imported when first asked for
_LAZY = {"compile": ("compiler", "compile"), "jit": ("compiler", "jit"),
         "Kernel": ("kernel", "Kernel"), "targets": ("plugins", "targets"),
         "autotune": ("autotuner", "autotune"), "plot_layout": ("visual", "plot_layout"),
         # TileLang's host API under tilecore's names (tilecore/compat.py says why)
         "JITKernel": ("kernel", "Kernel"), "cdiv": ("math", "cdiv"),
         "PassConfigKey": ("transform", "PassConfigKey"),
         "TensorSupplyType": ("profiler", "TensorSupplyType"),
         "set_log_level": ("compat", "set_log_level"), "disable_cache": ("compat", "disable_cache"),
         "get_num_sms": ("compat", "get_num_sms"), "DataType": ("tvm", "DataType")}

__all__ = ["TileError", "jit", "compile", "targets", "Kernel", "autotune", "plot_layout",
           "__version__", "cdiv", "PassConfigKey", "TensorSupplyType", "set_log_level",
           "disable_cache", "get_num_sms", "layout", "math", "testing", "JITKernel"]


def __getattr__(name: str):
    """Import a public function or a submodule on first access (`tilecore.jit`, `tilecore.plugins`)."""
    if name in _LAZY:
        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{mod}", __name__), attr)
        globals()[name] = value
        return value
    if not name.startswith("__"):
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module 'tilecore' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
