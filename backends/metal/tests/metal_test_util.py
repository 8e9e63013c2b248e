"""Helpers shared by the Metal tests."""

from __future__ import annotations

import pytest
from tilecore_metal import lowering, plugin
from tilecore_metal.build import find_clang

from tilecore import plugins


def ensure_registered() -> None:
    """Register the metal hooks unless the installed distribution already provides them."""
    if "metal" in plugins.target_infos():
        return
    plugins.register(lowering, name="metal-lowering")
    plugins.register(plugin, name="metal")


needs_clang = pytest.mark.skipif(find_clang() is None,
                                 reason="metal-cpu needs clang++ (apt-get install -y clang-22)")
