"""Two mma.sync-path details in the CUDA source (no GPU needed): T.copy's
`eviction_policy="evict_first"` on vectorized global <-> fragment copies renders the streaming
accesses `__ldcs` / `__stcs`, and a pipelined GEMM whose tiles are interior issues its
steady-state stage copies under the one tile check, with no per-copy zero-fill select, while
a K tail keeps the per-element bounds check."""

from __future__ import annotations

import re

from cuda_test_util import example_modules

import tilecore
import tilecore.language as T


def _example(name):
    return next(m for m in example_modules() if m.__name__ == name)


def _copy_kernel_source(policy):
    @T.prim_func
    def scale(X: T.Tensor((4, 1024), "float16"), Y: T.Tensor((4, 1024), "float16")):
        with T.Kernel(2, threads=128) as bx:
            x = T.alloc_fragment((2, 1024), "float32")
            T.copy(X[bx * 2, 0], x, eviction_policy=policy)
            for i, j in T.Parallel(2, 1024):
                x[i, j] = x[i, j] * 2.0
            T.copy(x, Y[bx * 2, 0], eviction_policy=policy)

    return tilecore.compile(scale, target="cuda:sm_80").get_kernel_source()


def test_evict_first_copies_stream():
    src = _copy_kernel_source("evict_first")
    loads = len(re.findall(r"__ldcs\(reinterpret_cast<const uint4\*>\(&X\[", src))
    assert loads >= 1 and len(re.findall(r"__stcs\(reinterpret_cast<uint4\*>\(&Y\[", src)) == loads
    assert "= *reinterpret_cast<const uint4*>(&X[" not in src  # every X read streams
    plain = _copy_kernel_source(None)
    assert "__ldcs" not in plain and "__stcs" not in plain
    assert len(re.findall(r"\*reinterpret_cast<const uint4\*>\(&X\[", plain)) == loads


def test_rmsnorm_policies_reach_the_source():
    rmsnorm = _example("rmsnorm")

    def src(**kw):
        k = tilecore.compile(rmsnorm.program(M=8, N=1024, block_M=2, threads=128, **kw), target="cuda:sm_80")
        return k.get_kernel_source()

    default, x_first = src(), src(x_policy="evict_first")
    assert "__ldcs(" not in default and "__stcs(" not in default
    assert x_first.count("__ldcs(") == 2 and "__stcs(" not in x_first  # 2 rows x one 16-byte run


def _loop(src: str) -> str:
    return src[src.index("for (int k"):]


def test_interior_tiles_issue_under_the_tile_check():
    gemm = _example("gemm")
    src = tilecore.compile(gemm.program(M=256, N=256, K=512, block_M=128, block_N=128, block_K=64,
                                        num_stages=2), out_idx=[-1], target="cuda:sm_80").get_kernel_source()
    loop = _loop(src)
    copies = re.findall(r"if \(\(\(2 \+ k\) < 8\)\) asm volatile\(\"cp\.async\.cg\.shared\.global \[%0\], "
                        r"\[%1\], 16;\"", loop)
    assert len(copies) == 16 and "tc_in" not in loop
    # a K tail (K = 500): the copies keep their element bounds check and zero fill
    tail = _loop(tilecore.compile(gemm.program(M=256, N=256, K=500, block_M=128, block_N=128, block_K=64,
                                               num_stages=2), out_idx=[-1], target="cuda:sm_80")
                 .get_kernel_source())
    assert tail.count("const bool tc_in = ") >= 16 and "< 500)" in tail
