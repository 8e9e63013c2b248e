"""The CUDA C++ dialect of the GPU renderer (`tilecore/codegen/gpu.py`): spellings only.

Everything structural (grid linearization, shared-memory carving, narrow atomics, shuffles,
operand packing) is the core's; this module names CUDA's types, conversions, qualifiers and
intrinsics (math spellings in render_math.py, asynchronous copies in render_async.py, wgmma
in render_wgmma.py).
Tensor-core instructions (`IntrinsicCall`) are printed as inline PTX from the intrinsic's
own declaration, so the registers here cannot disagree with the lane maps the
lowering and the emulator use.
"""

from __future__ import annotations

from tilecore.codegen.gpu import GPURenderer
from tilecore.codegen.spec import RenderedKernel, fast_math_requested
from tilecore.dtypes import DType

from .render_async import AsyncRenderMixin
from .render_atomics import VectorAtomicRenderMixin
from .render_math import MathRenderMixin
from .render_wgmma import WgmmaRenderMixin

_VECTOR = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "uint2", 16: "uint4"}
_VECTOR_ZERO = {1: "((unsigned char)0)", 2: "((unsigned short)0)", 4: "0u", 8: "make_uint2(0u, 0u)",
                16: "make_uint4(0u, 0u, 0u, 0u)"}
_TO_FLOAT = {"float16": "__half2float({})", "bfloat16": "__bfloat162float({})",
             "float8_e4m3fn": "((float)({}))", "float8_e5m2": "((float)({}))"}
# fp8 through FP8_HELPERS: CUDA's constructors saturate, the oracle gives NaN (e4m3) / inf (e5m2).
_FROM_FLOAT = {"float16": "__float2half_rn({})", "bfloat16": "__float2bfloat16_rn({})",
               "float8_e4m3fn": "tilecore_to_e4m3({})", "float8_e5m2": "tilecore_to_e5m2({})"}
_FROM_DOUBLE = {"float16": "__double2half({})", "bfloat16": "__double2bfloat16({})",
                "float8_e4m3fn": "tilecore_to_e4m3({})", "float8_e5m2": "tilecore_to_e5m2({})"}
FP8_HELPERS = "\n".join(
    f"__device__ __forceinline__ {t} tilecore_to_{n}({a} x) {{ {t} r; "
    f"r.__x = __nv_cvt_{a}_to_fp8(x, __NV_NOSAT, __NV_{n.upper()}); return r; }}"
    for t, n in (("__nv_fp8_e4m3", "e4m3"), ("__nv_fp8_e5m2", "e5m2")) for a in ("float", "double"))


