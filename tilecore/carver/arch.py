"""TileLang's `tilelang.carver.arch`: facts about the device kernels run on.

`driver` answers the CUDA-driver queries TileLang examples make (`driver.get_num_sms()` sizes
persistent kernels' grids); `CUDA(target)` / `CDNA(target)` describe a GPU target with
TileLang's attribute names, filled from the visible device (through torch) and from the
target's facts (`tilecore.plugins.facts`). On a machine without that GPU every query raises
TileTargetError: tilecore does not invent device numbers.
"""

from __future__ import annotations

import types

from ..compat import get_num_sms
from ..errors import TileTargetError


def _props(device: int = 0):
    """torch's properties of CUDA (or ROCm) device `device`; TileTargetError when none is visible."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        raise TileTargetError("tilecore.carver.arch needs a visible GPU (none is)",
                              hint="run on a machine with a GPU and a GPU build of torch, or "
                                   "give the numbers (e.g. the grid size) explicitly")
    return torch.cuda.get_device_properties(device)


def get_device_name(device_id: int = 0) -> str:
    """The GPU's name."""
    return str(_props(device_id).name)


def get_shared_memory_per_block(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory one block may use without opting in (48 KiB on NVIDIA GPUs), in bytes
    (or "kb" / "mb")."""
    p = _props(device_id)
    n = int(getattr(p, "shared_memory_per_block", 48 * 1024))
    return {"bytes": n, "kb": n // 1024, "mb": n // (1024 * 1024)}[format]


def get_max_dynamic_shared_size_bytes(device_id: int = 0) -> int:
    """Shared memory one block may use after opting in."""
    p = _props(device_id)
    return int(getattr(p, "shared_memory_per_block_optin", get_shared_memory_per_block(device_id)))


def get_registers_per_block(device_id: int = 0) -> int:
    """32-bit registers available to one block."""
    return int(getattr(_props(device_id), "regs_per_multiprocessor", 65536))


driver = types.SimpleNamespace(
    get_num_sms=get_num_sms, get_device_name=get_device_name,
    get_shared_memory_per_block=get_shared_memory_per_block,
    get_max_dynamic_shared_size_bytes=get_max_dynamic_shared_size_bytes,
    get_registers_per_block=get_registers_per_block)
driver.__doc__ = "TileLang's `carver.arch.driver` queries of the visible GPU (device 0 by default)."


class _GPU:
    """A GPU target's description with TileLang's attribute names (see the module docstring)."""

    platform = "GPU"

    def __init__(self, target="cuda"):
        from .. import plugins

        self.target = plugins.resolve(target) if isinstance(target, str) else target
        facts = plugins.facts(self.target)
        p = _props(0)
        self.name = str(p.name)
        self.compute_max_core = int(p.multi_processor_count)
        self.warp_size = facts.warp_size
        self.smem_cap = facts.shared_memory_bytes
        self.max_smem_usage = facts.shared_memory_bytes
        self.reg_cap = 65536
        major, minor = getattr(p, "major", 0), getattr(p, "minor", 0)
        self.compute_capability = f"{major}{minor}"
        self.sm_version = major * 10 + minor

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target})"


class CUDA(_GPU):
    """An NVIDIA GPU target (`CUDA("cuda")`)."""

    platform = "CUDA"


class CDNA(_GPU):
    """An AMD CDNA GPU target (`CDNA("hip")`)."""

    platform = "CDNA"


__all__ = ["driver", "CUDA", "CDNA", "get_device_name", "get_shared_memory_per_block",
           "get_max_dynamic_shared_size_bytes", "get_registers_per_block"]
