"""The attention kernels end to end on `emu:sm_80` against float64 NumPy: the forward's
log-sum-exp, the whole backward (forward -> delta preprocess -> dQ/dK/dV), split-KV decoding
with its combine kernel (contiguous and paged caches), MLA decoding, and the lowering of a
copy whose start reads another tensor (the paged gather). The examples' own protocol tests
check the single kernels on every backend; these check what chains them."""

import flash_attention
import flash_attention_bwd
import flash_decoding
import mla_decoding
import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.example_protocol import sizes_for

EMU = "emu:sm_80"


@pytest.mark.parametrize("sizes", [
    dict(batch=1, heads=2, kv_heads=1, seq_len=72, dim=128, is_causal=False, dtype="bfloat16"),
    dict(batch=1, heads=2, seq_len=64, dim=64, is_causal=True, block_M=32, block_N=32, num_stages=2),
], ids=["d128-gqa-ragged-bf16", "d64-causal-pipelined"])
def test_forward_returns_output_and_lse(sizes):
    k = tilecore.jit(flash_attention.program(**sizes, return_lse=True), out_idx=[-2, -1], target=EMU)
    q, kk, v = flash_attention.make_inputs(np.random.default_rng(4),
                                           **sizes_for(flash_attention.make_inputs, sizes))
    o, lse = k(q, kk, v)
    want_o, want_lse, _ = flash_attention.attention64(q, kk, v, sizes["is_causal"])
    np.testing.assert_allclose(o.astype(np.float32), want_o, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("causal,tiles", [
    (False, {}),
    # staggered query-tile walks (each key tile from its own query tile, wrapping): 3 key tiles
    # of 32 over 3 query tiles, causal so the walks have different lengths (3, 2, 1)
    (True, dict(block_M=32, block_N=32, threads=128, stagger=True)),
], ids=["non-causal", "causal-staggered"])
def test_backward_chain_fp16(causal, tiles):
    """forward (LSE) -> preprocess (delta) -> dQ/dK/dV, grouped heads, ragged length."""
    sizes = dict(batch=1, heads=2, kv_heads=1, seq_len=48 if not tiles else 90, dim=64)
    q, k, v = flash_attention.make_inputs(np.random.default_rng(5), **sizes)
    do = np.random.default_rng(6).standard_normal(q.shape).astype(q.dtype)
    fwd = tilecore.jit(flash_attention.program(**sizes, is_causal=causal, return_lse=True), out_idx=[-2, -1],
                       target=EMU)
    o, lse = fwd(q, k, v)
    got = flash_attention_bwd.backward(q, k, v, o, do, lse, causal, EMU, **tiles)
    for g, w in zip(got, flash_attention_bwd.gradients64(q, k, v, do, causal)):
        np.testing.assert_allclose(np.asarray(g, np.float32), w, **flash_attention_bwd.TOLERANCE)


def test_preprocess_delta_is_rowsum_of_o_times_do():
    rng = np.random.default_rng(7)
    o, do = (rng.standard_normal((1, 40, 2, 64)).astype(np.float16) for _ in range(2))
    func = flash_attention_bwd.preprocess_program(1, 2, 40, 64, block_M=32)
    k = tilecore.jit(func, out_idx=[-1], target=EMU)
    want = (o.astype(np.float64) * do.astype(np.float64)).sum(-1).transpose(0, 2, 1)
    np.testing.assert_allclose(k(o, do), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sizes", [
    dict(batch=2, heads=4, kv_heads=1, seq_kv=100, dim=64, num_split=4, block_N=32),
    dict(batch=2, heads=4, kv_heads=2, seq_kv=128, dim=64, num_split=2, block_N=32, paged=True, page_size=64),
], ids=["contiguous-empty-split", "paged"])
def test_decoding_split_and_combine(sizes):
    """Split partials merged by the combine kernel equal one softmax over the whole cache; the
    contiguous case has a split with no keys (LSE -inf), the paged one shorter sequences."""
    inputs = flash_decoding.make_inputs(np.random.default_rng(8),
                                        **sizes_for(flash_decoding.make_inputs, sizes))
    out = flash_decoding.decode(EMU, inputs, **sizes)
    q, k, v = inputs[:3]
    lens = [sizes["seq_kv"]] * q.shape[0]
    if sizes.get("paged"):
        lens = inputs[4]
        k, v = (flash_decoding.contiguous_cache(x, inputs[3], lens, sizes["seq_kv"]) for x in (k, v))
    want, _ = flash_decoding.partials64(q, k, v, lens, 1)
    np.testing.assert_allclose(out.astype(np.float32), want[:, :, 0], rtol=1e-2, atol=1e-2)


