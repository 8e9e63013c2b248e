"""TMA + mbarrier pipelines in CUDA (docs/architecture.md, "Hopper: TMA, mbarrier, warp
specialization"): the sm_90a GEMM source issues `cp.async.bulk.tensor` on mbarriers with its
tensor maps as `__grid_constant__` parameters, nvcc compiles it to SASS with `UTMALDG` and
`SYNCS` and no spills, sm_80 keeps cp.async, and (on a GPU) TMA GEMMs on ragged shapes match
NumPy, with tensor maps cached per launch shape."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from cuda_test_util import example_modules, needs_gpu, needs_nvcc
from tilecore_cuda.build import nvcc_path
from tilecore_cuda.tensormap import TensorMapSpec, module_tensor_maps

import tilecore

CUOBJDUMP = os.environ.get("CUOBJDUMP") or \
    "/work/sass-venv/lib/python3.11/site-packages/triton/backends/nvidia/bin/cuobjdump"


def _gemm():
    return next(m for m in example_modules() if m.__name__ == "gemm")


def _compile(arch: str, **kw):
    return tilecore.compile(_gemm().program(**kw), out_idx=[-1], target=f"cuda:{arch}")


def test_sm90a_gemm_source_uses_tma_and_mbarriers():
    k = _compile("sm_90a", M=1024, N=1024, K=1024, block_N=64)
    src = k.get_kernel_source()
    # two boxes per tile, in the prologue and the loop (wgmma keeps one group in flight, so the
    # copies run s - 2 = 1 tile ahead)
    assert src.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes") == 4
    assert "mbarrier.arrive.expect_tx.shared::cta.b64" in src and "mbarrier.try_wait.parity" in src
    assert "const __grid_constant__ tilecore_tmap_t tilecore_tmap0" in src and "tilecore_tmap1" in src
    assert "__align__(1024) unsigned char tilecore_smem[]" in src and "__launch_bounds__(128, 1)" in src
    assert "cp.async.cg" not in src  # both operands by TMA
    module = k.stages[-1][1]
    assert module_tensor_maps(module) == (
        TensorMapSpec(0, module.func.params[0].dtype, (128, 32), 64),  # A: 64-byte rows, 64B swizzle
        TensorMapSpec(1, module.func.params[1].dtype, (32, 64), 128),  # B: 128-byte rows
        # C: the TMA-store epilogue's one 128x64 panel (tilecore/lower/tma_store.py)
        TensorMapSpec(2, module.func.params[2].dtype, (128, 64), 128))
    sm80 = _compile("sm_80", M=1024, N=1024, K=1024, block_N=64).get_kernel_source()
    assert "cp.async.bulk" not in sm80 and "cp.async.cg" in sm80 and "tilecore_tmap" not in sm80


@needs_nvcc
@pytest.mark.skipif(not os.path.isfile(CUOBJDUMP), reason="cuobjdump is not installed")
@pytest.mark.parametrize("kw", [dict(block_N=64), dict(block_K=64, threads=256),
                                dict(block_N=64, block_K=64, num_stages=5)])  # 128 KB: warp-specialized
def test_sm90a_gemm_sass_has_utmaldg_and_syncs(kw, tmp_path):
    src = _compile("sm_90a", M=4096, N=4096, K=4096, **kw).get_kernel_source()
    ws = "producer warpgroup" in src
    assert ws == (kw.get("num_stages") == 5)
    if ws:  # one branch per role, each setting its registers; consumers sync on named barrier 1
        assert "setmaxnreg.dec.sync.aligned.u32 40;" in src and "setmaxnreg.inc.sync.aligned.u32 240;" in src
        assert 'bar.sync 1, 128;' in src and "__launch_bounds__(256, 1)" in src
    cu, cubin = tmp_path / "k.cu", tmp_path / "k.cubin"
    cu.write_text(src)
    res = subprocess.run([nvcc_path(), "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v",
                          "-o", str(cubin), str(cu)], capture_output=True, text=True, check=True)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in res.stderr + res.stdout
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    assert "UTMALDG.2D" in sass and "SYNCS.ARRIVE.TRANS64" in sass and "SYNCS.PHASECHK" in sass
    assert "HGMMA" in sass  # TMA feeding wgmma (the wgmma branch)
    assert ("USETMAXREG" in sass) == ws and "C7508" not in res.stderr  # setmaxnreg honoured


@needs_gpu
@pytest.mark.parametrize("M, N, K, kw", [
    (200, 136, 104, dict(block_N=64)), (64, 64, 32, dict(block_N=64)), (1000, 520, 304, {}),
    (130, 72, 200, dict(block_N=64, num_stages=2)),
    (300, 136, 448, dict(block_N=64, block_K=64, num_stages=5))])  # warp-specialized
def test_tma_gemm_on_gpu(M, N, K, kw):
    gemm = _gemm()
    kernel = tilecore.jit(gemm.program(M=M, N=N, K=K, **kw), out_idx=[-1], target="cuda:sm_90a")
    assert "cp.async.bulk.tensor" in kernel.get_kernel_source()
    for seed in (0, 1):  # the second launch reuses cached tensor maps only for equal addresses
        a, b = gemm.make_inputs(np.random.default_rng(seed), M=M, N=N, K=K)
        c = kernel(a, b)
        np.testing.assert_allclose(np.asarray(c).astype(np.float32), gemm.reference(a, b).astype(np.float32),
                                   **gemm.TOLERANCE)


def test_tma_l2_promotion_option_reaches_the_tensor_maps(monkeypatch):
    """pass_configs["tilecore.tma_l2_promotion"] = 256 encodes every tensor map with
    CU_TENSOR_MAP_L2_PROMOTION_L2_256B (3; the default 128 bytes: 2), also after a compile-cache
    round trip; other values are refused."""
    from tilecore_cuda import launch, tensormap
    from tilecore_cuda.artifact import CudaArtifact

    wide = tilecore.compile(_gemm().program(M=1024, N=1024, K=1024, block_N=64), out_idx=[-1],
                            target="cuda:sm_90a", pass_configs={"tilecore.tma_l2_promotion": 256})
    plain = _compile("sm_90a", M=1024, N=1024, K=1024, block_N=64)
    assert {m.l2_promotion for m in module_tensor_maps(wide.stages[-1][1])} == {256}
    assert {m.l2_promotion for m in module_tensor_maps(plain.stages[-1][1])} == {128}
    meta, blobs = wide.artifact.cache_entry()
    assert {m.l2_promotion for m in CudaArtifact.from_cache_entry(meta, blobs).tensor_maps} == {256}
    meta["tensor_maps"] = [m[:4] for m in meta["tensor_maps"]]  # an entry from before the field
    assert {m.l2_promotion for m in CudaArtifact.from_cache_entry(meta, blobs).tensor_maps} == {128}

    seen = []

    class FakeDriver:
        def __getattr__(self, name):
            if name == "cuTensorMapEncodeTiled":
                # (dtype, rank, addr, dims, strides, box, element strides, interleave, swizzle,
                # L2 promotion, OOB fill)
                return lambda *a: seen.append(a[9]) or (0, None)
            return lambda x=None: x

    monkeypatch.setattr(launch, "_driver", lambda: FakeDriver())
    monkeypatch.setattr(launch, "check", lambda res, what: type("M", (), {"getPtr": lambda s: 0})())
    monkeypatch.setattr(tensormap.ctypes, "string_at", lambda p, n: bytes(n))
    for spec, want in ((wide, 3), (plain, 2)):
        s = module_tensor_maps(spec.stages[-1][1])[0]
        tensormap._encode((0x1000, (64, 64), (128,), 6, (64, 64), 128, s.l2_promotion))
        assert seen[-1] == want
    with pytest.raises(tilecore.TileError, match="one of"):
        tilecore.compile(_gemm().program(M=256, N=256, K=256), out_idx=[-1], target="cuda:sm_90a",
                         pass_configs={"tilecore.tma_l2_promotion": 64})
