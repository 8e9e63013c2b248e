"""Replicated fragments: every thread holds the element, exactly one stores it to memory.

A loop (or copy, or region atomic) partitioned by a replicated layout runs each iteration in
every replica. Fragment writes must happen in all of them (each keeps its copy), but a store to
shared or global memory happens once: the lowering guards it with the element's designated
writer (`Layout.writers`). Before, all 128 threads stored — the emulator reported a write-write
race on the shared store (found by the long conformance profile, minimized below), and an atomic
added its value once per replica (128 x the right sum, silently)."""

from __future__ import annotations

import numpy as np
import pytest
from tilecore_conformance.case import Case, Param
from tilecore_conformance.runner import check_case

import tilecore
import tilecore.language as T

TARGETS = ["emu:sm_80", "emu:sm_90", "emu:hip:gfx942"]

# tilecore_conformance.reduce.minimize's output for the long profile's failure (seed 1000 region)
MINIMIZED = '''"""A regression program of tilecore-conformance: a replicated fragment stored to shared."""
import tilecore.language as T


@T.prim_func
def main(X: T.Tensor((1, 1), 'int32'), Y: T.Tensor((1, 1), 'float64'), V: T.Tensor((1,), 'int16'),
         Out: T.Tensor((1, 1), 'float64')):
    with T.Kernel(1, 1, threads=128) as (bx, by):
        y_f = T.alloc_fragment((4, 4), 'float64')
        T.copy(Y[by * 4:(by + 1) * 4, bx * 4:(bx + 1) * 4], y_f)
        y_f1 = T.alloc_fragment((4, 4), 'float64')
        T.copy(y_f, y_f1)
        v_f = T.alloc_fragment((4,), 'int16')
        T.copy(V[bx * 4], v_f)
        t = T.alloc_shared((4, 4), 'float64')
        for i in T.serial(4):
            for j in T.Parallel(4):
                if (i < v_f[j]) or (by * 4 + i < 1):
                    t[i, j] = T.abs((y_f1[i, j] + 0.25))
                else:
                    t[i, j] = (T.floor((bx * 4 + j)) + T.float16(v_f[j]))
        t1 = T.alloc_fragment((4, 4), 'float64')
        for i, j in T.Parallel(4, 4):
            if (t[i, j] != v_f[j]) or ((i + j) % 2 == 0):
                t1[i, j] = t[i, j]
            else:
                t1[i, j] = t[i, j]
        r = T.alloc_fragment((4,), 'float64')
        T.reduce_absmax(t1, r, dim=1)
        T.copy(r, Out[by * 4:(by + 1) * 4, bx])
'''
PARAMS = (Param("X", (1, 1), "int32", 4.0, 0), Param("Y", (1, 1), "float64", 4.0, 2),
          Param("V", (1,), "int16", 4.0, 0), Param("Out", (1, 1), "float64", 0.0, 0, is_output=True))


@pytest.mark.parametrize("target", TARGETS)
def test_minimized_long_profile_program_has_no_false_race(target):
    out = check_case(Case(MINIMIZED, PARAMS), target, seed=0)
    assert out.status == "pass", out.detail


@T.prim_func
def replicated_stores(A: T.Tensor((4, 8), "float32"), Add: T.Tensor((4,), "float32"),
                      Region: T.Tensor((4,), "float32"), S: T.Tensor((4,), "float32"),
                      P: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        a = T.alloc_fragment((4, 8), "float32")
        T.copy(A[0, 0], a)
        r = T.alloc_fragment((4,), "float32")
        T.reduce_sum(a, r, dim=1)  # (4,) from 32 elements on 128 threads: replicated
        s = T.alloc_shared((4,), "float32")
        T.copy(r, s)  # a vector copy from the replicas into shared memory
        p = T.alloc_shared((4,), "float32")
        for j in T.Parallel(4):  # partitioned by r's replicated layout
            T.atomic_add(Add[j], r[j])
            p[j] = r[j] * 2.0
        T.atomic_add(Region[0:4], r)  # a region atomic from the replicas
        T.copy(s, S[0])
        T.copy(p, P[0])


@pytest.mark.parametrize("target", TARGETS)
def test_replicated_fragment_atomics_add_once_and_stores_do_not_race(target):
    k = tilecore.compile(replicated_stores, out_idx=None, target=target)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    add, region = np.full(4, 1.0, np.float32), np.full(4, -1.0, np.float32)
    s, p = np.zeros(4, np.float32), np.zeros(4, np.float32)
    k(a, add, region, s, p)
    rows = a.sum(axis=1)
    np.testing.assert_array_equal(add, rows + 1.0)  # was 128 * rows + 1
    np.testing.assert_array_equal(region, rows - 1.0)
    np.testing.assert_array_equal(s, rows)
    np.testing.assert_array_equal(p, rows * 2.0)
    # one writer per element: thread 0 for a fully replicated register
    assert "if (tx == 0) atomic_add(Add[0], r[0])" in k.artifact.source
