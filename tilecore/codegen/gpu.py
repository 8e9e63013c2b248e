"""The GPU-kernel layer of the renderer: what CUDA, HIP and Metal kernels share.

Written once here, over spelling hooks a dialect overrides:

- grid linearization: block indices decoded from one x index when a y/z extent is symbolic or
  over the dialect's `max_grid_yz`;
- shared-memory carving: every shared buffer is a typed, aligned view into one byte array
  (`shared_storage` declares it: CUDA `extern __shared__`, Metal at kernel scope or as a
  `[[threadgroup(0)]]` parameter);
- compare-and-swap atomics (`cas_atomic_helper`): an 8/16-bit add, and max / min of every type
  up to 32 bits, as a loop on the aligned 32-bit word;
- shuffles: narrow floats through float32, bools and narrow ints through int;
- operand packing: the registers of an intrinsic operand viewed as 32-bit words, and shared
  operands as 32-bit shared-window addresses (one base, so address arithmetic stays 32-bit).

A dialect supplies: `thread_index`, `block_index`, `barrier_text`, `shuffle_call`,
`atomic_add_call`, `atomic_cas_call`, `shared_storage`, `kernel_qualifiers`, `vector_types` /
`vector_zeros`; optionally `shared_window_address` (for inline-asm shared operands),
`param_attribute`, `align_prefix`, `helper_prefix`, `narrow_atomic`, `address_as_int`; and the
expression hooks of `cexpr.py` (types, narrow floats, math spelling, address spaces, casts).
A new thread-IR node gets its spelling from a `stmt_<ClassName>` (or `expr_<ClassName>`) method:
here when its structure is shared by every GPU dialect, else in the dialect.
"""

from __future__ import annotations

from dataclasses import replace

from ..dtypes import DType
from ..errors import TileInternalError, TileTargetError
from ..ir.expr import Var, binop, const, const_int
from ..ir.thread import AsyncCopy, IntrinsicCall
from ..ir.visit import walk
from .cstyle import CStyleRenderer
from .operand_bases import OperandBases
from .spec import KernelParam


