"""The tvm targets' plumbing: lazy import, target discovery, refusals with reasons, and the
TVM objects a user gets (`kernel.to_tvm()`, the generated sources)."""

import subprocess
import sys

import numpy as np
import pytest
from tvm_test_util import needs_tvm, needs_webgpu

import tilecore
import tilecore.language as T
from tilecore.errors import TileTargetError


def test_discovery_does_not_import_tvm():
    code = ("import sys, tilecore; names = tilecore.targets(); assert 'tvm' in names, names; "
            "assert 'tvm' not in sys.modules and 'wgpu' not in sys.modules, 'tvm was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def _scale(n=256, dtype="float32", threads=64):
    @T.prim_func
    def scale(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, 64), threads=threads) as bx:
            a = T.alloc_fragment((64,), dtype)
            T.copy(A[bx * 64], a)
            for i in T.Parallel(64):
                a[i] = a[i] * 2.0 + 1.0
            T.copy(a, B[bx * 64])

    return scale


@needs_tvm
def test_to_tvm_is_an_irmodule_a_tvm_user_can_build():
    import tvm

    k = tilecore.compile(_scale(), out_idx=[-1], target="tvm:llvm")
    mod = k.to_tvm()
    assert isinstance(mod, tvm.IRModule)
    assert [g.name_hint for g in mod.get_global_vars()] == ["scale"]
    # compose: the user's own module with the kernel, built by TVM alone
    ex = tvm.compile(mod, target={"kind": "llvm", "mcpu": "x86-64"})
    a = np.arange(256, dtype=np.float32)
    b = np.zeros(256, np.float32)
    ex["scale"](a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)


@needs_tvm
def test_gpu_lowering_has_thread_bindings_and_shared_memory():
    from tilecore_tvm.caps import caps_for
    from tilecore_tvm.lower import lower

    @T.prim_func
    def rowsum(A: T.Tensor((8, 64), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            a = T.alloc_shared((1, 64), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(A[bx, 0], a)
            T.reduce_sum(a, s, dim=1)
            T.copy(s, B[bx])

    text = lower(rowsum, caps_for("webgpu")).script()
    assert 'T.launch_thread("blockIdx.x", 8)' in text and 'T.launch_thread("threadIdx.x", 32)' in text
    assert "T.alloc_shared((1, 64))" in text and 'T.tvm_storage_sync("shared")' in text


@needs_tvm
def test_to_tvm_needs_a_tvm_target():
    k = tilecore.compile(_scale(), out_idx=[-1], target="interp")
    with pytest.raises(TileTargetError, match="tvm"):
        k.to_tvm()


@needs_tvm
def test_unknown_arch_is_refused():
    with pytest.raises(TileTargetError, match="llvm, webgpu, rocm, metal, opencl"):
        tilecore.compile(_scale(), out_idx=[-1], target="tvm:cuda")


@needs_webgpu
def test_webgpu_refuses_64_bit_types_with_the_reason():
    with pytest.raises(TileTargetError, match="float64"):
        tilecore.compile(_scale(dtype="float64"), out_idx=[-1], target="tvm:webgpu")


@needs_tvm
@pytest.mark.parametrize("arch,marker", [("metal", "kernel void"), ("opencl", "__kernel"),
                                         ("webgpu", "@compute"), ("rocm", "amdgcn")])
def test_source_targets_generate_code(arch, marker):


    k = tilecore.compile(_scale(), out_idx=[-1], target=f"tvm:{arch}")
    assert marker in k.get_kernel_source()
    if arch in ("metal", "opencl", "rocm"):
        with pytest.raises(TileTargetError, match="source-only"):
            k(np.zeros(256, np.float32))
