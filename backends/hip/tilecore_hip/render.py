"""The HIP dialect of the GPU renderer (`tilecore/codegen/gpu.py`): spellings only.

HIP source for clang without ROCm's headers: the prelude (`prelude.py`) defines the few HIP
keywords as clang attributes, work-item and workgroup ids come from AMDGPU builtins, shuffles
go through `ds_bpermute`, atomics through clang's `__hip_atomic_*` builtins, and matrix
instructions (`IntrinsicCall`) call `__builtin_amdgcn_mfma_*` / `__builtin_amdgcn_wmma_*` on
vectors copied from the lane-map registers in element order, so the registers cannot disagree
with the lane maps the lowering and the emulator use. LDS is one static `__shared__` byte array
(its size is in the code object's notes; nothing is passed at launch).
"""

from __future__ import annotations

import re

from tilecore.codegen.gpu import GPURenderer
from tilecore.codegen.spec import RenderedKernel, fast_math_requested
from tilecore.dtypes import DType
from tilecore.errors import TileTargetError

from . import prelude as P
from .intrinsics import builtin_name, builtin_tail

_VECTOR = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "tilecore_u32x2",
           16: "tilecore_u32x4"}
_VECTOR_ZERO = {1: "((unsigned char)0)", 2: "((unsigned short)0)", 4: "0u", 8: "((tilecore_u32x2)(0u))",
                16: "((tilecore_u32x4)(0u))"}
_VECTOR_TYPEDEFS = ("typedef unsigned int tilecore_u32x2 __attribute__((ext_vector_type(2)));\n"
                    "typedef unsigned int tilecore_u32x4 __attribute__((ext_vector_type(4)));")
# The core's math tables (cexpr.FLOAT_FUNCS) spell libm; without headers or device libraries
# each libm name becomes the clang builtin LLVM lowers to AMDGPU code, or a prelude helper, and
# the float64 functions that need ROCm's ocml are refused. Translating the core's spelling (not
# keeping a table of our own) keeps its semantics (rsqrt, NaN handling of min/max) in one place.
_BUILTIN = frozenset("""expf exp2f logf log2f sqrtf floorf ceilf sinf cosf rintf truncf fabsf fminf
fmaxf fmodf copysignf sqrt floor ceil rint trunc fabs fmin fmax fmod copysign isnan isinf isfinite
signbit""".split())
_HELPERS = {"tanhf": ("tilecore_tanhf", "tanh"), "erff": ("tilecore_erff", "erf"),
            "powf": ("tilecore_powf", "pow")}
