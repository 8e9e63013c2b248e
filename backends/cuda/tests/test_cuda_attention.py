"""The attention kernels' CUDA code (nvcc, no GPU needed): under fast math the softmax's exp2 is
one MUFU.EX2 (no range check and scaling multiplies around it) and the normalization has no
division subroutine; the benchmark shapes of the backward, decoding and MLA kernels compile
without local memory."""

import re
import shutil
import subprocess
import sys

import pytest
from cuda_test_util import EXAMPLES, needs_nvcc
from tilecore_cuda import build
from tilecore_cuda.render import render_cuda

import tilecore
from tilecore.contrib.attention_configs import _HOPPER

if EXAMPLES not in sys.path:  # the kernels are the example scripts (no test order dependency)
    sys.path.insert(0, EXAMPLES)
CUOBJDUMP = shutil.which("cuobjdump") or ("/work/sass-venv/lib/python3.11/site-packages/triton/backends/"
                                           "nvidia/bin/cuobjdump")


def _sass(src: str, tmp_path, name: str) -> str:
    cubin = build.compile_cuda(src, "sm_90a", name=name, compiler="nvcc", use_cache=False)
    path = tmp_path / f"{name}.cubin"
    path.write_bytes(cubin)
    try:
        out = subprocess.run([CUOBJDUMP, "-sass", str(path)], capture_output=True, text=True, check=True)
        return out.stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("cuobjdump is not available")


def _count(sass: str, op: str) -> int:
    return len(re.findall(rf"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?{op}\b", sass, re.M))


@needs_nvcc
def test_fast_math_softmax_exp2_is_one_instruction(tmp_path):
    import flash_attention

    func = flash_attention.program(batch=1, heads=2, seq_len=128, dim=64)
    module = tilecore.compile(func, out_idx=[-1], target="cuda:sm_90a").stages[-1][1]
    ieee, fast = render_cuda(module).source, render_cuda(module, fast_math=True).source
    assert "ex2.approx.ftz.f32" in fast and "ex2.approx" not in ieee
    s_ieee, s_fast = _sass(ieee, tmp_path, "flash_attention"), _sass(fast, tmp_path, "flash_attention")
    # exp2f: FSETP (x < -126) + two predicated FMULs around MUFU.EX2, per element
    assert _count(s_fast, "FSETP") < _count(s_ieee, "FSETP") // 4
    assert _count(s_fast, "MUFU") <= _count(s_ieee, "MUFU")
    assert "CALL.REL" not in s_fast


@needs_nvcc
@pytest.mark.parametrize("name,params", [
    ("flash_attention_bwd", dict(batch=1, heads=16, seq_len=4096, dim=128, is_causal=True)),
    ("flash_decoding", dict(batch=32, heads=32, kv_heads=8, seq_kv=4096, dim=128, paged=True)),
    ("mla_decoding", dict(batch=32, heads=128, seq_kv=4096)),
    # the Hopper tuned tiles (tilecore.contrib.attention_configs): d=64 on three consumer
    # warpgroups, the staggered backward, block_H=64 decoding with evict_first K/V
    ("flash_attention", dict(batch=1, heads=32, seq_len=4096, dim=64, **_HOPPER[("fwd", 64)])),
    ("flash_attention_bwd", dict(batch=1, heads=16, seq_len=4096, dim=128, **_HOPPER[("bwd", False)])),
    ("flash_decoding", dict(batch=32, heads=32, kv_heads=8, seq_kv=1024, dim=128,
                            **_HOPPER[("decode", "short")])),
    # the combine fused into the split kernel (a counter per group, the last block merges)
    ("flash_decoding", dict(batch=32, heads=32, kv_heads=8, seq_kv=1024, dim=128,
                            **dict(_HOPPER[("decode", "short")], num_split=2, direct=False,
                                   fuse_combine=True))),
    ("flash_decoding", dict(batch=32, heads=32, kv_heads=8, seq_kv=16384, dim=128, num_split=2, block_N=64,
                            fuse_combine=True)),
], ids=["bwd", "decode-paged", "mla", "tuned-fwd-d64", "tuned-bwd", "tuned-decode-short", "decode-fused-tma",
        "decode-fused-16k"])
def test_benchmark_configs_have_no_local_memory(name, params, tmp_path):
    import importlib

    mod = importlib.import_module(name)
    k = tilecore.compile(mod.program(**params, dtype="bfloat16"), target="cuda:sm_90a")
    sass = _sass(k.get_kernel_source(), tmp_path, k.artifact.rendered.entry)
    assert _count(sass, "LDL") == 0 and _count(sass, "STL") == 0
    # tensor cores: mma.sync, or wgmma where the gemm fits a warpgroup tile (MLA on sm_90a)
    assert _count(sass, "HMMA") + _count(sass, "HGMMA") > 0