class GPURenderer(CStyleRenderer):
    """A C-style GPU kernel: one entry point per module, run by `num_threads` threads per block.

    Class attributes: `max_grid_yz` (the largest launchable y/z grid extent; None: any),
    `shared_align` (bytes each shared buffer is aligned to inside the shared allocation),
    `restrict_qualifier` (spelled after `*` on tensor parameters), `constant_qualifier` (of
    constant tables), `smem_name` (the shared byte array).
    """

    max_grid_yz: int | None = None
    shared_align = 16
    restrict_qualifier = ""
    constant_qualifier = "static const"
    smem_name = "tilecore_smem"

    def __init__(self, fast_math: bool = False):
        super().__init__(fast_math)
        self.shared_offsets: dict[int, int] = {}  # id(shared buffer) -> byte offset
        self.operand_bases: OperandBases | None = None  # made for the kernel on first use
        self.reserve(self.smem_name, f"{self.smem_name}_u32")

    # ------------------------------------------------------------------ dialect hooks
    def thread_index(self) -> str:
        """The flattened thread index within the block, as an int expression."""
        raise NotImplementedError

    def block_index(self, axis: int) -> str:
        """The block index along `axis` (0, 1, 2) as an expression."""
        raise NotImplementedError

    def shuffle_call(self, mode: str, value: str, arg: str, width: int) -> str:
        """A warp shuffle of 32-bit `value` (xor with `arg`, or from lane `arg`) in groups of `width`."""
        raise NotImplementedError

    def atomic_add_call(self, ref: str, value: str, d: DType) -> str:
        """A native atomic add of `value` to lvalue `ref` of dtype `d` (a statement without `;`)."""
        raise NotImplementedError

    def atomic_cas_call(self, word: str, expected: str, desired: str) -> str:
        """A 32-bit compare-and-swap on pointer `word`, returning the old value."""
        raise NotImplementedError

    def device_fence(self, loc) -> str:
        """A statement ordering the thread's memory accesses before it ahead of those after it,
        for every thread of the device (the two sides of an acq_rel Atomic); dialects that
        have none refuse the program at `loc`."""
        raise TileTargetError("T.atomic_add(memory_order=...) stronger than relaxed is not provided "
                              "on this target", loc, hint="use a relaxed atomic_add, or a CUDA or HIP target")

    def shared_window_address(self, ptr: str) -> str | None:
        """Generic pointer `ptr` into shared memory as a 32-bit shared-window address, for
        instructions that take one (PTX's ldmatrix); None for a dialect without such operands."""
        return None

    def kernel_qualifiers(self, kernel) -> str:
        """What precedes the entry name: e.g. `extern "C" __global__ void __launch_bounds__(n)`."""
        raise NotImplementedError

    def param_attribute(self, p: KernelParam, index: int) -> str:
        """Text after parameter `index`'s name (Metal: ` [[buffer(index)]]`); none by default."""
        return ""

    def align_prefix(self, nbytes: int) -> str:
        """The declaration prefix aligning a variable to `nbytes` (CUDA: `__align__(n) `)."""
        return f"alignas({nbytes}) "

    def narrow_atomic(self, d: DType) -> bool:
        """Whether an atomic add on `d` needs the compare-and-swap helper (no native add)."""
        return d.bits < 16 or (d.is_int and d.bits == 16)

    def address_as_int(self, ptr: str) -> str:
        """Pointer `ptr` as an unsigned 64-bit integer."""
        return f"((unsigned long long)({ptr}))"

    # ------------------------------------------------------------------ kernel structure
    def signature(self, name: str, params: list[str], kernel) -> str:
        """`<kernel_qualifiers> name(params)`."""
        return f"{self.kernel_qualifiers(kernel)} {name}({', '.join(params)})"

    def param_decl(self, p: KernelParam, c_name: str, index: int) -> str:
        """A tensor as a (restrict) pointer into global memory, a symbolic size by value."""
        t = self.type_name(p.dtype)
        attr = self.param_attribute(p, index)
        if p.is_pointer:
            return f"{self.address_space('global')}{t}* {self.restrict_qualifier}{c_name}{attr}"
        return f"{t} {c_name}{attr}"

    def table_decl(self, name: str, values: tuple) -> str:
        """A constant int array readable by every thread."""
        return f"{self.constant_qualifier} int {name}[{len(values)}] = {{{', '.join(map(str, values))}}};"

    def register_decl(self, buf) -> str:
        """A per-thread register array, 16-byte aligned so vector moves and 32-bit register
        packing may view its elements as wider words."""
        return (f"{self.align_prefix(16)}{self.address_space('local')}{self.type_name(buf.dtype)} "
                f"{self.name_of(buf)}[{buf.shape[0]}];")

    # ------------------------------------------------------------------ grid
    def linear_grid(self, kernel) -> bool:
        """Whether block indices are decoded from one x index: when a y/z extent is symbolic or
        over `max_grid_yz`."""
        if self.max_grid_yz is None:
            return False
        return any(const_int(g) is None or const_int(g) > self.max_grid_yz for g in kernel.grid[1:])

    def launch_grid(self, kernel) -> tuple:
        """The grid as launched: the kernel's, or all blocks along x (see `linear_grid`)."""
        if not self.linear_grid(kernel):
            return super().launch_grid(kernel)
        total = kernel.grid[0]
        for g in kernel.grid[1:]:
            total = total * g
        return (total, const(1), const(1))

    def index_bindings(self, kernel) -> list[str]:
        """The thread index and the block indices (decoded from x for a linear grid)."""
        lines = [f"const int {self.name_of(kernel.thread_var)} = {self.thread_index()};"]
        if not self.linear_grid(kernel):
            for axis, v in enumerate(kernel.block_vars):
                lines.append(f"const int {self.name_of(v)} = {self.block_index(axis)};")
            return lines
        rest = f"(int){self.block_index(0)}"
        for i, (v, g) in enumerate(zip(kernel.block_vars, kernel.grid)):
            last = i == len(kernel.grid) - 1
            lines.append(f"const int {self.name_of(v)} = {rest if last else f'{rest} % {self.expr(g)}'};")
            rest = f"({rest} / {self.expr(g)})"
        return lines

    # ------------------------------------------------------------------ shared memory
    def shared_layout(self, kernel) -> int:
        """Assign each shared buffer its aligned byte offset (`shared_offsets`); the total bytes."""
        self.shared_base_align = self.shared_align

        def align_of(b) -> int:
            # a layout defined on absolute addresses (wgmma/TMA swizzle) aligns its buffer
            need = getattr(b.layout, "align_bytes", None)
            return max(self.shared_align, need(b.dtype.itemsize) if need else 0)

        return self.place_shared(kernel, align_of)

    def place_shared(self, kernel, align_of) -> int:
        """Offsets of `kernel.shared` (each aligned to `align_of(buffer)`) into `shared_offsets`:
        the kernel's `shared_plan` where the lowering planned reuse (tilecore.lower.smem_plan),
        else one buffer after another. Returns the total bytes."""
        plan, offset = kernel.shared_plan, 0
        for b in kernel.shared:
            align = align_of(b)
            self.shared_base_align = max(self.shared_base_align, align)
            if plan is not None:
                off = plan.offset_of(b)
                if off % align:
                    raise TileInternalError(f"the shared-memory plan puts {b.name} at byte {off}, "
                                            f"not a multiple of its alignment {align}")
                self.shared_offsets[id(b)] = off
                continue
            offset = (offset + align - 1) // align * align
            self.shared_offsets[id(b)] = offset
            offset += b.shape[0] * b.dtype.itemsize
        return plan.total if plan is not None else offset

    def shared_storage(self, nbytes: int) -> list[str]:
        """Declarations of the `smem_name` byte array of `nbytes` (kernel scope or parameters)."""
        raise NotImplementedError

    def shared_decls(self, kernel) -> tuple[list[str], int]:
        """Every shared buffer as a typed pointer carved from one byte array."""
        if not kernel.shared:
            return [], 0
        total = self.shared_layout(kernel)
        lines = self.shared_storage(total)
        base = self.shared_window_address(self.smem_name)
        if base is not None and any(isinstance(n, AsyncCopy) or isinstance(n, IntrinsicCall) and any(
                o.space in ("shared", "desc") for o in n.intrinsic.operands) for n in walk(kernel.body)):
            lines.append(f"const unsigned {self.smem_name}_u32 = {base};  // see shared_operand_address")
        space = self.address_space("shared")
        for b in kernel.shared:
            t = self.type_name(b.dtype)
            view = self.pointer_cast(t, "shared", f"{self.smem_name} + {self.shared_offsets[id(b)]}")
            lines.append(f"{space}{t}* {self.name_of(b)} = {view};  // [{b.shape[0]}]")
        return lines, total

    # ------------------------------------------------------------------ warp and memory ops
    def expr_Shuffle(self, e) -> str:
        """`shuffle_call` on 32-bit values: narrow floats via float, bools and narrow ints via int."""
        d = e.dtype
        v, arg = self.expr(e.value), self.expr(e.arg)
        if d.is_narrow_float:
            return self.from_float(d, self.shuffle_call(e.mode, self.to_float(d, v), arg, e.width))
        if d.is_bool:
            return f"({self.shuffle_call(e.mode, f'(int)({v})', arg, e.width)} != 0)"
        if d.is_int and d.bits < 32:  # such ints compute as int (see compute_type)
            return self.shuffle_call(e.mode, f"(int)({v})", arg, e.width)
        return self.shuffle_call(e.mode, v, arg, e.width)

    def stmt_Atomic(self, s) -> None:
        """A native atomic add, or for 8/16-bit types the compare-and-swap helper."""
        d = s.buffer.dtype
        if d.is_bool:
            raise TileInternalError(f"atomic add on bool buffer {s.buffer.name}")
        if s.order != "relaxed":  # acq_rel: a device-scope fence on each side of the update
            fence = self.device_fence(s.loc)
            self.emit("{" if s.pred is None else f"if ({self.expr(s.pred)}) {{")
            self.depth += 1
            self.emit(fence)
            self.stmt(replace(s, pred=None, order="relaxed"))  # the dialect's own atomic rendering
            self.emit(fence)
            self.depth -= 1
            self.emit("}")
            return
        if s.op != "add":
            self._extremum_atomic(s, d)
            return
        ref, value = self.ref(s.buffer, s.offset), self.converted(s.value, d)
        if s.prev is not None:  # return_prev: the native atomic's result is the old value
            if self.narrow_atomic(d):
                raise TileTargetError(f"T.atomic_add(return_prev=True) on {d} is not provided on "
                                      "this target", s.loc, hint="accumulate in int32 or float32")
            dst = self.ref(s.prev, s.prev_offset)
            self.guarded(s.pred, f"{dst} = ({self.type_name(s.prev.dtype)})"
                                 f"({self.atomic_add_call(ref, value, d)});")
            return
        if self.narrow_atomic(d):
            self.guarded(s.pred, f"{self.cas_atomic_helper(d, 'add')}(&{ref}, {value});")
        else:
            self.guarded(s.pred, self.atomic_add_call(ref, value, d) + ";")

    def _extremum_atomic(self, s, d: DType) -> None:
        """T.atomic_max / atomic_min: the compare-and-swap helper (every dtype up to 32 bits)."""
        if d.bits > 32:
            raise TileTargetError(f"T.atomic_{s.op} on {d} is not provided on this target", s.loc,
                                  hint="use a type of at most 32 bits (int32, float32, ...)")
        ref, value = self.ref(s.buffer, s.offset), self.converted(s.value, d)
        call = f"{self.cas_atomic_helper(d, s.op)}(&{ref}, {value})"
        if s.prev is not None:
            dst = self.ref(s.prev, s.prev_offset)
            self.guarded(s.pred, f"{dst} = ({self.type_name(s.prev.dtype)})({call});")
        else:
            self.guarded(s.pred, call + ";")

    def cas_atomic_helper(self, d: DType, op: str) -> str:
        """A device function setting an element of at most 32 bits to `op`(itself, val) (add:
        the 8/16-bit types without a native atomic add; max / min: every type) with a
        compare-and-swap loop on its aligned 32-bit word, returning the value it found. The
        operation is this renderer's own expression code, so it follows the oracle (narrow
        floats round through float32, ints wrap, max / min propagate NaN); when it leaves the
        element's bits unchanged nothing is written."""
        name = f"tilecore_atomic_{op}_{d.name}"
        if name in self.helpers:
            return name
        t = self.type_name(d)
        bits = {8: "unsigned char", 16: "unsigned short", 32: "unsigned"}[d.bits]
        cur, val = Var("cur", d), Var("val", d)
        saved = dict(self.names)
        self.names[id(cur)], self.names[id(val)] = "cur", "val"
        best = self.expr(binop(op, cur, val))
        self.names = saved
        g = self.address_space("global")
        mask = "0xffffffffu" if d.bits == 32 else f"{hex((1 << d.bits) - 1)}u << shift"
        self.helpers[name] = "\n".join([
            f"{self.helper_prefix()} {t} {name}({g}{t}* addr, {t} val) {{",
            f"  const unsigned long long a = {self.address_as_int('addr')};",
            f"  {g}unsigned* word = {self.pointer_cast('unsigned', 'global', 'a & ~3ull')};",
            "  const unsigned shift = (unsigned)(a & 3ull) * 8u;",
            f"  const unsigned mask = {mask};",
            "  unsigned old = *word, assumed;",
            f"  {t} cur;",
            "  do {",
            "    assumed = old;",
            f"    {bits} in_bits = ({bits})((assumed & mask) >> shift);",
            f"    cur = {self.bit_cast(t, 'in_bits')};",
            f"    const {t} best = {best};",
            f"    const {bits} out_bits = {self.bit_cast(bits, 'best')};",
            "    if (out_bits == in_bits) break;",
            "    old = " + self.atomic_cas_call(
                "word", "assumed", "(assumed & ~mask) | ((unsigned)out_bits << shift)") + ";",
            "  } while (assumed != old);",
            "  return cur;",
            "}",
        ])
        self.reserve(name)
        return name


    # ------------------------------------------------------------------ intrinsic operands
    def register_words(self, spec, ref) -> list[str]:
        """The 32-bit words (lvalues, const unless an output) holding intrinsic operand `spec`'s
        elements `ref.buffer[ref.offset:]`, in order: `32 / bits` elements per word."""
        bits = spec.dtype.bits
        if (spec.elems * bits) % 32:
            raise TileInternalError(f"operand {spec.name}: {spec.elems} x {bits} bits "
                                    "do not pack into 32-bit registers")
        per = 32 // bits
        base = self.name_of(ref.buffer)
        off0 = const_int(ref.offset)
        ctype = "float" if spec.dtype.name == "float32" else "unsigned"
        words = []
        for r in range(spec.elems * bits // 32):
            elem = (f"{base}[{off0 + r * per}]" if off0 is not None
                    else f"{base}[{self.expr(ref.offset)} + {r * per}]")
            words.append(self.bit_view(ctype, elem, "local", const=spec.role != "out"))
        return words

    def shared_operand_address(self, ref) -> str:
        """The 32-bit shared-window address of `ref.buffer[ref.offset]`: one base converted once
        per kernel plus a 32-bit byte offset. Converting each generic pointer instead leaves the
        address arithmetic 64-bit under NVRTC (nvcc's front end narrows it, NVRTC's does not),
        which cost the 128x128 GEMM 196 registers instead of 128 (see build.py)."""
        nbytes = binop("add", binop("mul", ref.offset, const(ref.buffer.dtype.itemsize)),
                       const(self.shared_offsets[id(ref.buffer)]))
        if self.operand_bases is None:
            k = self.kernel
            self.operand_bases = OperandBases(k.thread_var, k.num_threads, self.name_of,
                                              f"{self.smem_name}_off")
        rel = self.operand_bases.relative(nbytes)
        if rel is None:
            return f"({self.smem_name}_u32 + {self.expr(nbytes)})"
        # one base per family of loader addresses (see operand_bases.py: why XOR, why the
        # addition and the rest are kept apart from it)
        text = rel.name if rel.xor == 0 else f"({rel.name} ^ {rel.xor}u)"
        if rel.add:
            text = f"({text} + {rel.add}u)"
        if rel.rest is not None:
            text = f"({text} + {self.expr(rel.rest)})"
        return f"({self.smem_name}_u32 + {text})"

    def late_decls(self) -> list[str]:
        """The bases of shared operand addresses (`shared_operand_address`)."""
        if self.operand_bases is None:
            return []
        return [f"const unsigned {n} = {self.expr(e)};" for n, e in self.operand_bases.decls]

    def asm_operands(self, s) -> tuple[list[str], list[str], str]:
        """GCC-style inline-assembly operands of IntrinsicCall `s` (CUDA's PTX, HIP's GCN):
        (output constraints, input constraints, the instruction's operand text), outputs
        numbered first; register operands as `{%i, ...}` word groups, shared ones as `[%i]`."""
        outs, ins, groups = [], [], []
        for spec, ref in zip(s.intrinsic.operands, s.operands):
            if spec.space == "shared":
                ins.append(f'"r"({self.shared_operand_address(ref)})')
                groups.append((None, len(ins) - 1, 1, False))
                continue
            kind = "f" if spec.dtype.name == "float32" else "r"
            out = spec.role == "out"
            words = [f'"{"=" if out else ""}{kind}"({w})' for w in self.register_words(spec, ref)]
            target = outs if out else ins
            groups.append(("reg", len(target), len(words), out))
            target.extend(words)
        pieces = []
        for kind, start, n, out in groups:
            first = start + (0 if out else len(outs))
            if kind is None:
                pieces.append(f"[%{first}]")
            else:
                pieces.append("{" + ", ".join(f"%{first + i}" for i in range(n)) + "}")
        return outs, ins, ", ".join(pieces)
