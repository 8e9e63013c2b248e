"""tilecore.contrib.attention_configs: the measured-best Hopper tiles on cuda sm_90 / sm_90a,
the programs' own defaults on every other target (no GPU needed), and the Hopper tiles lower."""

import importlib.util
import sys

import pytest
from cuda_test_util import EXAMPLES

import tilecore
from tilecore.contrib.attention_configs import tuned_config

pytest.importorskip("tilecore_cuda")
if EXAMPLES not in sys.path:  # the kernels are the example scripts
    sys.path.insert(0, EXAMPLES)


def test_hopper_gets_the_tuned_tiles_other_targets_the_defaults():
    fwd = tuned_config("fwd", "cuda:sm_90a", 128, False, "bfloat16")
    assert fwd["overlap"] is True and fwd["block_M"] == 128 and fwd["threads"] == 256
    causal = tuned_config("fwd", "cuda:sm_90a", 128, True, "bfloat16")  # overlapped, key tiles last to first
    assert causal["overlap"] is True and causal["diag_first"] is True
    assert causal["block_N"] % causal["block_M"] == 0
    d64 = tuned_config("fwd", "cuda:sm_90", 64, False, "float16")
    assert (d64["block_M"], d64["threads"]) == (192, 384)  # three consumer warpgroups
    assert tuned_config("fwd", "cuda:sm_90", 64, True, "float16", seq_len=4096)["block_M"] == 128
    assert tuned_config("fwd", "cuda:sm_90", 64, True, "float16", seq_len=16384)["block_M"] == 192
    assert tuned_config("bwd", "cuda:sm_90a", 128, True, "bfloat16")["dq_tma"] is True
    bwd = tuned_config("bwd", "cuda:sm_90a", 128, False, "bfloat16")
    assert bwd["stagger"] is True and bwd["dq_tma"] is True and bwd["dq_early"] is True
    assert tuned_config("decode", "cuda:sm_90a")["direct"] is True
    assert tuned_config("decode", "cuda:sm_90a", seq_len=1024)["kv_eviction"] == "evict_first"
    assert "kv_eviction" not in tuned_config("decode", "cuda:sm_90a", seq_len=16384)
    # emu only where it is installed (the GPU machine's check installs interp and cuda alone)
    emu = ("emu:sm_90",) if importlib.util.find_spec("tilecore_emu") else ()
    for target in ("cuda:sm_80", "interp", *emu):
        assert tuned_config("fwd", target, 128, False, "bfloat16") == {}
    assert tuned_config("fwd", "cuda:sm_90a", 128, False, "float32") == {}  # no 16-bit wgmma tiles
    with pytest.raises(ValueError, match="kind"):
        tuned_config("prefill", "cuda:sm_90a")


def test_tuned_forward_lowers_with_asynchronous_waits():
    import flash_attention as fa

    cfg = tuned_config("fwd", "cuda:sm_90a", 128, False, "bfloat16")
    src = tilecore.compile(fa.program(batch=1, heads=2, seq_len=512, dim=128, dtype="bfloat16", **cfg),
                           out_idx=[-1], target="cuda:sm_90a").get_kernel_source()
    assert "wgmma.wait_group.sync.aligned 1;" in src  # the softmax waits for S only
    assert src.count("fence.acq_rel.cta;") == 1  # the order fence before the wait for P V


def test_tuned_backward_reduces_dq_with_tma():
    """dQ leaves each step as TMA reduce-adds of a staging tile (tilecore.lower.tma_reduce),
    not as per-thread atomics; the staging tile is waited for before it is rewritten."""
    import flash_attention_bwd as fb

    cfg = tuned_config("bwd", "cuda:sm_90a", 128, False, "bfloat16")
    src = tilecore.compile(fb.program(batch=1, heads=2, seq_len=512, dim=128, dtype="bfloat16", **cfg),
                           target="cuda:sm_90a").get_kernel_source()
    # 4 boxes of 64 rows x 32 float32 (the 128-byte swizzle span) per 64x128 dQ tile
    assert src.count("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group") == 4
    assert "red.global" not in src and "atomicAdd" not in src
    assert "cp.async.bulk.wait_group.read 0;" in src
