"""`T.sync_grid()` (tilecore.ir.grid_sync) on interp, cpu and emu: every block finishes the
first phase before any block starts the second, so a block reads what another block wrote
before the sync; misplaced syncs and block state crossing one are located errors."""

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileError, TileSyntaxError

N = 64


@T.prim_func
def mirror(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"),
           C: T.Tensor((N,), "float32")):
    with T.Kernel(4, threads=32) as bx:
        s = T.alloc_shared((16,), "float32")
        T.copy(A[bx * 16], s)
        for i in T.Parallel(16):
            B[bx * 16 + i] = s[i] + 1
        T.sync_grid()
        t = T.alloc_shared((16,), "float32")
        T.copy(B[(3 - bx) * 16], t)  # the mirrored block's phase-one output
        for i in T.Parallel(16):
            C[bx * 16 + i] = t[15 - i] * 2


@pytest.mark.parametrize("target", ["interp", "cpu", "emu:sm_80"])
def test_blocks_see_each_others_writes_after_the_sync(target):
    a = np.arange(N, dtype=np.float32)
    b, c = tilecore.jit(mirror, out_idx=[1, 2], target=target)(a)
    np.testing.assert_array_equal(b, a + 1)
    np.testing.assert_array_equal(c, (a + 1)[::-1] * 2)


def test_a_sync_inside_a_loop_is_an_error():
    @T.prim_func
    def looped(A: T.Tensor((N,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            for k in T.serial(2):
                A[bx] = k
                T.sync_grid()

    with pytest.raises(TileSyntaxError, match="not inside a loop or branch"):
        tilecore.jit(looped, target="interp")


def test_block_state_across_the_sync_is_an_error():
    @T.prim_func
    def carried(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            s = T.alloc_shared((16,), "float32")
            T.copy(A[bx * 16], s)
            T.sync_grid()
            T.copy(s, B[bx * 16])

    with pytest.raises(TileSyntaxError, match="s is used on both sides of T.sync_grid"):
        tilecore.jit(carried, target="interp")


def test_c_style_targets_refuse_it():
    pytest.importorskip("tilecore_cuda")
    with pytest.raises(TileError, match="cooperative launch"):
        tilecore.compile(mirror, out_idx=[1, 2], target="cuda:sm_80").get_kernel_source()
