"""The asynchronous memory model in CUDA: cp.async pipelines in the source, compiled by nvcc for
sm_80 and sm_90a to SASS with LDGSTS and no local-memory spills; named and warpgroup barriers
as `bar.sync`; and (on a GPU) pipelined GEMMs on ragged shapes against NumPy."""

from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pytest
from cuda_test_util import CI_ARCHS, example_modules, needs_gpu, needs_nvcc
from tilecore_cuda.build import nvcc_path
from tilecore_cuda.render import render_cuda

import tilecore
from tilecore import dtypes as dt
from tilecore.ir.buffer import Buffer
from tilecore.ir.expr import Var, binop, const
from tilecore.ir.module import Module, PrimFunc
from tilecore.ir.stmt import IfThenElse, SeqStmt
from tilecore.ir.thread import AsyncCommit, AsyncCopy, AsyncWait, Barrier, MemLoad, MemStore, ThreadKernel

CUOBJDUMP = os.environ.get("CUOBJDUMP") or \
    "/work/sass-venv/lib/python3.11/site-packages/triton/backends/nvidia/bin/cuobjdump"
needs_cuobjdump = pytest.mark.skipif(not os.path.isfile(CUOBJDUMP), reason="cuobjdump is not installed")


def _example(name):
    return next(m for m in example_modules() if m.__name__ == name)


def _gemm_source(arch="sm_80", pass_configs=None, **kw) -> str:
    gemm = _example("gemm")
    kernel = tilecore.compile(gemm.program(**kw), out_idx=[-1], target=f"cuda:{arch}",
                              pass_configs=pass_configs)
    return kernel.get_kernel_source()


def test_pipelined_gemm_source_uses_cp_async():
    src = _gemm_source(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32, num_stages=3)
    assert "cp.async.cg.shared.global" in src and "__cvta_generic_to_shared" in src
    assert "cp.async.commit_group" in src and "cp.async.wait_group 1;" in src
    # one barrier per k-tile: the main loop runs from its `for` to the final wait (the staged
    # epilogue after it has barriers of its own)
    loop = src[src.index("for (int k"):src.index("cp.async.wait_group 0;")]
    assert loop.count("__syncthreads()") == 1


def test_ragged_gemm_zero_fills_out_of_bounds_tiles():
    src = _gemm_source(M=200, N=136, K=100, block_M=64, block_N=64, block_K=32, num_stages=3)
    # 8-byte A rows (K = 100): .ca with a src-size operand that is 0 outside the tensor
    assert re.search(r"cp\.async\.ca\.shared\.global \[%0\], \[%1\], 8, %2;", src)
    assert "tc_in ? 8 : 0" in src


def _nvcc(src: str, arch: str, tmp_path) -> tuple[str, str]:
    """(ptxas -v log, SASS) of `src` compiled by nvcc for `arch`."""
    cu, cubin = tmp_path / "k.cu", tmp_path / f"k_{arch}.cubin"
    cu.write_text(src)
    gen = f"-gencode=arch=compute_{arch[3:]},code={arch}"
    res = subprocess.run([nvcc_path(), "-cubin", gen, "-Xptxas", "-v", "-o", str(cubin), str(cu)],
                         capture_output=True, text=True, check=True)
    sass = ""
    if os.path.isfile(CUOBJDUMP):
        sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
    return res.stderr + res.stdout, sass


@needs_nvcc
@needs_cuobjdump
@pytest.mark.parametrize("arch", CI_ARCHS)
@pytest.mark.parametrize("block_K, threads", [(32, 128), (64, 128), (32, 256), (64, 256)])
def test_pipelined_gemm_sass_has_ldgsts_and_no_spills(block_K, threads, arch, tmp_path):
    # the cp.async path (sm_90a stages by TMA unless told not to: test_cuda_tma.py)
    src = _gemm_source(arch, M=4096, N=4096, K=4096, block_M=128, block_N=128, block_K=block_K,
                       num_stages=3, threads=threads, pass_configs={"tl.disable_tma_lower": True})
    log, sass = _nvcc(src, arch, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in log and "stack frame" in log
    assert "0 bytes stack frame" in log
    # sm_90a: the tensor cores read the stages through wgmma descriptors (test_cuda_wgmma.py)
    want = ("LDGSTS", "HGMMA") if arch == "sm_90a" else ("LDGSTS", "LDSM", "HMMA")
    assert all(w in sass for w in want)
    assert "STS.128" not in sass  # every A/B tile goes global -> shared without registers


@needs_nvcc
@pytest.mark.parametrize("stages", [2, 3])
def test_pipelined_flash_attention_compiles(stages, tmp_path):
    fa = _example("flash_attention")
    func = fa.program(batch=1, heads=2, seq_len=256, dim=64, is_causal=True, num_stages=stages)
    src = tilecore.compile(func, out_idx=[-1], target="cuda:sm_80").get_kernel_source()
    assert "cp.async.cg.shared.global" in src
    for arch in CI_ARCHS:
        log, _ = _nvcc(src, arch, tmp_path)
        assert "0 bytes spill stores" in log


def _barrier_module() -> Module:
    """256 threads: each warpgroup syncs on its own barrier, warps 0-1 on a named one, and an
    unpredicated and a skipped-when-false cp.async."""
    X = Buffer("X", (256,), dt.float32, "global")
    Y = Buffer("Y", (256,), dt.float32, "global")
    s = Buffer("s", (256,), dt.float32, "shared")
    tx, bx = Var("tx"), Var("bx")
    body = SeqStmt((
        AsyncCopy(s, tx, X, tx, 1),
        AsyncCopy(s, tx, X, tx, 1, binop("lt", tx, 200), False),
        AsyncCommit(),
        AsyncWait(pending=0),
        Barrier("warpgroups", None, "warpgroup", 1),
        IfThenElse(binop("lt", tx, 64), Barrier("two warps", None, "named", 3, 64)),
        MemStore(Y, tx, MemLoad(s, tx - tx % 128 + (tx + 1) % 128)),
    ))
    kernel = ThreadKernel((const(1),), (bx,), tx, 256, 32, (s,), (), body)
    return Module(PrimFunc("hand_async", (X, Y), kernel))


def test_scoped_barriers_render_as_bar_sync():
    src = render_cuda(_barrier_module()).source
    assert 'asm volatile("bar.sync 3, 64;" ::: "memory");' in src
    assert 'asm volatile("bar.sync %0, 128;" :: "r"(1 + (int)threadIdx.x / 128)' in src
    assert 'cp.async.ca.shared.global [%0], [%1], 4;' in src
    assert "if ((tx < 200)) asm volatile" in src


@needs_nvcc
@pytest.mark.parametrize("arch", CI_ARCHS)
def test_scoped_barriers_compile(arch, tmp_path):
    _nvcc(render_cuda(_barrier_module()).source, arch, tmp_path)


@needs_gpu
@pytest.mark.parametrize("M, N, K, stages", [(200, 136, 100, 3), (64, 64, 32, 4), (130, 70, 200, 2),
                                             (1000, 520, 300, 3)])
def test_pipelined_gemm_on_gpu(M, N, K, stages):
    gemm = _example("gemm")
    kernel = tilecore.jit(gemm.program(M=M, N=N, K=K, block_M=64, block_N=64, block_K=32, num_stages=stages),
                          out_idx=[-1], target="cuda")
    a, b = gemm.make_inputs(np.random.default_rng(0), M=M, N=N, K=K)
    c = kernel(a, b)
    np.testing.assert_allclose(np.asarray(c).astype(np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)
