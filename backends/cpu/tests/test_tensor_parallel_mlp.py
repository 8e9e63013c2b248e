"""The tensor-parallel MLP example (examples/tensor_parallel_mlp.py) on the cpu target: two
ranks spawned with torch.distributed's gloo backend, each running its slice of the block with
tilecore kernels, agree after the all-reduce with the unsplit block and with NumPy."""

import os
import sys

import numpy as np
import pytest

pytest.importorskip("torch.distributed")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
import tensor_parallel_mlp as tp  # noqa: E402

SMALL = dict(tokens=64, hidden=128, ffn=256)


def test_two_ranks_match_the_unsplit_block(tmp_path):
    out = tmp_path / "y.npz"
    tp.spawn(2, "cpu", out_path=str(out), sizes=SMALL)
    r = np.load(out)
    assert r["y"].shape == (SMALL["tokens"], SMALL["hidden"])
    np.testing.assert_allclose(r["y"], r["y1"], **tp.TOLERANCE)
    np.testing.assert_allclose(r["y"], r["ref"], **tp.TOLERANCE)


def test_one_rank_alone_is_only_a_partial_sum():
    """The check is sharp: without the all-reduce a rank's product misses the other half."""
    x, w1, b1, w2 = tp.make_weights(0, **SMALL)
    h = tp.reference(x, *tp.shard(w1, b1, w2, 0, 2)[:2], np.eye(SMALL["ffn"] // 2))
    partial = h @ tp.shard(w1, b1, w2, 0, 2)[2].astype(np.float64)
    assert not np.allclose(partial, tp.reference(x, w1, b1, w2), **tp.TOLERANCE)
