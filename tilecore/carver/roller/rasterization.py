"""TileLang's roller rasterization plans: the classes a hint's `rasterization_plan` is compared
with. tilecore has no roller (`tilecore.carver.template`), so no hint carries one; the grid
swizzle of a kernel is `T.use_swizzle(panel_size, enable=...)`."""

from __future__ import annotations


class Rasterization:
    """A block-order plan of TileLang's roller (see the module docstring)."""


class NoRasterization(Rasterization):
    """Blocks run in launch order (no swizzle)."""


__all__ = ["Rasterization", "NoRasterization"]
