"""Persistent FlashAttention forward (option `tilecore.ws_persistent_any`,
tilecore.lower.warp_specialize._persistent): on a 2-multiprocessor target each of the 2 blocks
walks several (query tile, head) tiles; producer and consumers count the K/V ring across a
block's tiles, so the producer fills the next tile's stages during the epilogue. Checked on
emu:sm_90a against float64 (ragged length, GQA; with and without warpgroup turns), and the
option changes nothing where the trip count depends on the tile (causal)."""

import importlib

import numpy as np
import pytest
from test_emu_tma import PersistentOnTwo  # noqa: E402  (producer always, 2 multiprocessors)

import tilecore
from tilecore import plugins

pytest.importorskip("tilecore_cuda")
fa = importlib.import_module("flash_attention")
PERSISTENT = {"tilecore.ws_persistent_any": True}
SIZES = dict(batch=1, heads=2, kv_heads=1, seq_len=200, dim=128, dtype="bfloat16")
TILES = dict(block_M=128, block_N=128, num_stages=2, threads=256)


@pytest.fixture
def two_sms():
    plugins.register(PersistentOnTwo(), name="two-sms-attention")
    yield
    plugins.unregister("two-sms-attention")


def _run(sizes, tiles, configs):
    kernel = tilecore.jit(fa.program(**sizes, **tiles), out_idx=[-1], target="emu:sm_90a",
                          pass_configs=configs)
    shapes = {x: y for x, y in sizes.items() if x != "is_causal"}
    q, k, v = fa.make_inputs(np.random.default_rng(11), **shapes)
    want = fa.attention64(q, k, v, sizes.get("is_causal", False))[0]
    np.testing.assert_allclose(kernel(q, k, v).astype(np.float32), want.astype(np.float32), **fa.TOLERANCE)
    return kernel.get_ir("final")


@pytest.mark.parametrize("overlap, turns", [(True, True), (False, False)], ids=["overlap-turns", "plain"])
def test_blocks_walk_the_query_tiles(two_sms, overlap, turns):
    configs = dict(PERSISTENT, **({"tilecore.warpgroup_turns": True} if turns else {}))
    ir = _run(SIZES, dict(TILES, overlap=overlap), configs)
    # 4 tiles (2 query tiles x 2 heads) on 2 blocks: both roles walk them
    assert "for tile in serial(block_id, 4, step 2)" in ir
    assert "for tile_produce in serial(block_id, 4, step 2)" in ir
    assert ("warpgroup_turn_wait" in ir) == turns


def test_causal_trip_counts_keep_one_tile_per_block(two_sms):
    ir = _run(dict(SIZES, is_causal=True), TILES, PERSISTENT)
    assert "for tile in serial" not in ir