def test_paged_copies_are_pipelined_asynchronously():
    """The gather's page index is a load inside the copy's start; the copy still stages."""
    func = flash_decoding.program(batch=1, heads=2, kv_heads=1, seq_kv=128, dim=64, block_N=32, paged=True,
                                  page_size=32, num_stages=2)
    staged = tilecore.compile(func, out_idx=flash_decoding.OUT_IDX, target=EMU).get_ir("async-pipeline")
    assert "async K_shared[" in staged and "async V_shared[" in staged


def test_mla_split_and_combine():
    sizes = dict(batch=1, heads=16, seq_kv=70, dim=512, pe_dim=64, num_split=2, block_H=16, threads=128)
    inputs = mla_decoding.make_inputs(np.random.default_rng(9), **sizes_for(mla_decoding.make_inputs, sizes))
    out = mla_decoding.decode(EMU, inputs, **sizes)
    want, _ = mla_decoding.partials64(*inputs, 1, 32)
    np.testing.assert_allclose(out.astype(np.float32), want[:, :, 0], rtol=1e-2, atol=1e-2)


def test_copy_start_reading_a_tensor_is_lowered():
    """`T.copy(A[Idx[b], :], s)`: a gather of rows chosen by an index tensor."""
    @T.prim_func
    def gather(A: T.Tensor((8, 32), "float16"), Idx: T.Tensor((4,), "int32"),
               B: T.Tensor((4, 32), "float16")):
        with T.Kernel(4, threads=32) as bx:
            s = T.alloc_shared((1, 32), "float16")
            T.copy(A[Idx[bx]:Idx[bx] + 1, :], s)
            T.copy(s, B[bx:bx + 1, :])

    a = np.arange(256, dtype=np.float16).reshape(8, 32)
    idx = np.array([5, 0, 7, 2], dtype=np.int32)
    for target in ("interp", EMU):
        np.testing.assert_array_equal(tilecore.jit(gather, out_idx=[-1], target=target)(a, idx), a[idx])