class CudaRenderer(VectorAtomicRenderMixin, MathRenderMixin, WgmmaRenderMixin, AsyncRenderMixin, GPURenderer):
    """Renders a lowered module as one `extern "C" __global__` CUDA C++ kernel."""

    type_overrides = {"float16": "half", "bfloat16": "__nv_bfloat16", "float8_e4m3fn": "__nv_fp8_e4m3",
                      "float8_e5m2": "__nv_fp8_e5m2"}
    reserved_words = frozenset(
        "threadIdx blockIdx blockDim gridDim warpSize min max atomicAdd atomicCAS make_uint2 make_uint4 "
        "uint2 uint4 tilecore_to_e4m3 tilecore_to_e5m2 __shfl_sync __shfl_xor_sync __syncthreads".split())
    max_grid_yz = 65535  # x allows 2^31 - 1
    restrict_qualifier = "__restrict__ "
    constant_qualifier = "__device__ const"
    vector_types, vector_zeros = _VECTOR, _VECTOR_ZERO

    # ------------------------------------------------------------------ values and casts
    def to_float(self, d: DType, s: str) -> str:
        """cuda_fp16/bf16/fp8 conversion to float."""
        return _TO_FLOAT[d.name].format(s)

    def from_float(self, d: DType, s: str) -> str:
        """Round-to-nearest-even conversion from float."""
        self.type_name(d)  # records that d's header is needed
        return _FROM_FLOAT[d.name].format(s)

    def from_double(self, d: DType, s: str) -> str:
        """Conversion from double with one rounding."""
        self.type_name(d)
        return _FROM_DOUBLE[d.name].format(s)

    def float_literal_special(self, value: float, d: DType) -> str:
        """inf / nan from bit patterns: no division by zero in constants, no <math.h> in NVRTC."""
        if d.name == "float64":
            bits = "0x7ff8000000000000LL" if value != value else (
                "0x7ff0000000000000LL" if value > 0 else "(long long)0xfff0000000000000ULL")
            return f"__longlong_as_double({bits})"
        bits = "0x7fc00000" if value != value else ("0x7f800000" if value > 0 else "(int)0xff800000u")
        return f"__int_as_float({bits})"

    def pointer_cast(self, ctype: str, scope: str, ptr: str) -> str:
        """`reinterpret_cast` (one generic address space in CUDA)."""
        return f"reinterpret_cast<{ctype}*>({ptr})"

    def address_as_int(self, ptr: str) -> str:
        """`reinterpret_cast<unsigned long long>`."""
        return f"reinterpret_cast<unsigned long long>({ptr})"

    # ------------------------------------------------------------------ GPU spellings
    def thread_index(self) -> str:
        return "threadIdx.x"

    def block_index(self, axis: int) -> str:
        return "blockIdx." + "xyz"[axis]

    def barrier_text(self) -> str:
        return "__syncthreads();"

    def shuffle_call(self, mode: str, value: str, arg: str, width: int) -> str:
        fn = "__shfl_xor_sync" if mode == "xor" else "__shfl_sync"
        return f"{fn}(0xffffffffu, {value}, {arg}, {width})"

    def atomic_add_call(self, ref: str, value: str, d: DType) -> str:
        """`atomicAdd`; int64 as unsigned 64-bit words (two's complement makes it the same add)."""
        if d.name == "int64":
            return f"atomicAdd(reinterpret_cast<unsigned long long*>(&{ref}), (unsigned long long)({value}))"
        return f"atomicAdd(&{ref}, {value})"

    def atomic_cas_call(self, word: str, expected: str, desired: str) -> str:
        return f"atomicCAS({word}, {expected}, {desired})"

    def device_fence(self, loc) -> str:
        """`__threadfence()` (a device-scope fence: SASS `MEMBAR.*.GPU`)."""
        return "__threadfence();"

    def shared_window_address(self, ptr: str) -> str:
        return f"(unsigned)__cvta_generic_to_shared({ptr})"

    def align_prefix(self, nbytes: int) -> str:
        return f"__align__({nbytes}) "

    def helper_prefix(self) -> str:
        return "__device__ __forceinline__"

    def printf_decl(self) -> str:
        """T.print's printf: nvcc declares it only with <cstdio>, NVRTC always; this agrees with both."""
        return 'extern "C" __host__ __device__ int printf(const char*, ...);'

    def trap_text(self) -> str:
        return "__trap();"  # a failed T.device_assert aborts the kernel

    def shared_storage(self, nbytes: int) -> list[str]:
        """One dynamic allocation (its size is given at launch)."""
        align = max(self.shared_align, getattr(self, "shared_base_align", 0))
        return [f"extern __shared__ {self.align_prefix(align)}unsigned char {self.smem_name}[];"]

    # `programmatic_launch`: the kernel's first statement waits for the previous grid in the
    # stream (set by render_cuda; the launch then allows the overlap, tilecore_cuda.launch)
    grid_dependency_wait = False

    def index_bindings(self, kernel) -> list[str]:
        """The GPU renderer's index bindings, after `griddepcontrol.wait` for a kernel launched
        as a programmatic dependent (before it, no global memory is touched: every access of
        the kernel comes after the previous kernel in the stream has completed)."""
        lines = super().index_bindings(kernel)
        if self.grid_dependency_wait:
            lines.insert(0, 'asm volatile("griddepcontrol.wait;" ::: "memory");')
        return lines

    def kernel_qualifiers(self, kernel) -> str:
        """`extern "C" __global__` with `__launch_bounds__(threads)`."""
        return f'extern "C" __global__ void __launch_bounds__({kernel.num_threads}{self.min_blocks_bound()})'

    def prelude(self) -> list[str]:
        """The fp16/bf16/fp8 headers the kernel uses, then helper functions."""
        lines = ["// generated by tilecore (cuda backend)"]
        lines += [f"#include <{h}>" for n, h in (("float16", "cuda_fp16.h"), ("bfloat16", "cuda_bf16.h"))
                  if n in self.used_types]
        if {"float8_e4m3fn", "float8_e5m2"} & self.used_types:
            lines += ["#include <cuda_fp8.h>", FP8_HELPERS]
        return lines + super().prelude()

    def stmt_VecMove(self, s) -> None:
        """As the C-style base, except that a global access carrying the "evict_first" hint
        (T.copy's eviction_policy) goes through the streaming intrinsics `__ldcs` / `__stcs`
        (`ld/st.global.cs`: the lines are allocated evict-first in L1 and L2, so data touched
        once replaces itself rather than other data, e.g. dirty lines that would otherwise be
        written back now). Other hints render as the plain access (values are the same)."""
        side = "src" if s.src.scope == "global" else ("dst" if s.dst.scope == "global" else None)
        if s.cache_hint != "evict_first" or side is None:
            super().stmt_VecMove(s)
            return
        nbytes = s.lanes * s.src.dtype.itemsize
        vt = self.vector_type(nbytes)
        if side == "src":
            ptr = self.pointer_cast(f"const {vt}", "global", "&" + self.ref(s.src, s.src_offset))
            dst = self.bit_view(vt, self.ref(s.dst, s.dst_offset), s.dst.scope)
            line = f"{dst} = __ldcs({ptr});"
        else:
            ptr = self.pointer_cast(vt, "global", "&" + self.ref(s.dst, s.dst_offset))
            src = self.bit_view(vt, self.ref(s.src, s.src_offset), s.src.scope, const=True)
            line = f"__stcs({ptr}, {src});"
        if s.pred is None:
            self.emit(line)
            return
        self.emit(f"if ({self.expr(s.pred)}) {{")
        self.emit(f"{self.indent_unit}{line}")
        if s.zero_fill:
            self.emit("} else {")
            self.emit(f"{self.indent_unit}{self.bit_view(vt, self.ref(s.dst, s.dst_offset), s.dst.scope)} = "
                      f"{self.vector_zero(nbytes)};")
        self.emit("}")

    def stmt_IntrinsicCall(self, s) -> None:
        """Inline PTX from the intrinsic's declaration: `asm volatile(mnemonic operands : outs : ins)`
        (wgmma, with descriptors and immediates: `WgmmaRenderMixin.wgmma_call`)."""
        if s.intrinsic.kind == "wgmma":
            self.wgmma_call(s)
            return
        outs, ins, operands = self.asm_operands(s)
        self.emit(f'asm volatile("{s.intrinsic.name} {operands};"')
        self.emit(f"    : {', '.join(outs)}")
        self.emit(f"    : {', '.join(ins)});")


def render_cuda(module, target=None, fast_math: bool | None = None) -> RenderedKernel:
    """CUDA C++ source and launch description of a lowered module; `fast_math` (default: the
    module's `tl.enable_fast_math` pass config) lets float32 division by a variable approximate;
    option `programmatic_launch` on sm_90+ starts the kernel with `griddepcontrol.wait`."""
    if fast_math is None:
        fast_math = fast_math_requested(module)
    renderer = CudaRenderer(fast_math)
    renderer.grid_dependency_wait = programmatic_launch_requested(module, target)
    return renderer.render(module)


def programmatic_launch_requested(module, target) -> bool:
    """Whether the module asks for programmatic dependent launch (option `programmatic_launch`)
    and the target arch has it (`griddepcontrol`: sm_90 and later; an unknown arch: no)."""
    options = getattr(module.attrs, "options", None)
    arch = getattr(target, "arch", None) or ""
    digits = arch.removeprefix("sm_").rstrip("a")
    return bool(getattr(options, "programmatic_launch", False)) and digits.isdigit() and int(digits) >= 90
