"""FlashAttention as lowered for sm_90a (no GPU needed): the generic-to-async proxy fence and
the consumer barrier that guard data written before the main loop sit once before it (not in
every iteration), the backward keeps one fence per iteration (for dS, written by ordinary
stores), independent back-to-back gemms share one wgmma wait, wgmma register pins cover only
what each fence/wait orders (no ptxas C7512 serialization of the backward), and dQ's float32
atomics become float2 vector atomics."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest
from cuda_test_util import EXAMPLES, needs_nvcc
from tilecore_cuda.build import nvcc_path
from tilecore_cuda.render_atomics import atomic_run
from tilecore_cuda.wgmma_pins import wgmma_pin_sets

import tilecore
import tilecore.language as T
from tilecore.ir.stmt import For
from tilecore.ir.thread import AsyncCommit, AsyncFence, AsyncWait, Barrier, IntrinsicCall
from tilecore.ir.visit import walk

if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)
CUOBJDUMP = os.environ.get("CUOBJDUMP") or \
    "/work/sass-venv/lib/python3.11/site-packages/triton/backends/nvidia/bin/cuobjdump"
FWD = dict(batch=1, heads=1, seq_len=512, dim=128, dtype="bfloat16", block_M=128, block_N=128,
           num_stages=2, threads=256)
BWD = dict(batch=1, heads=2, seq_len=512, dim=128, dtype="bfloat16", block_M=64, block_N=128,
           num_stages=2, threads=256)


@functools.cache
def _kernel(name):
    """The example compiled for sm_90a (each lowered once per test session)."""
    import importlib

    mod = importlib.import_module(name)
    return tilecore.compile(mod.program(**(FWD if name == "flash_attention" else BWD)), target="cuda:sm_90a")


def _main_loop(kernel):
    """(statements before the consumer's wgmma loop in its statement list, the loop)."""
    body = dict(kernel.stages)["insert-barriers"].func.body
    for n in walk(body):
        if hasattr(n, "stmts"):
            for i, s in enumerate(n.stmts):
                if isinstance(s, For) and s.kind != "parallel" and any(
                        isinstance(c, IntrinsicCall) and c.intrinsic.kind == "wgmma" for c in walk(s)):
                    return n.stmts[:i], s
    raise AssertionError("no loop with wgmma")


def _count(node, pred) -> int:
    return sum(1 for n in walk(node) if pred(n))


def _proxy(n) -> bool:
    return isinstance(n, AsyncFence) and n.kind == "proxy_async"


def test_forward_main_loop_has_no_proxy_fence_and_no_barrier():
    before, loop = _main_loop(_kernel("flash_attention"))
    # Q_shared is written by ordinary stores before the loop; K/V arrive by TMA (async proxy)
    assert _count(loop, _proxy) == 0 and _count(loop, lambda n: isinstance(n, Barrier)) == 0
    assert isinstance(before[-1], Barrier) and "hoisted" in before[-1].reason
    assert any(_proxy(s) for s in before)
    # P V reads the softmax of Q K^T's accumulator: the two gemms keep their own waits
    waits = [n for n in walk(loop) if isinstance(n, AsyncWait) and n.queue == "wgmma"]
    assert len(waits) == 2


def test_backward_keeps_the_fence_for_ds_only_and_three_waits():
    _, loop = _main_loop(_kernel("flash_attention_bwd"))
    fences = [n for n in walk(loop) if _proxy(n)]
    assert len(fences) == 1 and fences[0].loc.line > 0
    assert _count(loop, lambda n: isinstance(n, IntrinsicCall) and n.intrinsic.kind == "wgmma") > 0
    waits = [n for n in walk(loop) if isinstance(n, AsyncWait) and n.queue == "wgmma"]
    commits = [n for n in walk(loop) if isinstance(n, AsyncCommit) and n.queue == "wgmma"]
    assert len(commits) == 5 and len(waits) == 3  # S^T + dP^T, dV + dK, dQ


def _ptxas(src: str, tmp_path) -> tuple[str, str]:
    cu, cubin = tmp_path / "k.cu", tmp_path / "k.cubin"
    cu.write_text(src)
    res = subprocess.run([nvcc_path(), "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17",
                          "-Xptxas", "-v", "-o", str(cubin), str(cu)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    sass = ""
    if os.path.isfile(CUOBJDUMP):
        sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True).stdout
    return res.stderr + res.stdout, sass


@needs_nvcc
def test_backward_wgmma_is_not_serialized(tmp_path):
    src = _kernel("flash_attention_bwd").get_kernel_source()
    log, sass = _ptxas(src, tmp_path)
    assert "C7512" not in log  # "wgmma.mma_async instructions are serialized"
    if sass:
        # one wait per group of gemms issued together (S^T + dP^T, dV + dK, dQ), not one per
        # wgmma instruction (serialized) nor per gemm
        assert sass.count("WARPGROUP.DEPBAR") == 3 and sass.count("HGMMA") == 32
        assert "REDG.E.ADD.F32x2" in sass and "REDG.E.ADD.F32." not in sass


def test_backward_pins_only_the_groups_each_fence_and_wait_orders():
    """The first fence of an iteration opens S^T and dP^T (issued together): it pins both
    accumulators and nothing else; the last wait retires dQ: it pins dQ only. Pinning every
    array everywhere kept all five accumulators live (224 registers: ptxas serialized every
    wgmma); pinning a fence's own group only let ptxas zero dP^T while S^T was in flight (it
    injected waits, C7517)."""
    kernel = _kernel("flash_attention_bwd")
    pins, _ = wgmma_pin_sets(dict(kernel.stages)["insert-barriers"].func.body)
    _, loop = _main_loop(kernel)
    fences = [n for n in walk(loop) if isinstance(n, AsyncFence) and n.kind == "wgmma"]
    waits = [n for n in walk(loop) if isinstance(n, AsyncWait) and n.queue == "wgmma"]

    def names(stmt):
        return sorted(b.name for b in pins[id(stmt)])

    assert names(fences[0]) == ["dp_t", "s_t"]
    assert names(waits[0]) == ["dp_t", "s_t"] and names(waits[-1]) == ["dq"]


def _atomic_tile(cols: int, col0: int):
    @T.prim_func
    def add_tile(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, cols), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64, 64), "float32")
            T.copy(A, f)
            T.atomic_add(C[0:64, col0:col0 + 64], f)

    return add_tile


