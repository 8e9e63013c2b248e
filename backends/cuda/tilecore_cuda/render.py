"""The CUDA C++ renderer: the C-style base plus CUDA's types, qualifiers and inline PTX.

Tensor-core instructions (`IntrinsicCall`) are printed as inline PTX from the intrinsic's own
declaration: its mnemonic, and per operand the number of 32-bit registers its lane-map elements
pack into, so the register operands here can never disagree with the lane maps the lowering and
the `emu` backend use.
"""

from __future__ import annotations

from tilecore.codegen.cstyle import CStyleRenderer
from tilecore.codegen.spec import RenderedKernel
from tilecore.dtypes import DType
from tilecore.errors import TileInternalError
from tilecore.ir.expr import Var, binop, const, const_int

from .render_async import AsyncRenderMixin

# Alignment of each shared buffer inside the dynamic shared allocation (16: one 128-bit access).
SHARED_ALIGN = 16
_VECTOR = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "uint2", 16: "uint4"}
_VECTOR_ZERO = {1: "((unsigned char)0)", 2: "((unsigned short)0)", 4: "0u", 8: "make_uint2(0u, 0u)",
                16: "make_uint4(0u, 0u, 0u, 0u)"}
_TO_FLOAT = {"float16": "__half2float({})", "bfloat16": "__bfloat162float({})",
             "float8_e4m3fn": "((float)({}))", "float8_e5m2": "((float)({}))"}
# fp8 goes through tilecore helpers (see FP8_HELPERS): the constructors saturate, the oracle
# (ml_dtypes) gives NaN (e4m3) or inf (e5m2) past the largest finite value.
_FROM_FLOAT = {"float16": "__float2half_rn({})", "bfloat16": "__float2bfloat16_rn({})",
               "float8_e4m3fn": "tilecore_to_e4m3({})", "float8_e5m2": "tilecore_to_e5m2({})"}
_FROM_DOUBLE = {"float16": "__double2half({})", "bfloat16": "__double2bfloat16({})",
                "float8_e4m3fn": "tilecore_to_e4m3({})", "float8_e5m2": "tilecore_to_e5m2({})"}
FP8_HELPERS = "\n".join(
    f"__device__ __forceinline__ {t} tilecore_to_{n}({a} x) {{ {t} r; "
    f"r.__x = __nv_cvt_{a}_to_fp8(x, __NV_NOSAT, __NV_{n.upper()}); return r; }}"
    for t, n in (("__nv_fp8_e4m3", "e4m3"), ("__nv_fp8_e5m2", "e5m2")) for a in ("float", "double"))
_INDEX = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
MAX_GRID_YZ = 65535


