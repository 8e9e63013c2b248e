"""ThreadSanitizer finds a removed threadgroup_barrier in generated MSL run on metal-cpu."""

import glob
import subprocess

import numpy as np
import pytest
from metal_test_util import needs_clang
from tilecore_metal.build import find_clang
from tilecore_metal.sanitize import run_under_tsan

import tilecore
import tilecore.language as T

BARRIER = "threadgroup_barrier(mem_flags::mem_threadgroup);"


def _reverse():
    @T.prim_func
    def reverse(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((256,), "float32")
            T.copy(A[0], s)
            for i in T.Parallel(256):
                B[i] = s[255 - i] + bx

    return reverse


def _tsan_runtime() -> bool:
    """Whether clang++ finds ThreadSanitizer's runtime (Debian: libclang-rt-22-dev)."""
    cxx = find_clang()
    if cxx is None:
        return False
    out = subprocess.run([cxx, "-print-runtime-dir"], capture_output=True, text=True, check=False)
    return bool(glob.glob(f"{out.stdout.strip()}/*tsan*"))


@needs_clang
@pytest.mark.skipif(not _tsan_runtime(), reason="clang++ has no ThreadSanitizer runtime "
                    "(apt-get install libclang-rt-22-dev; .ci/run installs it)")
def test_tsan_reports_a_removed_barrier_and_nothing_otherwise():
    kernel = tilecore.jit(_reverse(), out_idx=[-1], target="metal-cpu")
    a = np.arange(256, dtype=np.float32)
    np.testing.assert_array_equal(kernel(a), a[::-1])
    art = kernel.artifact
    src = art.source
    assert src.count(BARRIER) == 1  # thread i reads what thread 127 - i (mod 128) wrote
    clean = run_under_tsan(src, art, [1024, 1024], [0, 0], (1, 1, 1))
    assert clean.returncode == 0 and clean.races == 0, clean.output[-3000:]
    racy = run_under_tsan(src.replace(BARRIER, ""), art, [1024, 1024], [0, 0], (1, 1, 1))
    assert racy.races >= 1, racy.output[-3000:]
    assert "tilecore_smem" in racy.output or "reverse" in racy.output
