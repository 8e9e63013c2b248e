"""Conformance of tvm:webgpu: generated programs executed as WGSL on lavapipe against interp.

tvm:llvm runs in the conformance plugin's own CI profile (the `tvm` target kind, 300 programs);
WebGPU programs cost up to 2 s each here (TVM's passes, naga and
lavapipe's shader compiler, the oracle's runs; 0.55 s on average), so the CI sample is 50;
`pytest --tile-target=tvm:webgpu` runs the 300 of the profile.
"""

from __future__ import annotations

import pytest
from tvm_test_util import needs_webgpu

suite = pytest.importorskip("tilecore_conformance.suite")

PROGRAMS = 50


@needs_webgpu
def test_generated_programs_on_webgpu_match_interp():
    stats = suite.check_target("tvm:webgpu", max_examples=PROGRAMS)
    assert stats.ran >= PROGRAMS, stats.summary()
    # WGSL has no 64-bit or 8/16-bit integer types: those dtypes are not generated, by design
    assert set(stats.dtype_skips) <= {"float64", "int64", "int8", "int16", "uint8", "uint16",
                                      "bfloat16", "float8_e4m3fn", "float8_e5m2"}, stats.summary()
