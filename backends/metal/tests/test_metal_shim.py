"""The metal_stdlib shim and the runner on their own: hand-written MSL kernels compiled for
metal-cpu, checked against NumPy (no tilecore lowering involved)."""

import numpy as np
import pytest
from metal_test_util import needs_clang
from tilecore_metal.artifact import MetalCpuArtifact
from tilecore_metal.build import cpu_source
from tilecore_metal.intrinsics import MATRIX_MAP

from tilecore import dtypes as dt
from tilecore.codegen.spec import KernelParam, RenderedKernel
from tilecore.errors import TileTargetError
from tilecore.ir.expr import const

pytestmark = needs_clang

HEAD = "#include <metal_stdlib>\nusing namespace metal;\n"
POS = "uint3 tid [[thread_position_in_threadgroup]], uint3 bid [[threadgroup_position_in_grid]]"


def build(body: str, entry: str, params, threads: int, grid=(1, 1, 1)) -> MetalCpuArtifact:
    """A hand-written kernel as metal-cpu runs generated ones."""
    ps = tuple(KernelParam(n, d, ptr) for n, d, ptr in params)
    rk = RenderedKernel(HEAD + body, entry, tuple(const(g) for g in grid), (threads, 1, 1), 0, ps)
    return MetalCpuArtifact(rk, ("tid", "bid"), tuple(n for n, _, ptr in params if not ptr))


MATRICES = f"""
kernel void mats(device const float* M [[buffer(0)]], device float* E [[buffer(1)]],
                 device float* ET [[buffer(2)]], device float* D [[buffer(3)]], {POS}) {{
  simdgroup_matrix<float, 8, 8> m, t, d;
  simdgroup_load(m, M, 8);
  simdgroup_load(t, M, 8, ulong2(0, 0), true);
  E[tid.x * 2] = m.thread_elements()[0];
  E[tid.x * 2 + 1] = m.thread_elements()[1];
  ET[tid.x * 2] = t.thread_elements()[0];
  ET[tid.x * 2 + 1] = t.thread_elements()[1];
  simdgroup_multiply_accumulate(d, m, t, m);
  simdgroup_store(d, D, 8);
}}
"""


def test_simdgroup_matrices_follow_the_declared_lane_map():
    art = build(MATRICES, "mats", [("M", dt.float32, True), ("E", dt.float32, True),
                                   ("ET", dt.float32, True), ("D", dt.float32, True)], 32)
    m = np.arange(64, dtype=np.float32).reshape(8, 8)
    e, et, d = np.zeros(64, np.float32), np.zeros(64, np.float32), np.zeros(64, np.float32)
    art.run([m, e, et, d], {})
    rows, cols = MATRIX_MAP.arrays()
    np.testing.assert_array_equal(e.reshape(32, 2), m[rows, cols])  # the same table as intrinsics.py
    np.testing.assert_array_equal(et.reshape(32, 2), m.T[rows, cols])
    np.testing.assert_array_equal(d.reshape(8, 8), m @ m.T + m)


COLLECTIVES = f"""
kernel void coll(device const float* X [[buffer(0)]], device float* Y [[buffer(1)]],
                 device int* total [[buffer(2)]], constant int& n [[buffer(3)]], {POS}) {{
  threadgroup float s[48];
  const int i = (int)bid.x * 48 + (int)tid.x;
  s[tid.x] = X[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float v = s[47 - tid.x];
  v = v + simd_shuffle_xor(v, (ushort)1);
  const float4 q = float4(v, 1.0f, 2.0f, 3.0f);
  const uint4 z = uint4(0u);
  Y[i] = q.x * as_type<float>(as_type<uint>(q.y)) + (float)z.w;
  atomic_fetch_add_explicit((device atomic_int*)total, n, memory_order_relaxed);
}}
"""


def test_barrier_shuffle_vectors_atomics_over_groups_and_a_partial_simdgroup():
    # 48 threads: one full SIMD group and one of 16 lanes; 3 groups run in turn
    art = build(COLLECTIVES, "coll", [("X", dt.float32, True), ("Y", dt.float32, True),
                                      ("total", dt.int32, True), ("n", dt.int32, False)], 48, (3, 1, 1))
    x = np.random.default_rng(0).standard_normal(144).astype(np.float32)
    y, total = np.zeros(144, np.float32), np.zeros(1, np.int32)
    art.run([x, y, total], {"n": 5})
    rev = x.reshape(3, 48)[:, ::-1]
    want = rev + rev[:, np.arange(48) ^ 1]
    np.testing.assert_array_equal(y.reshape(3, 48), want)
    assert total[0] == 5 * 144


def test_threadgroup_arrays_become_static_for_the_cpu_only():
    assert cpu_source("  threadgroup float s[48];\n") == "  static threadgroup float s[48];\n"
    assert cpu_source("threadgroup float* p = s;") == "threadgroup float* p = s;"


def test_the_shim_enforces_metal_address_spaces():
    bad = f"""
inline void put(threadgroup float* p) {{ p[0] = 1.0f; }}
kernel void bad(device float* X [[buffer(0)]], {POS}) {{ put(X); }}
"""
    with pytest.raises(TileTargetError, match="address space"):
        build(bad, "bad", [("X", dt.float32, True)], 32)
