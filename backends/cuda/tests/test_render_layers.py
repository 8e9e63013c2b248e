"""The renderer's layers carry a dialect that is not CUDA: a Metal-flavoured sketch that only
overrides spelling hooks gets address spaces, parameter attributes, kernel-scope shared storage,
its math spelling and no C++ casts everywhere the GPU layer prints memory (the design note in
docs/architecture.md, "Code generation", lists the hooks). The sketch is not a backend: it is
never compiled, and it has no tensor-core spelling (rendering an intrinsic raises)."""

from __future__ import annotations

import pytest
from hand_kernels import atomic_module, misc_module, mma_module
from tilecore_cuda.render import render_cuda

from tilecore import dtypes as dt
from tilecore.codegen.cstyle import C_TYPES, CStyleRenderer
from tilecore.codegen.gpu import GPURenderer
from tilecore.errors import TileInternalError

_SPACES = {"global": "device ", "shared": "threadgroup ", "local": "thread "}


class SketchMetal(GPURenderer):
    """Metal's spellings for the hooks the layering note names (enough to render hand kernels)."""

    type_overrides = {"float16": "half", "bfloat16": "bfloat"}
    vector_types = {1: "uchar", 2: "ushort", 4: "uint", 8: "uint2", 16: "uint4"}
    vector_zeros = {n: f"{t}(0)" for n, t in vector_types.items()}

    def address_space(self, scope):
        return _SPACES[scope]

    def bit_cast(self, ctype, lvalue):
        return f"as_type<{ctype}>({lvalue})"

    def math_call(self, name, d):
        return {"exp": "metal::exp({})", "exp2": "metal::exp2({})"}.get(name) or super().math_call(name, d)

    def param_attribute(self, p, index):
        return f" [[buffer({index})]]"

    def thread_index(self):
        self.extra_params.append("uint3 tilecore_tid [[thread_position_in_threadgroup]]")
        return "(int)tilecore_tid.x"

    def block_index(self, axis):
        if axis == 0:
            self.extra_params.append("uint3 tilecore_bid [[threadgroup_position_in_grid]]")
        return f"(int)tilecore_bid.{'xyz'[axis]}"

    def shared_storage(self, nbytes):
        self.extra_params.append(f"threadgroup uchar* {self.smem_name} [[threadgroup(0)]]")
        return []

    def barrier_text(self):
        return "threadgroup_barrier(mem_flags::mem_threadgroup);"

    def shuffle_call(self, mode, value, arg, width):
        return f"simd_shuffle_{'xor' if mode == 'xor' else ''}({value}, {arg})".replace("_(", "(")

    def atomic_add_call(self, ref, value, d):
        return f"atomic_fetch_add_explicit(({self.address_space('global')}atomic_float*)&{ref}, {value}, " \
               "memory_order_relaxed)"

    def atomic_cas_call(self, word, expected, desired):
        return f"tilecore_cas({word}, {expected}, {desired})"

    def kernel_qualifiers(self, kernel):
        return "kernel void"


def test_a_dialect_of_hooks_only_renders_through_the_gpu_layer():
    src = SketchMetal().render(misc_module(dt.float16)).source
    assert "kernel void hand_misc(device half* X [[buffer(0)]], device float* Y [[buffer(1)]], " \
           "int N [[buffer(2)]], uint3 tilecore_tid [[thread_position_in_threadgroup]], " \
           "uint3 tilecore_bid [[threadgroup_position_in_grid]], " \
           "threadgroup uchar* tilecore_smem [[threadgroup(0)]])" in src
    assert "threadgroup half* s = ((threadgroup half*)(tilecore_smem + 0));  // [64]" in src
    assert "alignas(16) thread float r[2];" in src
    assert "metal::exp2(" in src and "expf(" not in src
    assert "simd_shuffle_xor(" in src and "threadgroup_barrier(" in src
    assert "static const int lane_table_0[4]" in src
    for cxx in ("reinterpret_cast", "static_cast", "__device__", "__shared__", "__align__", "threadIdx"):
        assert cxx not in src


def test_vector_moves_and_narrow_atomics_use_the_dialects_casts():
    move = SketchMetal()
    with pytest.raises(TileInternalError, match="cannot render statement IntrinsicCall"):
        move.render(mma_module(dt.float16))
    # the VecMoves of the mma kernel went through bit_view before the intrinsic was reached
    assert any("*((threadgroup uint4*)(&A_shared[" in line for line in move.lines)
    assert any("*((device const uint4*)(&A[" in line for line in move.lines)
    atomic = SketchMetal().render(atomic_module(dt.int8)).source
    assert "    cur = as_type<signed char>(in_bits);" in atomic  # the dialect's bit_cast
    assert "device unsigned* word = ((device unsigned*)(a & ~3ull));" in atomic
    assert "tilecore_cas(word, assumed, " in atomic and "reinterpret_cast" not in atomic


def test_cuda_keeps_its_cxx_spellings_and_the_tables_keep_their_names():
    src = render_cuda(misc_module()).source
    assert "half* s = reinterpret_cast<half*>(tilecore_smem + 0);" in src
    assert "__align__(16) float r[2];" in src
    assert C_TYPES["int64"] == "long long" and issubclass(GPURenderer, CStyleRenderer)
