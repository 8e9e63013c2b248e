"""TileLang's `tilelang.contrib.nvcc` queries a program makes of the CUDA toolchain's target.

`get_target_compute_version(target=None)`: the compute capability as "major.minor" ("9.0"),
from the target's arch (`cuda:sm_90a`, or a TileLang/TVM target string with `-arch=sm_90`)
when it names one, else from the visible GPU (through torch); TileTargetError when neither does.
"""

from __future__ import annotations

import re

from ..errors import TileTargetError


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """(major, minor) of a "major.minor" string."""
    major, _, minor = str(compute_version).partition(".")
    try:
        return int(major), int(minor or 0)
    except ValueError:
        raise TileTargetError(f"compute version {compute_version!r} is not major.minor",
                              hint='give it as "9.0"') from None


def get_target_compute_version(target=None) -> str:
    """See the module docstring."""
    m = re.search(r"sm_(\d+)", str(target)) if target is not None else None
    if m:
        d = m.group(1)
        return f"{d[:-1]}.{d[-1]}"
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        raise TileTargetError("get_target_compute_version: the target names no arch and no CUDA "
                              "device is visible", hint='pass a target with an arch, e.g. '
                              '"cuda:sm_90a"')
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


__all__ = ["get_target_compute_version", "parse_compute_version"]
