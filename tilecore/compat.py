"""TileLang's small top-level host functions, with what each means in tilecore.

tilecore has no `tilelang` module: a TileLang program ports by replacing `tilelang` with
`tilecore` in its imports, and every TileLang host name lives at the same dotted path under
`tilecore` (`tilecore.profiler.do_bench`, `tilecore.autotuner.autotune`, `tilecore.testing`,
`tilecore.math`, `tilecore.transform.PassConfigKey`, `tilecore.utils.tensor`, `tilecore.layout`).
docs/tilelang.md lists each name and every difference.
"""

from __future__ import annotations

import logging
import os

_log = logging.getLogger("tilecore")


def set_log_level(level) -> None:
    """Set the `tilecore` logger's level (a logging level or its name, e.g. "WARNING")."""
    _log.setLevel(level.upper() if isinstance(level, str) else level)


def disable_cache() -> None:
    """No build of this process reuses an on-disk artifact: the backends' cache
    (TILECORE_CACHE_DIR) moves to a fresh, empty temporary folder."""
    import tempfile

    os.environ["TILECORE_CACHE_DIR"] = tempfile.mkdtemp(prefix="tilecore-nocache-")


def get_num_sms(device: int = 0) -> int:
    """The number of streaming multiprocessors of CUDA device `device` (through torch); raises
    TileTargetError when no CUDA device is visible."""
    from .errors import TileTargetError

    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        raise TileTargetError("get_num_sms needs a CUDA device (none is visible)",
                              hint="run on a machine with a CUDA GPU and a CUDA build of torch")
    return torch.cuda.get_device_properties(device).multi_processor_count


__all__ = ["set_log_level", "disable_cache", "get_num_sms"]
