"""The Metal Shading Language dialect of the GPU renderer (`tilecore/codegen/gpu.py`).

Spellings only, plus the two things MSL structures differently from CUDA:

- kernel parameters: tensors are `device T* x [[buffer(i)]]`, symbolic sizes `constant int& n
  [[buffer(i)]]`, and the thread / threadgroup positions are parameters with attributes
  (`[[thread_position_in_threadgroup]]`, `[[threadgroup_position_in_grid]]`) that the index
  hooks append to `extra_params`;
- threadgroup memory is one array declared at kernel scope (`threadgroup uint4 ...[n]`, uint4
  for 16-byte alignment) carved into typed views by the GPU layer.

`simdgroup_matrix` operations come from the intrinsics' declarations (`intrinsics.py`): the
registers of an operand are moved in and out of `thread_elements()` (2 per lane, in the order
of the lane map), and a loader becomes one `simdgroup_load` whose origin and row stride are
recovered from the per-lane row addresses the lowering computed (checked numerically here).
"""

from __future__ import annotations

import numpy as np

from tilecore.codegen.gpu import GPURenderer
from tilecore.codegen.spec import KernelParam, RenderedKernel, fast_math_requested
from tilecore.dtypes import DType
from tilecore.errors import TileInternalError, TileTargetError
from tilecore.ir.expr import const_int
from tilecore.lower.indexing import NotNumeric, evaluate, free_vars

from .intrinsics import MATRIX, SIMD_WIDTH, msl_type

_SPACES = {"global": "device ", "shared": "threadgroup ", "local": "thread "}
_VECTOR = {1: "uchar", 2: "ushort", 4: "uint", 8: "uint2", 16: "uint4"}
_VECTOR_ZERO = {1: "uchar(0)", 2: "ushort(0)", 4: "0u", 8: "uint2(0u)", 16: "uint4(0u)"}
_PRECISE = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos")
_PLAIN = {"floor": "floor", "ceil": "ceil", "round": "rint", "trunc": "trunc", "abs": "fabs"}
_BIN = {"min": "metal::fmin({}, {})", "max": "metal::fmax({}, {})", "pow": "metal::precise::pow({}, {})",
        "mod": "metal::fmod({}, {})"}
_ATOMIC_TYPES = {"int32": "atomic_int", "uint32": "atomic_uint", "float32": "atomic_float"}
# MSL has no erf: a float32 erf (|error| < 2e-7) from the Maclaurin series below 1 and
# Abramowitz & Stegun 7.1.26 (with erf = 1 - erfc) above.
_ERF = """inline float tilecore_erf(float x) {
  const float a = metal::fabs(x);
  if (a < 1.0f) {
    float term = x, sum = x;
    const float x2 = x * x;
    for (int n = 1; n < 12; ++n) { term *= -x2 / (float)n; sum += term / (float)(2 * n + 1); }
    return 1.1283791670955126f * sum;
  }
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f
                   + t * (-1.453152027f + t * 1.061405429f))));
  const float r = 1.0f - poly * metal::precise::exp(-a * a);
  return x < 0.0f ? -r : r;
}"""


