"""What a compile-cache hit and a launch need of the CUDA toolchain, apart from the compilers
(`tilecore_cuda.build`, imported only when something is compiled): the toolchain's identity
for the cache key, and the cuda-bindings import in the order torch needs."""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import re
import sys


def cuda_bindings(name: str):
    """Import `cuda.bindings.<name>`, importing torch first when it is installed.

    Order matters: with cuda-bindings' NVRTC or driver library loaded before torch, a later
    `import torch` was seen failing inside torch's own schema parser and the process crashing at
    exit (H200 machine, torch 2.11, cuda-bindings 13.3); torch first avoids it.
    """
    if importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401
    return importlib.import_module(f"cuda.bindings.{name}")


@functools.lru_cache(maxsize=1)
def toolchain_token() -> str:
    """The CUDA toolchain's identity for the compile-cache key, without loading a compiler or
    scanning package metadata: $TILECORE_CUDA_COMPILER, $CUDA_HOME and the cuda-bindings
    version. (An NVRTC upgrade alone keeps serving cubins the previous one built: they are
    still valid machine code for their arch; `compile_cuda`'s own cache keys on NVRTC.)"""
    return (f"compiler={os.environ.get('TILECORE_CUDA_COMPILER', '')} "
            f"cuda_home={os.environ.get('CUDA_HOME') or os.environ.get('CUDA_PATH') or ''} "
            f"cuda-bindings={_bindings_version()}")


def _bindings_version() -> str:
    """cuda-bindings' version, read from its `_version.py` without importing the package (whose
    `__init__` imports its utilities: 10 ms of a compile-cache hit); "none" when absent."""
    loaded = sys.modules.get("cuda.bindings")
    if loaded is not None:
        return str(getattr(loaded, "__version__", "?"))
    try:
        spec = importlib.util.find_spec("cuda.bindings")  # imports the namespace package `cuda`
    except (ImportError, ValueError):
        return "none"
    if spec is None or not spec.submodule_search_locations:
        return "none"
    for d in spec.submodule_search_locations:
        try:
            text = open(os.path.join(d, "_version.py"), encoding="utf-8").read()
        except OSError:
            continue
        m = re.search(r"""__version__\s*=\s*(?:version\s*=\s*)?(?:['"]([^'"]+)['"])""", text)
        # a layout without the assignment: the file's hash still changes with the version
        return m.group(1) if m else hashlib.sha256(text.encode()).hexdigest()[:16]
    return "?"
