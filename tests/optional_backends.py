"""Markers for the few core tests that also check an optional backend: `tests/` must pass with
only the core and the toy backend installed (the oracle's own tests live in backends/interp)."""

import importlib.util

import pytest

HAVE_INTERP = importlib.util.find_spec("tilecore_interp") is not None
needs_interp = pytest.mark.skipif(not HAVE_INTERP, reason="the interp backend is not installed")