class MetalRenderer(GPURenderer):
    """Renders a lowered module as one MSL `kernel void` function."""

    type_overrides = {"float16": "half", "bfloat16": "bfloat", "int8": "char", "uint8": "uchar",
                      "uint16": "ushort", "uint32": "uint", "int64": "long"}
    reserved_words = frozenset(
        "kernel device constant threadgroup thread half bfloat uchar ushort uint ulong uint2 uint3 uint4 "
        "ulong2 metal simd_shuffle simd_shuffle_xor threadgroup_barrier mem_flags simdgroup_matrix "
        "simdgroup_load simdgroup_store simdgroup_multiply_accumulate atomic_int atomic_uint atomic_float "
        "atomic_fetch_add_explicit atomic_compare_exchange_weak_explicit memory_order_relaxed as_type "
        "INFINITY NAN tilecore_tid tilecore_bid tilecore_erf tilecore_smem_words "
        "tc_m tc_a tc_b tc_c tc_d".split())
    constant_qualifier = "constant"
    vector_types, vector_zeros = _VECTOR, _VECTOR_ZERO

    def __init__(self, fast_math: bool = False):
        super().__init__(fast_math)
        self.positions: list[str] = []  # "tid" / "bid": the position parameters, in order

    # ------------------------------------------------------------------ values and casts
    def float_literal_special(self, value: float, d: DType) -> str:
        """Metal's INFINITY / NAN constants (there is no double)."""
        if value != value:
            return "NAN"
        return "INFINITY" if value > 0 else "(-INFINITY)"

    def from_double(self, d: DType, s: str) -> str:
        """Metal has no double: never reached for float64 (refused), see `expr_Cast`."""
        raise TileInternalError("the Metal renderer does not convert from double")

    def expr_Cast(self, e) -> str:
        """As the base, except that wide ints convert to narrow floats directly (one rounding in
        Metal's conversion) instead of through double, which MSL lacks."""
        src, dst = e.value.dtype, e.dtype
        if dst.is_narrow_float and src.is_int and src.bits >= 32:
            return f"(({self.type_name(dst)})({self.expr(e.value)}))"
        return super().expr_Cast(e)

    def address_space(self, scope: str) -> str:
        """`device ` / `threadgroup ` / `thread `."""
        return _SPACES[scope]

    def bit_cast(self, ctype: str, lvalue: str) -> str:
        """`as_type<T>(x)`."""
        return f"as_type<{ctype}>({lvalue})"

    def address_as_int(self, ptr: str) -> str:
        """`(ulong)` (MSL has no `long long`)."""
        return f"((ulong)({ptr}))"

    def math_call(self, name: str, d: DType) -> str:
        """`metal::precise::` for transcendental functions (IEEE-accurate whatever the fast-math
        compile option), `metal::` for exact ones, and our own erf (MSL has none)."""
        if d.name == "float64":
            raise TileInternalError("Metal has no double")
        if name in _PRECISE:
            return f"metal::precise::{name}({{}})"
        if name in _PLAIN:
            return f"metal::{_PLAIN[name]}({{}})"
        if name == "erf":
            self.helpers.setdefault("tilecore_erf", _ERF)
            return "tilecore_erf({})"
        if name == "sigmoid":
            return "(1.0f / (1.0f + metal::precise::exp(-({}))))"
        raise TileInternalError(f"no Metal spelling of {name}")

    def math_bin_call(self, name: str, d: DType) -> str:
        """min / max: the base's NaN-propagating helper functions (plain C, valid MSL) where the
        base defines them, else `metal::fmin` / `fmax` (which, like C's, drop a NaN operand);
        `metal::fmod`, `metal::precise::pow`."""
        if name in ("min", "max"):
            text = super().math_bin_call(name, d)
            if not text.startswith(("fminf", "fmaxf")):  # C's fminf is not MSL
                return text
        return _BIN[name]

    def expr_BinOp(self, e) -> str:
        """Integer `pow` through float (MSL has no double); the rest as the base."""
        if e.op == "pow" and e.a.dtype.is_int:
            return (f"(({self.compute_type(e.a.dtype)})metal::precise::pow((float)({self.expr(e.a)}), "
                    f"(float)({self.expr(e.b)})))")
        return super().expr_BinOp(e)

    # ------------------------------------------------------------------ kernel structure
    def param_decl(self, p: KernelParam, c_name: str, index: int) -> str:
        """`device T* x [[buffer(i)]]`; symbolic sizes `constant int& n [[buffer(i)]]`."""
        t = self.type_name(p.dtype)
        if p.is_pointer:
            return f"device {t}* {c_name} [[buffer({index})]]"
        return f"constant {t}& {c_name} [[buffer({index})]]"

    def thread_index(self) -> str:
        """`tilecore_tid.x`, a `[[thread_position_in_threadgroup]]` parameter (1-D groups)."""
        if "tid" not in self.positions:
            self.positions.append("tid")
            self.extra_params.append("uint3 tilecore_tid [[thread_position_in_threadgroup]]")
        return "(int)tilecore_tid.x"

    def block_index(self, axis: int) -> str:
        """`tilecore_bid.x/y/z`, a `[[threadgroup_position_in_grid]]` parameter."""
        if "bid" not in self.positions:
            self.positions.append("bid")
            self.extra_params.append("uint3 tilecore_bid [[threadgroup_position_in_grid]]")
        return f"(int)tilecore_bid.{'xyz'[axis]}"

    def shared_storage(self, nbytes: int) -> list[str]:
        """One kernel-scope threadgroup array (uint4 elements: 16-byte aligned) and a byte view."""
        words = (nbytes + 15) // 16
        return [f"threadgroup uint4 tilecore_smem_words[{words}];",
                f"threadgroup uchar* {self.smem_name} = (threadgroup uchar*)tilecore_smem_words;"]

    def kernel_qualifiers(self, kernel) -> str:
        return "kernel void"

    def printf_unsupported(self) -> str:
        """T.print / T.device_assert: MSL has no printf and no way to abort a kernel."""
        return "Metal Shading Language has no printf"

    def trap_text(self) -> None:
        return None

    def barrier_text(self) -> str:
        return "threadgroup_barrier(mem_flags::mem_threadgroup);"

    def prelude(self) -> list[str]:
        """The Metal standard library, then helper functions."""
        return ["// generated by tilecore (metal backend)", "#include <metal_stdlib>",
                "using namespace metal;", ""] + super().prelude()

    # ------------------------------------------------------------------ SIMD groups
    def shuffle_call(self, mode: str, value: str, arg: str, width: int) -> str:
        """`simd_shuffle_xor(v, mask)` (a mask below `width` stays in its group), or
        `simd_shuffle(v, lane)` with the lane counted from the start of the caller's group."""
        if mode == "xor":
            return f"simd_shuffle_xor({value}, (ushort)({arg}))"
        base = f"((int)tilecore_tid.x & {(SIMD_WIDTH - 1) & ~(width - 1)})"
        return f"simd_shuffle({value}, (ushort)({base} + ({arg})))"

    # ------------------------------------------------------------------ atomics
    def stmt_Atomic(self, s) -> None:
        """`atomic_fetch_add_explicit` on the buffer's address space; 8/16-bit types through a
        compare-and-swap helper on their 32-bit word; an acq_rel order is refused (device_fence)."""
        if s.order != "relaxed":
            self.device_fence(s.loc)
        self._atomic_scope = s.buffer.scope
        d = s.buffer.dtype
        if s.op != "add":
            self._metal_extremum(s, d)
            return
        if not self.narrow_atomic(d):
            return super().stmt_Atomic(s)
        helper = self.cas_atomic_helper(d, "add", s.buffer.scope)
        space = self.address_space(s.buffer.scope)
        byte = f"({self.expr(s.offset)}) * {d.itemsize}"
        value = self.converted(s.value, d)
        self.guarded(s.pred, f"{helper}(({space}atomic_uint*){self.name_of(s.buffer)}, {byte}, {value});")

    def _metal_extremum(self, s, d: DType) -> None:
        """T.atomic_max / atomic_min through the compare-and-swap helper on 32-bit atomic words."""
        if d.bits > 32:
            raise TileTargetError(f"T.atomic_{s.op} on {d} is not provided on Metal", s.loc,
                                  hint="use a type of at most 32 bits (int32, float32, ...)")
        helper = self.cas_atomic_helper(d, s.op, s.buffer.scope)
        space = self.address_space(s.buffer.scope)
        byte = f"({self.expr(s.offset)}) * {d.itemsize}"
        value = self.converted(s.value, d)
        call = f"{helper}(({space}atomic_uint*){self.name_of(s.buffer)}, {byte}, {value})"
        if s.prev is not None:
            dst = self.ref(s.prev, s.prev_offset)
            self.guarded(s.pred, f"{dst} = ({self.type_name(s.prev.dtype)})({call});")
        else:
            self.guarded(s.pred, call + ";")

    def cas_atomic_helper(self, d: DType, op: str, scope: str = "global") -> str:
        """`op`(element, val) (add for the 8/16-bit types, max / min for every type) for an
        element of at most 32 bits at byte offset `byte` of a buffer viewed as 32-bit atomic
        words: a weak compare-and-swap loop (a spurious failure retries), returning the value
        found; nothing is written when the bits do not change. The operation is this renderer's
        expression code (the oracle's rounding; max / min propagate NaN)."""
        name = f"tilecore_atomic_{op}_{d.name}_{scope}"
        if name in self.helpers:
            return name
        from tilecore.ir.expr import Var, binop

        t = self.type_name(d)
        bits = {8: "uchar", 16: "ushort", 32: "uint"}[d.bits]
        cur, val = Var("cur", d), Var("val", d)
        saved = dict(self.names)
        self.names[id(cur)], self.names[id(val)] = "cur", "val"
        best = self.expr(binop(op, cur, val))
        self.names = saved
        space = self.address_space(scope)
        mask = "0xffffffffu" if d.bits == 32 else f"{hex((1 << d.bits) - 1)}u << shift"
        self.helpers[name] = "\n".join([
            f"inline {t} {name}({space}atomic_uint* words, int byte, {t} val) {{",
            f"  {space}atomic_uint* word = words + byte / 4;",
            "  const uint shift = (uint)(byte & 3) * 8u;",
            f"  const uint mask = {mask};",
            "  uint expected = atomic_load_explicit(word, memory_order_relaxed);",
            "  while (true) {",
            f"    const {bits} in_bits = ({bits})((expected & mask) >> shift);",
            f"    const {t} cur = as_type<{t}>(in_bits);",
            f"    const {t} best = {best};",
            f"    const {bits} out_bits = as_type<{bits}>(best);",
            "    if (out_bits == in_bits) return cur;",
            "    const uint desired = (expected & ~mask) | ((uint)out_bits << shift);",
            "    if (atomic_compare_exchange_weak_explicit(word, &expected, desired, memory_order_relaxed,",
            "                                              memory_order_relaxed)) return cur;",
            "  }",
            "}",
        ])
        self.reserve(name)
        return name

    def narrow_atomic(self, d: DType) -> bool:
        """Metal's atomics are 32-bit: every narrower type goes through compare-and-swap."""
        return d.bits < 32

    def atomic_add_call(self, ref: str, value: str, d: DType) -> str:
        """`atomic_fetch_add_explicit((space atomic_T*)&ref, v, memory_order_relaxed)`."""
        if d.name not in _ATOMIC_TYPES:
            raise TileInternalError(f"Metal has no atomic add on {d}")
        space = self.address_space(getattr(self, "_atomic_scope", "global"))
        return (f"atomic_fetch_add_explicit(({space}{_ATOMIC_TYPES[d.name]}*)&{ref}, {value}, "
                "memory_order_relaxed)")

    def atomic_cas_call(self, word: str, expected: str, desired: str) -> str:
        raise TileInternalError("the Metal renderer spells compare-and-swap in cas_atomic_helper")


    # ------------------------------------------------------------------ simdgroup matrices
    def stmt_IntrinsicCall(self, s) -> None:
        """`simdgroup_multiply_accumulate` (kind mma) or `simdgroup_load` (kind ldmatrix)."""
        if s.intrinsic.kind == "mma":
            self._mma(s)
        else:
            self._load(s)

    def _elements(self, ref, e: int) -> str:
        off = const_int(ref.offset)
        name = self.name_of(ref.buffer)
        return f"{name}[{off + e}]" if off is not None else f"{name}[{self.expr(ref.offset)} + {e}]"

    def _mma(self, s) -> None:
        ops = s.intrinsic.operands
        self.emit("{")
        mats = {}
        for spec, ref in zip(ops, s.operands):
            m = f"tc_{spec.name.lower()}"
            mats[spec.name] = m
            self.emit(f"  simdgroup_matrix<{msl_type(spec.dtype)}, {MATRIX}, {MATRIX}> {m};")
            if spec.role == "in":
                for e in range(spec.elems):
                    self.emit(f"  {m}.thread_elements()[{e}] = {self._elements(ref, e)};")
        self.emit(f"  simdgroup_multiply_accumulate({mats['D']}, {mats['A']}, {mats['B']}, {mats['C']});")
        d_spec, d_ref = ops[0], s.operands[0]
        for e in range(d_spec.elems):
            self.emit(f"  {self._elements(d_ref, e)} = {mats['D']}.thread_elements()[{e}];")
        self.emit("}")

    def _load(self, s) -> None:
        (dst, _), (dref, sref) = s.intrinsic.operands, s.operands
        stride = self._row_stride(sref.offset)
        tid = self.name_of(self.kernel.thread_var)
        origin = f"{self.name_of(sref.buffer)}[({self.expr(sref.offset)}) - ({tid} % {MATRIX}) * {stride}]"
        transpose = "true" if s.intrinsic.name.endswith(".transpose") else "false"
        self.emit("{")
        self.emit(f"  simdgroup_matrix<{msl_type(dst.dtype)}, {MATRIX}, {MATRIX}> tc_m;")
        self.emit(f"  simdgroup_load(tc_m, &{origin}, {stride}, ulong2(0, 0), {transpose});")
        for e in range(dst.elems):
            self.emit(f"  {self._elements(dref, e)} = tc_m.thread_elements()[{e}];")
        self.emit("}")

    def _row_stride(self, offset) -> int:
        """The distance between the memory rows lanes 0..7 address: lane l must address
        origin + (l % 8) * stride in every SIMD group (checked with the thread index over the
        whole group and the other variables at a few values); the loader's declared map."""
        kernel = self.kernel
        tx = kernel.thread_var
        lanes = np.arange(kernel.num_threads, dtype=np.int64)
        rng = np.random.default_rng(0)
        found = None
        for trial in range(3):
            env = {id(v): int(rng.integers(0, 5)) if trial else 0 for v in free_vars(offset) if v is not tx}
            env[id(tx)] = lanes
            try:
                addr = np.broadcast_to(np.asarray(evaluate(offset, env), dtype=np.int64), lanes.shape)
            except NotNumeric as err:
                raise TileInternalError(f"simdgroup_load row address depends on {err}") from None
            first = addr[lanes - lanes % SIMD_WIDTH]
            stride = int(addr[1] - addr[0]) if kernel.num_threads > 1 else 0
            if not np.array_equal(addr, first + (lanes % MATRIX) * stride) or found not in (None, stride):
                raise TileInternalError("simdgroup_load rows are not evenly strided (a swizzled "
                                        "threadgroup layout?); Metal declares no bank facts to avoid this")
            found = stride
        return found


def render_metal(module, fast_math: bool | None = None) -> tuple[RenderedKernel, tuple[str, ...]]:
    """MSL source and launch description of a lowered module, and the position parameters the
    kernel takes after its buffers (`"tid"`, `"bid"`, in order)."""
    if fast_math is None:
        fast_math = fast_math_requested(module)
    r = MetalRenderer(fast_math)
    rendered = r.render(module)
    return rendered, tuple(r.positions)