class CudaRenderer(AsyncRenderMixin, CStyleRenderer):
    """Renders a lowered module as one `extern "C" __global__` CUDA C++ kernel."""

    def __init__(self):
        super().__init__()
        self.helpers: dict[str, str] = {}  # device functions the kernel needs, by name

    type_overrides = {"float16": "half", "bfloat16": "__nv_bfloat16", "float8_e4m3fn": "__nv_fp8_e4m3",
                      "float8_e5m2": "__nv_fp8_e5m2"}
    reserved_words = frozenset(
        "threadIdx blockIdx blockDim gridDim warpSize min max atomicAdd make_uint2 make_uint4 uint2 uint4 "
        "tilecore_smem tilecore_to_e4m3 tilecore_to_e5m2 __shfl_sync __shfl_xor_sync __syncthreads".split())

    # ------------------------------------------------------------------ types and values
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
        """inf / nan from bit patterns."""
        # Bit patterns: no division by zero in constant expressions, no <math.h> under NVRTC.
        if d.name == "float64":
            bits = "0x7ff8000000000000LL" if value != value else (
                "0x7ff0000000000000LL" if value > 0 else "(long long)0xfff0000000000000ULL")
            return f"__longlong_as_double({bits})"
        bits = "0x7fc00000" if value != value else ("0x7f800000" if value > 0 else "(int)0xff800000u")
        return f"__int_as_float({bits})"

    def expr_BinOp(self, e) -> str:
        """As the base, but int min/max through CUDA's overloads."""
        # CUDA's min/max overloads evaluate each operand once (the base's ternary repeats them).
        t = e.a.dtype
        if e.op in ("min", "max") and t.is_int and t.bits >= 32:
            return f"{e.op}({self.expr(e.a)}, {self.expr(e.b)})"
        return super().expr_BinOp(e)

    # ------------------------------------------------------------------ warp and memory ops
    def barrier_text(self) -> str:
        """`__syncthreads();`"""
        return "__syncthreads();"

    def vector_type(self, nbytes: int) -> str:
        """Built-in CUDA types of 1-16 bytes."""
        return _VECTOR[nbytes]

    def vector_zero(self, nbytes: int) -> str:
        """A zero of `vector_type(nbytes)`."""
        return _VECTOR_ZERO[nbytes]

    def expr_Shuffle(self, e) -> str:
        """`__shfl_xor_sync` / `__shfl_sync` over the full warp; narrow types via float or int."""
        d = e.dtype
        v, arg = self.expr(e.value), self.expr(e.arg)
        fn = "__shfl_xor_sync" if e.mode == "xor" else "__shfl_sync"
        if d.is_narrow_float:
            return self.from_float(d, f"{fn}(0xffffffffu, {self.to_float(d, v)}, {arg}, {e.width})")
        if d.is_bool:
            return f"({fn}(0xffffffffu, (int)({v}), {arg}, {e.width}) != 0)"
        if d.is_int and d.bits < 32:  # such ints compute as int (see compute_type)
            return f"{fn}(0xffffffffu, (int)({v}), {arg}, {e.width})"
        return f"{fn}(0xffffffffu, {v}, {arg}, {e.width})"

    def stmt_Atomic(self, s) -> None:
        """`atomicAdd`, with 64-bit ints as unsigned words and 8/16-bit types via a CAS helper."""
        d = s.buffer.dtype
        if d.is_bool:
            raise TileInternalError(f"atomic add on bool buffer {s.buffer.name}")
        if d.bits < 16 or (d.is_int and d.bits == 16):
            fn = self.narrow_atomic_helper(d)
            self.guarded(s.pred, f"{fn}(&{self.ref(s.buffer, s.offset)}, {self.converted(s.value, d)});")
            return
        if d.name == "int64":  # CUDA adds unsigned 64-bit words; two's complement makes it the same
            ptr = f"reinterpret_cast<unsigned long long*>(&{self.ref(s.buffer, s.offset)})"
            self.guarded(s.pred, f"atomicAdd({ptr}, (unsigned long long)({self.converted(s.value, d)}));")
            return
        self.guarded(s.pred, f"atomicAdd(&{self.ref(s.buffer, s.offset)}, "
                             f"{self.converted(s.value, d)});")

    def narrow_atomic_helper(self, d: DType) -> str:
        """A device function adding to an 8/16-bit element with a compare-and-swap loop on its
        aligned 32-bit word (CUDA has no atomic add of that width); the add itself follows the
        oracle's rounding (narrow floats through float32, ints wrapped)."""
        name = f"tilecore_atomic_add_{d.name}"
        if name in self.helpers:
            return name
        t, bits = self.type_name(d), ("unsigned char" if d.bits == 8 else "unsigned short")
        cur, val = Var("cur", d), Var("val", d)
        saved = dict(self.names)
        self.names[id(cur)], self.names[id(val)] = "cur", "val"
        total = self.expr(binop("add", cur, val))
        self.names = saved
        self.helpers[name] = "\n".join([
            f"__device__ __forceinline__ void {name}({t}* addr, {t} val) {{",
            "  const unsigned long long a = reinterpret_cast<unsigned long long>(addr);",
            "  unsigned* word = reinterpret_cast<unsigned*>(a & ~3ull);",
            "  const unsigned shift = (unsigned)(a & 3ull) * 8u;",
            f"  const unsigned mask = {hex((1 << d.bits) - 1)}u << shift;",
            "  unsigned old = *word, assumed;",
            "  do {",
            "    assumed = old;",
            f"    {bits} in_bits = ({bits})((assumed & mask) >> shift);",
            f"    const {t} cur = *reinterpret_cast<const {t}*>(&in_bits);",
            f"    const {t} sum = {total};",
            f"    const {bits} out_bits = *reinterpret_cast<const {bits}*>(&sum);",
            "    old = atomicCAS(word, assumed, (assumed & ~mask) | ((unsigned)out_bits << shift));",
            "  } while (assumed != old);",
            "}",
        ])
        self.reserve(name)
        return name

    def stmt_IntrinsicCall(self, s) -> None:
        """Inline PTX: outputs numbered first, then inputs; printed in the instruction's order."""
        intr = s.intrinsic
        outs, ins, groups = [], [], []
        for spec, ref in zip(intr.operands, s.operands):
            if spec.space == "shared":
                ins.append(f'"r"((unsigned)__cvta_generic_to_shared(&{self.ref(ref.buffer, ref.offset)}))')
                groups.append(("mem", len(ins) - 1, spec.role))
                continue
            bits = spec.dtype.bits
            if (spec.elems * bits) % 32:
                raise TileInternalError(f"{intr.name} operand {spec.name}: {spec.elems} x {bits} bits "
                                        "do not pack into 32-bit registers")
            nregs = spec.elems * bits // 32
            per = 32 // bits
            base = self.name_of(ref.buffer)
            off0 = const_int(ref.offset)
            kind = "f" if spec.dtype.name == "float32" else "r"
            ctype = "float" if kind == "f" else "unsigned"
            regs = []
            for r in range(nregs):
                elem = (f"{base}[{off0 + r * per}]" if off0 is not None
                        else f"{base}[{self.expr(ref.offset)} + {r * per}]")
                regs.append(f'"{"=" if spec.role == "out" else ""}{kind}"'
                            f"(*reinterpret_cast<{'' if spec.role == 'out' else 'const '}{ctype}*>(&{elem}))")
            target = outs if spec.role == "out" else ins
            groups.append(("reg", (len(target), nregs), spec.role))
            target.extend(regs)
        pieces = []
        for kind, where, role in groups:
            first = 0 if role == "out" else len(outs)
            if kind == "mem":
                pieces.append(f"[%{first + where}]")
            else:
                start, n = where
                pieces.append("{" + ", ".join(f"%{first + start + i}" for i in range(n)) + "}")
        self.emit(f'asm volatile("{intr.name} {", ".join(pieces)};"')
        self.emit(f"    : {', '.join(outs)}")
        self.emit(f"    : {', '.join(ins)});")

    # ------------------------------------------------------------------ kernel structure
    def prelude(self) -> list[str]:
        """The fp16/bf16/fp8 headers the kernel uses, then helper functions."""
        lines = ["// generated by tilecore (cuda backend)"]
        if {"float16"} & self.used_types:
            lines.append("#include <cuda_fp16.h>")
        if {"bfloat16"} & self.used_types:
            lines.append("#include <cuda_bf16.h>")
        if {"float8_e4m3fn", "float8_e5m2"} & self.used_types:
            lines += ["#include <cuda_fp8.h>", FP8_HELPERS]
        return lines + list(self.helpers.values())

    def table_decl(self, name: str, values: tuple) -> str:
        """A `__device__` constant int array."""
        return f"__device__ const int {name}[{len(values)}] = {{{', '.join(map(str, values))}}};"

    def signature(self, name: str, params: list[str], kernel) -> str:
        """`extern "C" __global__` with `__launch_bounds__(threads)`."""
        return (f'extern "C" __global__ void __launch_bounds__({kernel.num_threads}) '
                f"{name}({', '.join(params)})")

    def param_decl(self, p, c_name: str) -> str:
        """`T* __restrict__` for tensors, by value for symbolic sizes."""
        t = self.type_name(p.dtype)
        return f"{t}* __restrict__ {c_name}" if p.is_pointer else f"{t} {c_name}"

    @staticmethod
    def linear_grid(kernel) -> bool:
        """Whether block indices are decoded from one blockIdx.x: when a y/z extent is symbolic
        or over CUDA's 65535 limit for those dimensions (x allows 2^31 - 1)."""
        return any(const_int(g) is None or const_int(g) > MAX_GRID_YZ for g in kernel.grid[1:])

    def launch_grid(self, kernel) -> tuple:
        """The grid as launched: the kernel's, or all blocks along x (see `linear_grid`)."""
        if not self.linear_grid(kernel):
            return super().launch_grid(kernel)
        total = kernel.grid[0]
        for g in kernel.grid[1:]:
            total = total * g
        return (total, const(1), const(1))

    def index_bindings(self, kernel) -> list[str]:
        """threadIdx.x and blockIdx.x/y/z (decoded from blockIdx.x for a linear grid)."""
        lines = [f"const int {self.name_of(kernel.thread_var)} = threadIdx.x;"]
        if not self.linear_grid(kernel):
            for v, idx in zip(kernel.block_vars, _INDEX):
                lines.append(f"const int {self.name_of(v)} = {idx};")
            return lines
        rest = "(int)blockIdx.x"
        for i, (v, g) in enumerate(zip(kernel.block_vars, kernel.grid)):
            last = i == len(kernel.grid) - 1
            lines.append(f"const int {self.name_of(v)} = {rest if last else f'{rest} % {self.expr(g)}'};")
            rest = f"({rest} / {self.expr(g)})"
        return lines

    def shared_decls(self, kernel) -> tuple[list[str], int]:
        """Every shared buffer carved from one dynamic allocation, 16-byte aligned."""
        if not kernel.shared:
            return [], 0
        lines = ["extern __shared__ __align__(16) unsigned char tilecore_smem[];"]
        offset = 0
        for b in kernel.shared:
            offset = (offset + SHARED_ALIGN - 1) // SHARED_ALIGN * SHARED_ALIGN
            t = self.type_name(b.dtype)
            lines.append(f"{t}* {self.name_of(b)} = reinterpret_cast<{t}*>(tilecore_smem + {offset});"
                         f"  // [{b.shape[0]}]")
            offset += b.shape[0] * b.dtype.itemsize
        return lines, offset

    def register_decl(self, buf) -> str:
        # 16-byte aligned so vector moves and 32-bit register packing may reinterpret elements.
        return f"__align__(16) {self.type_name(buf.dtype)} {self.name_of(buf)}[{buf.shape[0]}];"


def render_cuda(module, target=None) -> RenderedKernel:
    """CUDA C++ source and launch description of a lowered module."""
    return CudaRenderer().render(module)
