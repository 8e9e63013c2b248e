"""Markers for the core tests that also check optional backends: `tests/` must pass with only
the core and the toy backend installed (the oracle's own tests live in backends/interp)."""

import importlib.util

import pytest

_MODULES = {"interp": "tilecore_interp", "cpu": "tilecore_cpu", "emu": "tilecore_emu",
            "cuda": "tilecore_cuda", "hip": "tilecore_hip", "metal": "tilecore_metal",
            "metal-cpu": "tilecore_metal", "tvm": "tilecore_tvm"}
HAVE = {name: importlib.util.find_spec(module) is not None for name, module in _MODULES.items()}
HAVE_INTERP = HAVE["interp"]
needs_interp = pytest.mark.skipif(not HAVE_INTERP, reason="the interp backend is not installed")


def target_params(*targets: str) -> list:
    """`pytest.param`s of target names (`"emu:sm_80"`), each skipped when its backend
    distribution is not installed."""
    return [pytest.param(t, marks=pytest.mark.skipif(not HAVE[t.split(":")[0]], reason=f"no {t}"))
            for t in targets]


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """A compile cache of the test's own (`TILECORE_CACHE_DIR` in its tmp_path)."""
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path))
