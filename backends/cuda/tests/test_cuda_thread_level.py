"""Thread-level kernels rendered as CUDA (thread index, named barriers, mbarrier roles) and
compiled by nvcc for sm_90a; sm_80 refuses mbarriers (docs/architecture.md, "Thread-level
kernels")."""

from __future__ import annotations

import re
import subprocess

import pytest
from cuda_test_util import needs_nvcc
from tilecore_cuda.build import nvcc_path

import tilecore
import tilecore.language as T
from tilecore.errors import TileTargetError


def roles():
    @T.prim_func
    def k(A: T.Tensor((512,), "float32"), B: T.Tensor((512,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((2, 128), "float32")
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([128, 128])
            for it in T.serial(4):
                with T.ws(0):
                    T.barrier_wait(full[it % 2], (it // 2) % 2)
                    B[it * 128 + tx] = S[it % 2, 127 - tx]
                    T.barrier_arrive(empty[it % 2])
                with T.ws(1):
                    T.barrier_wait(empty[it % 2], (it // 2 + 1) % 2)
                    S[it % 2, tx - 128] = A[it * 128 + tx - 128]
                    T.barrier_arrive(full[it % 2])
                if tx < 64:
                    T.sync_threads(2, 64)
    return k


def _nvcc(src: str, tmp_path) -> None:
    cu = tmp_path / "k.cu"
    cu.write_text(src)
    subprocess.run([nvcc_path(), "-cubin", "-gencode=arch=compute_90a,code=sm_90a",
                    "-o", str(tmp_path / "k.cubin"), str(cu)], capture_output=True, text=True, check=True)


@needs_nvcc
def test_mbarrier_roles_compile_for_sm90a(tmp_path):
    src = tilecore.compile(roles(), target="cuda:sm_90a").get_kernel_source()
    assert src.count("mbarrier.init.shared::cta.b64") == 4
    assert "mbarrier.try_wait.parity.shared::cta.b64" in src
    assert "mbarrier.arrive.shared::cta.b64" in src
    assert re.search(r"bar\.sync 2, 64", src)
    # the two roles are one if/else on the warpgroup, each with its own loop
    assert src.count("for (int it = 0; it < 4; it++)") == 2
    _nvcc(src, tmp_path)


def test_sm80_refuses_mbarriers():
    with pytest.raises(TileTargetError, match="T.alloc_barrier needs mbarriers, which cuda:sm_80"):
        tilecore.compile(roles(), target="cuda:sm_80")


def ws_gemm():
    @T.prim_func
    def k(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16"),
          C: T.Tensor((128, 128), "float16")):
        with T.Kernel(2, 2, threads=256) as (bx, by):
            A_s = T.alloc_shared((2, 64, 32), "float16")
            B_s = T.alloc_shared((2, 32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([128, 128])
            with T.ws(0):
                T.clear(C_l)
            for ko in T.serial(4):
                with T.ws(1):
                    T.barrier_wait(empty[ko % 2], (ko // 2 + 1) % 2)
                    T.tma_copy(A[by * 64, ko * 32], A_s[ko % 2, :, :], barrier=full[ko % 2])
                    T.tma_copy(B[ko * 32, bx * 64], B_s[ko % 2, :, :], barrier=full[ko % 2])
                    T.barrier_arrive(full[ko % 2])
                with T.ws(0):
                    T.barrier_wait(full[ko % 2], (ko // 2) % 2)
                    T.gemm(A_s[ko % 2, :, :], B_s[ko % 2, :, :], C_l)
                    T.barrier_arrive(empty[ko % 2])
            with T.ws(0):
                T.copy(C_l, C[by * 64, bx * 64])
    return k


@needs_nvcc
def test_roles_with_tile_operations_compile_for_sm90a(tmp_path):
    # each role's tile operations over its own 128 threads, named barriers 8 + first warpgroup
    src = tilecore.compile(ws_gemm(), target="cuda:sm_90a").get_kernel_source()
    assert "__syncthreads()" in src  # the mbarrier initialization only
    assert re.search(r"bar\.sync (8|9), 128", src)
    _nvcc(src, tmp_path)


def reg_budgets():
    """TileLang's warp-specialized register budgets: each role's branch sets its own first."""
    @T.prim_func
    def k(A: T.Tensor((512,), "float32"), B: T.Tensor((512,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((2, 128), "float32")
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([128, 128])
            if tx < 128:
                T.set_max_nreg(240, 1)
                for it in T.serial(4):
                    T.barrier_wait(full[it % 2], (it // 2) % 2)
                    B[it * 128 + tx] = S[it % 2, 127 - tx]
                    T.barrier_arrive(empty[it % 2])
            else:
                T.set_max_nreg(40, 0)
                for it in T.serial(4):
                    T.barrier_wait(empty[it % 2], (it // 2 + 1) % 2)
                    S[it % 2, tx - 128] = A[it * 128 + tx - 128]
                    T.barrier_arrive(full[it % 2])
    return k


def test_set_max_nreg_is_setmaxnreg_on_sm90a_only(tmp_path):
    """sm_90a: one `setmaxnreg` per branch, first in it, as TileLang writes it; sm_90 (no
    setmaxnreg in its PTX) drops them with a warning naming each line."""
    from tilecore.errors import TileConfigWarning

    src = tilecore.compile(reg_budgets(), target="cuda:sm_90a").get_kernel_source()
    inc = 'asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");'
    dec = 'asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");'
    assert src.count(inc) == 1 and src.count(dec) == 1
    lines = [ln.strip() for ln in src.splitlines()]
    assert lines[lines.index(inc) - 1].startswith("if (") and lines[lines.index(dec) - 1] == "} else {"
    if nvcc_path():
        _nvcc(src, tmp_path)
    with pytest.warns(TileConfigWarning) as rec:
        old = tilecore.compile(reg_budgets(), target="cuda:sm_90").get_kernel_source()
    told = sorted(str(r.message).split(" is accepted")[0] for r in rec)
    assert told == ["T.set_max_nreg(240, 1)", "T.set_max_nreg(40, 0)"], told
    assert all("not applied on cuda:sm_90:" in str(r.message) for r in rec)
    assert "setmaxnreg" not in old