@pytest.mark.parametrize("cols,col0,vector", [(64, 0, True), (65, 1, False)], ids=["aligned", "odd"])
def test_float32_atomic_runs_vectorize_only_when_aligned(cols, col0, vector):
    src = tilecore.compile(_atomic_tile(cols, col0), target="cuda:sm_90a").get_kernel_source()
    assert ("reinterpret_cast<float2*>" in src or "reinterpret_cast<float4*>" in src) == vector
    assert "atomicAdd(&C[" in src  # the scalar spelling stays (other archs, or the only one)


def test_atomic_run_needs_consecutive_aligned_offsets_on_one_buffer():
    from tilecore import dtypes as dt
    from tilecore.ir.buffer import Buffer
    from tilecore.ir.expr import Var, const
    from tilecore.ir.thread import Atomic

    buf, other = (Buffer(n, (1024,), dt.float32, "global") for n in ("C", "D"))
    base = Var("tx") * 4

    def run(offsets, bufs=None):
        return tuple(Atomic("add", (bufs or [buf] * 4)[k], base + const(o), const(1.0))
                     for k, o in enumerate(offsets))

    assert atomic_run(run([0, 1, 2, 3]), 0) == 4
    assert atomic_run(run([0, 1, 3, 4]), 0) == 2  # 0, 1 then a gap
    assert atomic_run(run([1, 2, 3, 4]), 0) == 1  # starts at an odd element: not provably aligned
    assert atomic_run(run([2, 3, 4, 5]), 0) == 2  # even but not a multiple of 4
    assert atomic_run(run([0, 1, 2, 3], [buf, other, buf, buf]), 0) == 1


@needs_nvcc
def test_warpgroup_turns_render_as_bar_sync_and_arrive(tmp_path):
    """FA3's scheduler barrier (option tilecore.warpgroup_turns) in the overlapped forward:
    `bar.sync` on the warpgroup's own barrier (2 + warpgroup) before each issued run,
    `bar.arrive` on the other's after it; ptxas keeps every HGMMA group and spills nothing."""
    import flash_attention

    src = tilecore.compile(flash_attention.program(**FWD, overlap=True), target="cuda:sm_90a",
                           pass_configs={"tilecore.warpgroup_turns": True}).get_kernel_source()
    waits = src.count('"bar.sync %0, 256;" :: "r"(2 + ((int)threadIdx.x / 128))')
    passes = src.count('"bar.arrive %0, 256;" :: "r"(2 + (((int)threadIdx.x / 128) + 1) % 2)')
    assert (waits, passes) == (4, 4)  # three branches + warpgroup 0's closing wait / the first pass
    log, sass = _ptxas(src, tmp_path)
    assert "0 bytes spill stores" in log and "C7512" not in log
    if sass:
        assert sass.count("BAR.ARV") == 4 and sass.count("HGMMA") == 32
