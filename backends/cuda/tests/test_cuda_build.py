"""Rendering hand-built thread IR, compiling it with nvcc / NVRTC, and the cubin cache."""

from __future__ import annotations

import pytest
from cuda_test_util import CI_ARCHS, needs_nvcc
from hand_kernels import casts_module, misc_module, mma_module
from tilecore_cuda import build
from tilecore_cuda.artifact import binary_compatible
from tilecore_cuda.render import render_cuda

from tilecore import dtypes as dt
from tilecore.codegen.spec import host_int
from tilecore.ir.expr import Var


@needs_nvcc
@pytest.mark.parametrize("arch", CI_ARCHS)
@pytest.mark.parametrize("dtype", [dt.float16, dt.bfloat16])
@pytest.mark.parametrize("make", [mma_module, misc_module])
def test_hand_kernels_compile_with_nvcc(make, dtype, arch):
    r = render_cuda(make(dtype))
    cubin = build.compile_cuda(r.source, arch, name=r.entry, compiler="nvcc", use_cache=False)
    assert cubin[:4] == b"\x7fELF"


@needs_nvcc
@pytest.mark.parametrize("arch", CI_ARCHS)
def test_every_dtype_conversion_compiles(arch):
    r = render_cuda(casts_module())
    cubin = build.compile_cuda(r.source, arch, name=r.entry, compiler="nvcc", use_cache=False)
    assert cubin[:4] == b"\x7fELF"


def test_mma_source_uses_inline_ptx_mma_and_ldmatrix():
    src = render_cuda(mma_module(dt.bfloat16)).source
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in src
    assert "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16" in src
    assert "#include <cuda_bf16.h>" in src and "cuda_fp16.h" not in src


def test_launch_description():
    r = render_cuda(mma_module())
    assert r.entry == "hand_mma" and r.block == (32, 1, 1)
    assert r.smem_bytes == 256 * 2 + 128 * 2
    assert [(p.name, p.is_pointer) for p in r.params] == [("A", True), ("B", True), ("C", True), ("N", False)]
    assert [host_int(g, {"N": 33}) for g in r.grid] == [3, 1, 1]


@needs_nvcc
def test_compile_error_is_reported_with_log(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path))
    with pytest.raises(build.CudaCompileError) as ei:
        build.compile_cuda('extern "C" __global__ void k() { undefined_name; }', "sm_80", compiler="nvcc")
    assert "undefined_name" in ei.value.log
    assert ei.value.source_path and ei.value.source_path.startswith(str(tmp_path))


@needs_nvcc
def test_cubin_cache_hits_and_keys_on_arch(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path))
    src = render_cuda(misc_module()).source
    a = build.compile_cuda(src, "sm_80", name="m", compiler="nvcc")
    calls = []
    monkeypatch.setattr(build, "_compile_nvcc", lambda *a, **k: calls.append(a) or b"never")
    assert build.compile_cuda(src, "sm_80", name="m", compiler="nvcc") == a  # served from disk
    assert not calls
    assert build.compile_cuda(src, "sm_90a", name="m", compiler="nvcc") == b"never"  # new key
    assert len(calls) == 1
    assert build.compile_cuda(src + "\n", "sm_80", name="m", compiler="nvcc") == b"never"  # source
    assert len(list((tmp_path / "cuda").glob("*.tcc"))) == 3  # tilecore.cache entries


@pytest.mark.skipif(build._nvrtc() is None or not build.cuda_include_dirs(),
                    reason="cuda-bindings NVRTC (and CUDA headers) not available")
@pytest.mark.parametrize("arch", CI_ARCHS)
def test_nvrtc_compiles_the_same_source(arch):
    r = render_cuda(mma_module(dt.bfloat16))
    cubin = build.compile_cuda(r.source, arch, name=r.entry, compiler="nvrtc", use_cache=False)
    assert cubin[:4] == b"\x7fELF"


def test_binary_compatibility_rules():
    assert binary_compatible("sm_80", "sm_86") and binary_compatible("sm_80", "sm_89")
    assert not binary_compatible("sm_86", "sm_80") and not binary_compatible("sm_80", "sm_90")
    assert binary_compatible("sm_90a", "sm_90a") and binary_compatible("sm_90", "sm_90a")
    assert not binary_compatible("sm_90a", "sm_90") and not binary_compatible("sm_80", "sm_90a")


def test_host_int_follows_c_division():
    n = Var("n")
    assert host_int((n + 127) // 128, {"n": 1}) == 1
    assert host_int((n - 130) // 128, {"n": 1}) == -1  # truncation toward zero, like the kernel


def test_negated_negative_literals_stay_negations():
    """Unary neg of a negative literal once printed `(--1)`, C's decrement (found by conformance)."""
    r = render_cuda(misc_module()).source
    assert "(-(-1.5f))" in r and "(-(-1))" in r and "--" not in r


def test_a_damaged_cubin_entry_is_deleted_reported_and_recompiled(tmp_path, monkeypatch):
    """Issue 16 item 15: the cubin cache returned a truncated cubin unchecked. Now a cut
    entry fails its checksum: it is deleted, reported, and the cubin compiled again (no
    compiler needed here: the compile is a stand-in that counts)."""
    import warnings

    from tilecore import cache

    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "compiler_id", lambda compiler: "stand-in 1.0")
    calls = []
    cubin = b"\x7fELF" + bytes(range(256)) * 8
    monkeypatch.setattr(build, "_compile_nvcc", lambda *a: calls.append(a) or cubin)
    build.CUBINS.clear_memory()
    assert build.compile_cuda("src", "sm_80", name="m", compiler="nvcc") == cubin
    (entry,) = (tmp_path / "cuda").glob("*.tcc")
    build.CUBINS.clear_memory()
    assert build.compile_cuda("src", "sm_80", name="m", compiler="nvcc") == cubin and len(calls) == 1
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])  # a cut write, a full disk
    build.CUBINS.clear_memory()
    with pytest.warns(cache.TileCacheWarning, match="damaged"):
        assert build.compile_cuda("src", "sm_80", name="m", compiler="nvcc") == cubin
    assert len(calls) == 2  # recompiled, not served cut
    build.CUBINS.clear_memory()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt entry is whole again
        assert build.compile_cuda("src", "sm_80", name="m", compiler="nvcc") == cubin
    assert len(calls) == 2


def test_generated_cuda_indexes_a_tensor_that_may_reach_2_31_elements_in_64_bits():
    """Issue 16 item 2: `int` offsets wrapped past 2^31 elements. A symbolic tensor (assumed
    large) is indexed in `long long`; a small constant-shape one keeps 32-bit offsets."""
    import re

    import tilecore
    import tilecore.language as T

    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n, 8), "float32"), C: T.Tensor((16, 8), "float32")):
        with T.Kernel(T.ceildiv(n, 16), threads=32) as bx:
            for i, j in T.Parallel(16, 8):
                if bx * 16 + i < n:
                    A[bx * 16 + i, j] = A[bx * 16 + i, j] + C[i, j]

    src = tilecore.jit(k, target="cuda").get_kernel_source()

    def indices(name):
        out = []
        for m in re.finditer(rf"\b{name}\[", src):  # the bracketed index, nesting included
            depth, i = 1, m.end()
            while depth:
                depth += {"[": 1, "]": -1}.get(src[i], 0)
                i += 1
            out.append(src[m.end():i - 1])
        return out

    a, c = indices("A"), indices("C")
    assert a and c
    assert all("long long" in e for e in a), a
    assert not any("long long" in e or "LL" in e for e in c), c
