"""`tilecore.layout`: TileLang's `tilelang.layout` names (layout constructors usable outside a
kernel body, e.g. in a helper that builds the `T.annotate_layout` dict)."""

from __future__ import annotations

from .language.layout_ops import make_padded_layout, make_row_major_layout, make_swizzled_layout
from .language.layouts import Fragment, Layout

__all__ = ["Layout", "Fragment", "make_swizzled_layout", "make_padded_layout", "make_row_major_layout"]
