"""TileLang's `tilelang.carver.roller` names a program may import (see `tilecore.carver`)."""

from . import rasterization

__all__ = ["rasterization"]