_LIBM_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\(")


class HipRenderer(GPURenderer):
    """Renders a lowered module as one `extern "C" __global__` HIP kernel."""

    # fp8 values are stored as their bit patterns and converted by the prelude's helpers
    type_overrides = {"float16": "_Float16", "bfloat16": "__bf16", "float8_e4m3fn": "unsigned char",
                      "float8_e5m2": "unsigned char"}
    reserved_words = frozenset(
        "min max tilecore_a tilecore_b tilecore_c tilecore_d __syncthreads __shfl __shfl_xor "
        "tilecore_u32x2 tilecore_u32x4 tilecore_lane tilecore_bperm tilecore_xor_src tilecore_idx_src "
        "tilecore_shfl_src tilecore_shfl tilecore_min tilecore_max tilecore_shfl_xor tilecore_tanhf "
        "tilecore_erff tilecore_powf tilecore_ipow".split())
    max_grid_yz = 65535
    restrict_qualifier = "__restrict__ "
    constant_qualifier = "__device__ const"
    vector_types, vector_zeros = _VECTOR, _VECTOR_ZERO

    # ------------------------------------------------------------------ values and casts
    def to_float(self, d: DType, s: str) -> str:
        """`_Float16` / `__bf16` convert by a cast; fp8 bit patterns through the prelude's decoder."""
        if d.name in P.FP8:
            return f"{self._helper(*P.fp8_decoder(d.name))}({s})"
        return super().to_float(d, s)

    def from_float(self, d: DType, s: str) -> str:
        """Round to nearest even (casts; fp8 through the prelude's encoder, overflow as the oracle)."""
        if d.name in P.FP8:
            self.type_name(d)
            return f"{self._helper(*P.fp8_encoder(d.name, 'float32'))}({s})"
        return super().from_float(d, s)

    def from_double(self, d: DType, s: str) -> str:
        """One rounding from double (clang's conversions round once; fp8 through the encoder)."""
        if d.name in P.FP8:
            self.type_name(d)
            return f"{self._helper(*P.fp8_encoder(d.name, 'float64'))}({s})"
        return super().from_double(d, s)

    def _helper(self, name: str, text: str) -> str:
        self.helpers.setdefault(name, text)
        return name

    def float_literal_special(self, value: float, d: DType) -> str:
        """inf / nan from clang builtins (no <math.h>)."""
        f = "" if d.name == "float64" else "f"
        if value != value:
            return f'__builtin_nan{f}("")'
        return f"{'-' if value < 0 else ''}__builtin_inf{f}()"

    def math_call(self, name: str, d: DType) -> str:
        """The core's spelling with libm names as builtins or prelude helpers (`_libm`)."""
        return self._libm(super().math_call(name, d), name)

    def math_bin_call(self, name: str, d: DType) -> str:
        """As `math_call` for binary functions (min, max, mod, pow)."""
        return self._libm(super().math_bin_call(name, d), name)

    def _libm(self, text: str, what: str) -> str:
        """`text` with each libm call replaced: AMDGPU-lowered ones by `__builtin_<name>`,
        tanhf/erff/powf by the prelude's helpers; the rest (float64 exp, log, sin, ...) need ocml
        and are refused."""
        def spell(m) -> str:
            fn = m.group(1)
            if fn in _BUILTIN:
                return f"__builtin_{fn}("
            if fn in _HELPERS:
                helper, key = _HELPERS[fn]
                return self._helper(helper, P.MATH[key]) + "("
            if fn.startswith("__builtin_") or fn.startswith("tilecore_"):
                return m.group(0)
            raise self._needs_ocml(what, fn)

        return _LIBM_CALL.sub(spell, text)

    @staticmethod
    def _needs_ocml(name: str, fn: str) -> TileTargetError:
        return TileTargetError(f"{name} ({fn}) on hip needs ROCm's device library (ocml), which the "
                               "offline build (-nogpulib) does not link",
                               hint="compute it in float32, or run on emu:hip:<arch>")

    def expr_BinOp(self, e) -> str:
        """As the base, but integer min/max through a function (each operand evaluated once: a
        shuffle inside the base's `a < b ? a : b` would run again on only some lanes, a divergent
        `ds_bpermute`), and integer pow wrapping mod 2**64 as the oracle does (`tilecore_ipow`)."""
        t = e.a.dtype
        if e.op in ("min", "max") and t.is_int:
            ct = self.compute_type(t)
            fn = self._helper(f"tilecore_{e.op}", P.INT_MINMAX[e.op])
            return f"{fn}(({ct})({self.expr(e.a)}), ({ct})({self.expr(e.b)}))"
        if e.op == "pow" and t.is_int:
            self.helpers.setdefault("ipow", P.IPOW)
            a, b = self.expr(e.a), self.expr(e.b)
            return f"(({self.compute_type(t)})tilecore_ipow((long long)({a}), (long long)({b})))"
        return super().expr_BinOp(e)

    def pointer_cast(self, ctype: str, scope: str, ptr: str) -> str:
        """`reinterpret_cast` (generic pointers; clang infers the address space)."""
        return f"reinterpret_cast<{ctype}*>({ptr})"

    def address_as_int(self, ptr: str) -> str:
        return f"reinterpret_cast<unsigned long long>({ptr})"

    def fast_divide(self, a: str, b: str) -> str:
        """`v_rcp_f32` (1 ulp) and a multiply."""
        return f"({a} * __builtin_amdgcn_rcpf({b}))"

    # ------------------------------------------------------------------ GPU spellings
    def thread_index(self) -> str:
        return "(int)__builtin_amdgcn_workitem_id_x()"

    def block_index(self, axis: int) -> str:
        return f"(int)__builtin_amdgcn_workgroup_id_{'xyz'[axis]}()"

    def barrier_text(self) -> str:
        return "__syncthreads();"

    def shuffle_call(self, mode: str, value: str, arg: str, width: int) -> str:
        """`ds_bpermute` through the prelude's wave-size-aware helpers."""
        self.helpers.setdefault("shuffle", P.shuffles(self.kernel.warp_size))
        fn = "tilecore_shfl_xor" if mode == "xor" else "tilecore_shfl"
        return f"{fn}({value}, {arg}, {width})"

    def atomic_add_call(self, ref: str, value: str, d: DType) -> str:
        """clang's `__hip_atomic_fetch_add`, relaxed, device (agent) scope."""
        return f"__hip_atomic_fetch_add(&{ref}, {value}, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT)"

    def atomic_cas_call(self, word: str, expected: str, desired: str) -> str:
        return f"__sync_val_compare_and_swap({word}, {expected}, {desired})"

    def device_fence(self, loc) -> str:
        """`__threadfence()`: HIP's device-scope fence."""
        return "__threadfence();"

    def narrow_atomic(self, d: DType) -> bool:
        """Every 8/16-bit type through the compare-and-swap loop (one tested path)."""
        return d.bits <= 16

    def align_prefix(self, nbytes: int) -> str:
        return f"__attribute__((aligned({nbytes}))) "

    def printf_unsupported(self) -> str:
        """T.print: HIP's device printf needs the ROCm device libraries (ockl's hostcalls),
        which builds without ROCm (`-nogpulib`) cannot link; T.device_assert still traps."""
        return "HIP device printf needs the ROCm device libraries, which this build does not link"

    def helper_prefix(self) -> str:
        return "__device__ static inline"

    def shared_storage(self, nbytes: int) -> list[str]:
        """One static LDS array: its size shows in the code object (`group_segment_fixed_size`)
        and clang rejects a kernel over the 64 KiB."""
        return [f"__shared__ {self.align_prefix(self.shared_align)}unsigned char {self.smem_name}[{nbytes}];"]

    def kernel_qualifiers(self, kernel) -> str:
        return f'extern "C" __global__ void __launch_bounds__({kernel.num_threads})'

    def prelude(self) -> list[str]:
        """HIP's keywords, vector types and barrier (no headers), then the helpers used."""
        lines = [f"// generated by tilecore (hip backend, wave{self.kernel.warp_size}); "
                 "compile with -nogpuinc -nogpulib", P.KEYWORDS, _VECTOR_TYPEDEFS, P.BARRIER]
        return lines + super().prelude()

    def stmt_IntrinsicCall(self, s) -> None:
        """The MFMA/WMMA builtin on vectors copied from (and back to) the operand registers."""
        intr = s.intrinsic
        self.emit("{")
        names = []
        for spec, ref in zip(intr.operands, s.operands):
            d = spec.dtype
            elem = {"float16": "_Float16", "bfloat16": "short", "float32": "float"}[d.name]
            vt = f"{elem} __attribute__((ext_vector_type({spec.elems})))"
            name = f"tilecore_{spec.name.lower()}"
            names.append(name)
            src = f"&{self.ref(ref.buffer, ref.offset)}"
            if spec.role == "out":
                self.emit(f"  {vt} {name};")
                out_ref = src
            else:
                self.emit(f"  {vt} {name}; __builtin_memcpy(&{name}, {src}, sizeof({name}));")
        self.emit(f"  {names[0]} = {builtin_name(intr)}({', '.join(names[1:])}{builtin_tail(intr)});")
        self.emit(f"  __builtin_memcpy({out_ref}, &{names[0]}, sizeof({names[0]}));")
        self.emit("}")


def render_hip(module, fast_math: bool | None = None) -> RenderedKernel:
    """HIP source and launch description of a lowered module; `fast_math` (default: the module's
    `tl.enable_fast_math` pass config) lets float32 division by a variable approximate."""
    if fast_math is None:
        fast_math = fast_math_requested(module)
    return HipRenderer(fast_math).render(module)
