"""Shared test helpers: skip markers for machines without TVM or without a WebGPU adapter."""

from __future__ import annotations

import importlib.util

import pytest

HAS_TVM = importlib.util.find_spec("tvm") is not None


def _webgpu_reason() -> str | None:
    if not HAS_TVM:
        return "apache-tvm is not installed"
    from tilecore_tvm.webgpu import adapter_reason

    return adapter_reason()


needs_tvm = pytest.mark.skipif(not HAS_TVM, reason="apache-tvm is not installed")
WEBGPU_REASON = _webgpu_reason()
needs_webgpu = pytest.mark.skipif(WEBGPU_REASON is not None, reason=str(WEBGPU_REASON))
