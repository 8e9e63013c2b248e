"""Option `tilecore.mbarrier_suspend_hint` (tilecore/lower/pingpong.py `suspend_hints`): every
mbarrier wait of a warp-specialized GEMM passes the suspend-time hint, which ptxas turns from a
polling loop (TRYWAIT, YIELD, branch) into a parked wait (`NANOSLEEP.SYNCS` until the phase
completes); without the option, and in kernels without warp specialization, nothing changes."""

from __future__ import annotations

import os
import subprocess

import pytest
from cuda_test_util import example_modules, needs_nvcc
from tilecore_cuda.build import nvcc_path

import tilecore
from tilecore.lower.pingpong import SUSPEND_NS

CUOBJDUMP = os.environ.get("CUOBJDUMP") or \
    "/work/sass-venv/lib/python3.11/site-packages/triton/backends/nvidia/bin/cuobjdump"
# 256 tiles on 132 blocks: persistent, so ping-pong applies
PINGPONG = dict(M=2048, N=2048, K=512, block_M=128, block_N=128, block_K=64, num_stages=4, threads=128)
HINTED = "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;"


def _source(configs, **kw) -> str:
    gemm = next(m for m in example_modules() if m.__name__ == "gemm")
    return tilecore.compile(gemm.program(**kw), out_idx=[-1], target="cuda:sm_90a",
                            pass_configs=configs).get_kernel_source()


def test_every_wait_of_a_warp_specialized_kernel_is_hinted():
    src = _source({"tilecore.ws_pingpong": True, "tilecore.mbarrier_suspend_hint": True}, **PINGPONG)
    waits = src.count("mbarrier.try_wait.parity")
    assert waits == 5  # producer empty, two consumers' full and order waits
    assert src.count(HINTED) == waits and src.count(f'"r"({SUSPEND_NS}u)') == waits
    assert HINTED not in _source({"tilecore.ws_pingpong": True}, **PINGPONG)
    # no producer warpgroup (a small staged kernel keeps every thread a consumer): unchanged
    small = _source({"tilecore.mbarrier_suspend_hint": True}, M=256, N=256, K=256, block_N=64)
    assert "producer warpgroup" not in small and "mbarrier.try_wait.parity" in small and HINTED not in small


@needs_nvcc
@pytest.mark.skipif(not os.path.isfile(CUOBJDUMP), reason="cuobjdump is not installed")
def test_the_hint_parks_the_waiting_warp_in_sass(tmp_path):
    def sass(configs):
        cu, cubin = tmp_path / "k.cu", tmp_path / "k.cubin"
        cu.write_text(_source(configs, **PINGPONG))
        subprocess.run([nvcc_path(), "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-o", str(cubin),
                        str(cu)], capture_output=True, text=True, check=True)
        return subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True,
                              check=True).stdout

    hinted = sass({"tilecore.ws_pingpong": True, "tilecore.mbarrier_suspend_hint": True})
    plain = sass({"tilecore.ws_pingpong": True})
    assert "NANOSLEEP.SYNCS" in hinted and "YIELD" not in hinted
    assert "NANOSLEEP" not in plain and "YIELD" in plain
