"""RMSNorm's shared-memory row variants on emu:sm_80 (race-checked): the persistent grid that
streams row tiles through `T.Pipelined` cp.async stages, with a tile count that does not divide
by the grid (the last round is skipped by some blocks), and the staged kernel that reads its rows
twice from shared memory; plus the fp16-held single-pass row and the two-pass kernel built as
torch.compile's (elementwise accumulation across tiles, one reduction, the second pass reading X
again)."""

import importlib

import numpy as np
import pytest

import tilecore

pytest.importorskip("tilecore_cuda")
rmsnorm = importlib.import_module("rmsnorm")


@pytest.mark.parametrize("kw", [
    dict(M=5, N=256, block_M=1, threads=32, blocks=2, num_stages=3),  # 5 tiles on 2 blocks
    dict(M=4, N=256, block_M=2, threads=32, staged=True),
    dict(M=4, N=256, block_M=2, threads=32, hold="storage"),
    dict(M=4, N=512, block_M=2, threads=32, block_N=256, l2_reread=True),
], ids=["persistent", "staged", "hold_fp16", "l2_reread"])
def test_rmsnorm_row_variants(kw):
    sizes = dict(M=kw["M"], N=kw["N"])
    kernel = tilecore.jit(rmsnorm.program(**kw), out_idx=rmsnorm.OUT_IDX, target="emu:sm_80")
    if "blocks" in kw:  # a real pipeline: two tiles in flight behind the one being reduced
        assert "async_wait(cp.async, pending=1)" in kernel.get_ir("async-pipeline")
    args = rmsnorm.make_inputs(np.random.default_rng(kw["M"]), **sizes)
    y = kernel(*args)
    np.testing.assert_allclose(y.astype(np.float32), rmsnorm.reference(*args).astype(np.float32),
                               **rmsnorm.TOLERANCE)


def test_persistent_rows_need_exact_tiles():
    with pytest.raises(ValueError, match="multiple of threads"):
        rmsnorm.program(M=5, N=200, threads=32, blocks=2)
