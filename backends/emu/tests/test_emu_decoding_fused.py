"""Split-KV decoding with the combine fused into the split kernel (`flash_decoding.program(
fuse_combine=True)`): each block counts itself in on its (sequence, KV head) counter and the
group's last block merges the partials. Against float64 softmax over the whole cache on
`interp`, `emu:sm_80` (mma.sync, cp.async) and `emu:sm_90a` (the Hopper tiles: wgmma with TMA
K/V, evict_first), with ragged caches and splits that hold no keys; a second call reuses the
workspaces (the counters are back at zero) and repeats the output bit for bit. `cpu` runs tile
programs only and the counter's old value is a thread's (`T.atomic_add(return_prev=True)`), so
the fused kernel is not for cpu (the two-kernel path is)."""

import flash_decoding
import numpy as np
import pytest

import tilecore
from tilecore.example_protocol import sizes_for

HOPPER = dict(block_N=64, block_H=64, num_stages=2, threads=128, kv_eviction="evict_first", dtype="bfloat16")


@pytest.mark.parametrize("target,sizes", [
    # 150 keys in 64-key tiles: 3 tiles over 4 splits (the last has none), a ragged last tile
    ("emu:sm_90a", dict(batch=2, heads=8, kv_heads=2, seq_kv=150, dim=64, num_split=4, **HOPPER)),
    # head-major cache (SDPA's layout) on the TMA tiles, 2 splits
    ("emu:sm_90a", dict(batch=2, heads=8, kv_heads=2, seq_kv=150, dim=64, num_split=2, kv_layout="hnd",
                        **HOPPER)),
    # paged, sequence lengths 64..128 in 32-key tiles over 4 splits: the short ones end early
    ("emu:sm_80", dict(batch=3, heads=4, kv_heads=2, seq_kv=128, dim=64, num_split=4, block_N=32, paged=True,
                       page_size=64)),
    ("interp", dict(batch=3, heads=4, kv_heads=2, seq_kv=128, dim=64, num_split=4, block_N=32, paged=True,
                    page_size=64)),
], ids=["sm90a-tma-empty-split", "sm90a-hnd", "sm80-paged-ragged", "interp-paged-ragged"])
def test_fused_combine_matches_float64_and_resets_counters(target, sizes):
    sizes = dict(sizes, fuse_combine=True)
    kernel = tilecore.jit(flash_decoding.program(**sizes_for(flash_decoding.program, sizes)), out_idx=[-1],
                          target=target)
    inputs = flash_decoding.make_inputs(np.random.default_rng(21),
                                        **sizes_for(flash_decoding.make_inputs, sizes))
    (op, _), (lp, _), (cs, _) = flash_decoding.workspace_shapes(
        **sizes_for(flash_decoding.workspace_shapes, sizes))
    # NaN workspaces: a partial read before its split wrote it would show in the output
    work = [np.full(op, np.nan, np.float32), np.full(lp, np.nan, np.float32), np.zeros(cs, np.int32)]
    out = kernel(*inputs, *work)
    q, k, v = inputs[:3]
    lens = [sizes["seq_kv"]] * q.shape[0]
    if sizes.get("paged"):
        lens = inputs[4]
        assert len(set(lens)) > 1  # ragged
        k, v = (flash_decoding.contiguous_cache(x, inputs[3], lens, sizes["seq_kv"]) for x in (k, v))
    elif sizes.get("kv_layout") == "hnd":
        k, v = (x.transpose(0, 2, 1, 3) for x in (k, v))
    want, _ = flash_decoding.partials64(q, k, v, lens, 1)
    np.testing.assert_allclose(out.astype(np.float32), want[:, :, 0], rtol=2e-2, atol=2e-2)
    assert (work[2] == 0).all()
    np.testing.assert_array_equal(kernel(*inputs, *work), out)


def test_fused_combine_rejects_one_split():
    with pytest.raises(ValueError, match="num_split must be > 1"):
        flash_decoding.program(batch=1, heads=2, kv_heads=1, seq_kv=64, dim=64, num_split=1,
                               fuse_combine=True)
