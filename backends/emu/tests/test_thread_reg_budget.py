"""`T.set_max_nreg(count, is_inc)` (tilecore.ir.reg_budget) in a warp-specialized thread-level
kernel: kept and executed on emu:sm_90a (setmaxnreg exists there), where the emulator checks it
is warpgroup-aligned; removed with one warning on targets without it (emu:sm_90, interp). The
results are NumPy's everywhere: a register budget changes no value."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileConfigWarning, TileRuntimeError


def producer_consumer(split: int = 128):
    """TileLang's pattern: each role's branch first sets its budget (consumers raise theirs,
    the producer warpgroup gives registers back), then the roles talk through mbarriers."""
    @T.prim_func
    def k(A: T.Tensor((512,), "float32"), B: T.Tensor((512,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((2, 128), "float32")
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([128, 128])
            if tx < split:
                T.set_max_nreg(240, 1)
            if tx < 128:
                for it in T.serial(4):
                    T.barrier_wait(full[it % 2], (it // 2) % 2)
                    B[it * 128 + tx] = S[it % 2, 127 - tx] * 2.0
                    T.barrier_arrive(empty[it % 2])
            else:
                T.set_max_nreg(40, 0)
                for it in T.serial(4):
                    T.barrier_wait(empty[it % 2], (it // 2 + 1) % 2)
                    S[it % 2, tx - 128] = A[it * 128 + tx - 128]
                    T.barrier_arrive(full[it % 2])
    return k


def _want(a: np.ndarray) -> np.ndarray:
    return (a.reshape(4, 128)[:, ::-1] * 2).reshape(-1)


def test_sm90a_keeps_and_executes_the_register_budgets():
    with warnings.catch_warnings():
        warnings.simplefilter("error", TileConfigWarning)  # honoured: nothing to warn about
        k = tilecore.compile(producer_consumer(), target="emu:sm_90a")
    text = k.get_kernel_source()
    assert "T.set_max_nreg(240, 1)" in text and "T.set_max_nreg(40, 0)" in text
    a = np.arange(512, dtype=np.float32)
    b = np.zeros(512, np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, _want(a))


@pytest.mark.parametrize("target", ["emu:sm_90", "interp"])
def test_targets_without_setmaxnreg_warn_once_and_run(target):
    with pytest.warns(TileConfigWarning) as rec:
        k = tilecore.compile(producer_consumer(), target=target)
    text = [str(r.message) for r in rec if issubclass(r.category, TileConfigWarning)]
    for call in ("T.set_max_nreg(240, 1)", "T.set_max_nreg(40, 0)"):
        hits = [t for t in text if call in t]
        assert len(hits) == 1 and f"not applied on {target}" in hits[0], text
    assert all(r.filename.endswith("test_thread_reg_budget.py") for r in rec)
    a = np.arange(512, dtype=np.float32)
    b = np.zeros(512, np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, _want(a))


def test_part_of_a_warpgroup_setting_its_budget_is_a_located_error():
    k = tilecore.compile(producer_consumer(split=64), target="emu:sm_90a")
    with pytest.raises(TileRuntimeError, match="part of warpgroup 0") as e:
        k(np.zeros(512, np.float32), np.zeros(512, np.float32))
    assert "test_thread_reg_budget.py" in str(e.value) and "T.set_max_nreg(240, 1)" in str(e.value)
