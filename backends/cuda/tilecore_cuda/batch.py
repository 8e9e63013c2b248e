"""Many generated kernels in one nvcc run: one translation unit, each kernel in its own
namespace under a unique entry name.

A small kernel's nvcc build is mostly fixed cost (the host preprocessor over cuda_runtime.h
and the CUDA headers, cicc's front end over them: about 0.5 CPU-s of a 1 s build), paid once
per run here instead of once per kernel. Each kernel keeps its own code: cicc and ptxas compile
every entry function separately, so registers and stack frames are those of a build of the
kernel alone (`kernel_resources` reads them per entry name). CI's offline register and
compile checks use this (backends/cuda/tests/cuda_test_util.py).
"""

from __future__ import annotations

import re

from tilecore.errors import TileInternalError

_INCLUDE = re.compile(r"^\s*#\s*include\s.*$", re.MULTILINE)


def batch_entry(entry: str, index: int) -> str:
    """The entry name kernel `index` of a batch gets (unique within the batch)."""
    return f"{entry}__tcb{index}"


def batch_source(kernels: list[tuple[str, str]]) -> str:
    """One translation unit holding every `(entry, source)` of `kernels`: the sources'
    `#include`s first (the CUDA headers are include-guarded), then each source in namespace
    `tilecore_batch_<i>` with its `extern "C"` entry renamed to `batch_entry(entry, i)`.
    Raises TileInternalError when a source does not define `entry` as a `__global__`."""
    includes: list[str] = []
    bodies = []
    for i, (entry, source) in enumerate(kernels):
        for line in _INCLUDE.findall(source):
            if line.strip() not in includes:
                includes.append(line.strip())
        body = _INCLUDE.sub("", source)
        head = r"(__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?)"
        new = batch_entry(entry, i)
        body, n = re.subn(head + re.escape(entry) + r"\(", lambda m, new=new: m.group(1) + new + "(",
                          body, count=1)
        if n != 1:
            raise TileInternalError(f"kernel {i} of the batch has no __global__ entry {entry!r}")
        bodies.append(f"namespace tilecore_batch_{i} {{\n{body}\n}}  // namespace tilecore_batch_{i}\n")
    return "\n".join(includes) + "\n\n" + "\n".join(bodies)