def test_hopper_tiles_emulated():
    """The measured-best Hopper tiles new on sm_90a, emulated there: the d=64 forward's three
    consumer warpgroups beside the TMA producer (192 query rows; causal and a ragged length:
    neither 192 nor 128 divides 200), and one-launch decoding with the query heads padded to a
    wgmma tile and evict_first K/V reads."""
    from tilecore.contrib.attention_configs import _HOPPER

    sizes = dict(batch=1, heads=1, seq_len=200, dim=64, is_causal=True, dtype="bfloat16")
    k = tilecore.jit(flash_attention.program(**sizes, **_HOPPER[("fwd", 64)], return_lse=True),
                     out_idx=[-2, -1], target="emu:sm_90a")
    q, kk, v = flash_attention.make_inputs(np.random.default_rng(7),
                                           **sizes_for(flash_attention.make_inputs, sizes))
    o, lse = k(q, kk, v)
    want_o, want_lse, _ = flash_attention.attention64(q, kk, v, True)
    np.testing.assert_allclose(o.astype(np.float32), want_o, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-3)

    sizes = dict(batch=2, heads=4, kv_heads=1, seq_kv=150, dim=64, dtype="bfloat16",
                 **_HOPPER[("decode", "short")])
    inputs = flash_decoding.make_inputs(np.random.default_rng(8),
                                        **sizes_for(flash_decoding.make_inputs, sizes))
    out = flash_decoding.decode("emu:sm_90a", inputs, **sizes)
    o, _ = flash_decoding.partials64(*inputs, [150, 150], 1)
    np.testing.assert_allclose(out.astype(np.float32), o[:, :, 0], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("target,tiles", [
    ("emu:sm_90a", dict(num_split=1, direct=True, block_N=64, block_H=64, num_stages=2, threads=128,
                        kv_eviction="evict_first")),
    ("emu:sm_80", dict(num_split=2, block_N=32)),
], ids=["sm90a-direct-tma", "sm80-split2-combine"])
def test_decoding_head_major_cache(target, tiles):
    """K/V in [batch, kv_heads, seq, dim] (`kv_layout="hnd"`, SDPA's layout): the TMA tiles of
    one launch (sm_90a) and split partials + combine (sm_80) against float64 softmax over the
    cache read in [batch, seq, kv_heads, dim] order; 150 keys: a ragged last tile."""
    sizes = dict(batch=2, heads=8, kv_heads=2, seq_kv=150, dim=64, dtype="bfloat16", kv_layout="hnd", **tiles)
    inputs = flash_decoding.make_inputs(np.random.default_rng(13),
                                        **sizes_for(flash_decoding.make_inputs, sizes))
    q, k, v = inputs
    assert k.shape == (2, 2, 150, 64)
    out = flash_decoding.decode(target, inputs, **sizes)
    o, _ = flash_decoding.partials64(q, k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), [150, 150], 1)
    np.testing.assert_allclose(out.astype(np.float32), o[:, :, 0], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("kv_layout", ["nhd", "hnd"])
def test_decoding_early_tma_prologue(kv_layout):
    """Option `tilecore.early_tma_prologue`: the one-launch TMA decoding kernel issues its first
    K/V tile before the query tile's load (the CUDA source's order) and still matches float64
    on the emulated sm_90a, whose race checker sees every barrier the reordering needs."""
    sizes = dict(batch=2, heads=8, kv_heads=2, seq_kv=150, dim=64, dtype="bfloat16", num_split=1,
                 direct=True, block_N=64, block_H=64, num_stages=2, threads=128, kv_eviction="evict_first",
                 kv_layout=kv_layout)
    func = flash_decoding.program(**sizes_for(flash_decoding.program, sizes))
    opts = {"tilecore.early_tma_prologue": True}
    src = tilecore.compile(func, out_idx=[-1], target="cuda:sm_90a", pass_configs=opts).get_kernel_source()
    plain = tilecore.compile(func, out_idx=[-1], target="cuda:sm_90a").get_kernel_source()
    first_tma, first_q = src.index("cp.async.bulk.tensor"), src.index("&Q_shared[")
    assert first_tma < first_q and plain.index("cp.async.bulk.tensor") > plain.index("&Q_shared[")
    inputs = flash_decoding.make_inputs(np.random.default_rng(14),
                                        **sizes_for(flash_decoding.make_inputs, sizes))
    q, k, v = inputs
    out = tilecore.jit(func, out_idx=[-1], target="emu:sm_90a", pass_configs=opts)(*inputs)
    if kv_layout == "hnd":
        k, v = (x.transpose(0, 2, 1, 3) for x in (k, v))
    o, _ = flash_decoding.partials64(q, k, v, [150, 150], 1)
    np.testing.assert_allclose(out.astype(np.float32), o[:, :, 0], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("target,sizes,tiles", [
    ("emu:sm_90a", dict(batch=1, heads=2, kv_heads=1, seq_len=300, dim=128, dtype="bfloat16"),
     dict(block_M=128, block_N=128, num_stages=2, threads=256)),
    ("emu:sm_80", dict(batch=1, heads=2, seq_len=200, dim=64), dict(block_M=32, block_N=64, num_stages=2)),
], ids=["sm90a-128x128-gqa-ragged", "sm80-32x64"])
def test_causal_overlap_diagonal_first(target, sizes, tiles):
    """The overlapped causal forward walking key tiles last to first (`diag_first`): the masked
    diagonal tile is the peeled first iteration's (masked after its product), the overlapped
    body has no mask; a query tile inside a longer key tile (32x64) too."""
    k = tilecore.jit(flash_attention.program(**sizes, **tiles, is_causal=True, overlap=True, diag_first=True,
                                             return_lse=True), out_idx=[-2, -1], target=target)
    q, kk, v = flash_attention.make_inputs(np.random.default_rng(12), **sizes)
    o, lse = k(q, kk, v)
    want_o, want_lse, _ = flash_attention.attention64(q, kk, v, True)
    np.testing.assert_allclose(o.astype(np.float32), want_o, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-3)


def test_output_staged_in_query_buffer():
    """`o_in_q`: the output tile leaves through the query tile's shared buffer (no O_shared), so
    128x128 d=128 fits three stages (224 KB); the emulated sm_90a race checker sees the order of
    the last Q K^T reads, the output's shared writes and the store (ragged length, GQA)."""
    sizes = dict(batch=1, heads=2, kv_heads=1, seq_len=200, dim=128, dtype="bfloat16")
    k = tilecore.jit(flash_attention.program(**sizes, block_M=128, block_N=128, num_stages=3, threads=256,
                                             overlap=True, o_in_q=True), out_idx=[-1], target="emu:sm_90a")
    q, kk, v = flash_attention.make_inputs(np.random.default_rng(13), **sizes)
    want = flash_attention.attention64(q, kk, v, False)[0]
    np.testing.assert_allclose(k(q, kk, v).astype(np.float32), want, rtol=2e-2, atol=2e-2)
    assert "O_shared" not in k.get_ir("final") and "Q_shared" in k.get_ir("final")
