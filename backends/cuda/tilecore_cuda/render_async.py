"""CUDA spellings of the asynchronous memory model's nodes (docs/architecture.md): cp.async
copies, group commit and wait, named / warpgroup barriers, and Hopper's mbarriers, TMA bulk
tensor copies and proxy fences, as inline PTX.

A mixin of `CudaRenderer` (it uses the C-style base's `expr`, `ref`, `name_of` and `emit`).
TMA copies name their tensor map parameter (`tensormap.tensor_map_specs`, appended to the
signature as `const __grid_constant__ tilecore_tmap_t tilecore_tmap<i>`); their shared buffers
are aligned to 1024 bytes, since the hardware swizzles on absolute shared address bits and the
128-byte swizzle pattern repeats every 1024 bytes.
"""

from __future__ import annotations

from tilecore.errors import TileInternalError
from tilecore.ir.reg_budget import SetMaxNReg
from tilecore.ir.thread import MbarrierArrive, MbarrierInit, MbarrierWait, OperandRef, TmaLoad, TmaStore
from tilecore.ir.visit import walk

from .tensormap import TMAP_DECL, TMAP_TYPE, spec_of, tensor_map_specs

TMA_SMEM_ALIGN = 1024
_SHARED_ADDRESSED = (MbarrierInit, MbarrierArrive, MbarrierWait, TmaLoad, TmaStore)
_FENCES = {"proxy_async": "fence.proxy.async.shared::cta;",
           "mbarrier_init": "fence.mbarrier_init.release.cluster;",
           "order": "fence.acq_rel.cta;"}


class AsyncRenderMixin:
    """`stmt_AsyncCopy`, `stmt_AsyncCommit`, `stmt_AsyncWait`, scoped `stmt_Barrier`, and the
    mbarrier / TMA / fence statements."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reserve("tc_in", "tc_ok", TMAP_TYPE)  # zero-fill predicate, try-wait result
        self.tmaps: tuple = ()

    # ------------------------------------------------------------------ TMA kernel structure
    def shared_decls(self, kernel) -> tuple[list[str], int]:
        """The tensor-map parameters (before the body names them), then shared memory."""
        params = self._func_params
        self.tmaps = tensor_map_specs(kernel, params) if params is not None else ()
        if self.tmaps:
            self.helpers[TMAP_TYPE] = TMAP_DECL
            self.reserve(*(f"tilecore_tmap{i}" for i in range(len(self.tmaps))))
            self.extra_params += [f"const __grid_constant__ {TMAP_TYPE} tilecore_tmap{i}"
                                  for i in range(len(self.tmaps))]
        lines, total = super().shared_decls(kernel)
        base = f"const unsigned {self.smem_name}_u32 ="
        needs = any(isinstance(n, _SHARED_ADDRESSED) for n in walk(kernel.body))
        if needs and not any(base in x for x in lines):
            # the 32-bit base mbarrier and TMA operands are offsets from (shared_operand_address)
            lines.append(f"{base} {self.shared_window_address(self.smem_name)};")
        if self.tmaps:
            # the first TMA copy would otherwise fetch its descriptor from the parameter space
            # on the critical path (a memory round trip of a 15 us small-M GEMM); as CUTLASS
            # does, one thread asks the descriptor cache for every map at the kernel's start
            lines.append("if (threadIdx.x == 0) {")
            lines += [f'  asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<unsigned long long>'
                      f'(&tilecore_tmap{i})) : "memory");' for i in range(len(self.tmaps))]
            lines.append("}")
        return lines, total

    def render(self, module):
        """Remember the function's parameters (tensor maps index them), then render."""
        self._func_params = module.func.params
        return super().render(module)

    _func_params = None

    def shared_layout(self, kernel) -> int:
        """Aligned byte offsets (the base's rule: a layout's own `align_bytes`); buffers a TMA
        copy reads or writes start at 1024 bytes, and so does the allocation."""
        tma = {id(n.dst if isinstance(n, TmaLoad) else n.src) for n in walk(kernel.body)
               if isinstance(n, (TmaLoad, TmaStore))}
        if not tma:
            return super().shared_layout(kernel)
        self.shared_base_align = TMA_SMEM_ALIGN  # extern __shared__ __align__(...)

        def align_of(b) -> int:
            need = getattr(b.layout, "align_bytes", None)
            return max(self.shared_align, need(b.dtype.itemsize) if need else 0,
                       TMA_SMEM_ALIGN if id(b) in tma else 0)

        return self.place_shared(kernel, align_of)

    def min_blocks_bound(self) -> str:
        """`, 1` for `__launch_bounds__` of a TMA kernel (its register cap is then the whole
        file's share of one block): without it ptxas capped the 128x128x64 GEMM of 256 threads
        at 128 registers and spilled; asking for more resident blocks (what its shared memory
        would allow) capped the 128-thread one at 128 and spilled 376 bytes. "" otherwise."""
        return ", 1" if self.tmaps else ""

    def _smem(self, buf, offset) -> str:
        """The 32-bit shared-window address of `buf[offset]`: the kernel's one converted base
        plus a byte offset, as for every shared operand (`shared_operand_address`)."""
        return self.shared_operand_address(OperandRef(buf, offset))

    # ------------------------------------------------------------------ mbarriers and TMA
    def stmt_MbarrierInit(self, s) -> None:
        """`mbarrier.init.shared::cta.b64 [bar], count`."""
        bar = self._smem(s.bar, s.offset)
        self.emit(f'asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"({bar}), '
                  f'"r"({int(s.count)}) : "memory");')

    def stmt_MbarrierArrive(self, s) -> None:
        """`mbarrier.arrive[.expect_tx].shared::cta.b64 _, [bar][, bytes]` (state discarded)."""
        bar = self._smem(s.bar, s.offset)
        if s.expect_tx:
            self.emit(f'asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"({bar}), '
                      f'"r"({int(s.expect_tx)}) : "memory");')
        else:
            self.emit(f'asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"({bar}) : "memory");')

    def stmt_MbarrierWait(self, s) -> None:
        """`mbarrier.try_wait.parity` until the phase of that parity has completed."""
        bar = self._smem(s.bar, s.offset)
        self.emit("{")
        self.emit("  unsigned tc_ok = 0;")
        self.emit("  do {")
        hint = ", %3" if s.suspend_ns else ""  # the suspend-time hint (ns), MbarrierWait.suspend_ns
        self.emit('    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], '
                  f'%2{hint}; selp.u32 %0, 1, 0, p; }}"')
        phase = f"(unsigned)({self.expr(s.phase)})"
        extra = f', "r"({int(s.suspend_ns)}u)' if s.suspend_ns else ""
        self.emit(f'                 : "=r"(tc_ok) : "r"({bar}), "r"({phase}){extra} : "memory");')
        self.emit("  } while (!tc_ok);")
        self.emit("}")

    def _coords(self, s) -> tuple[str, str]:
        """(`{%a, %b, ...}` innermost first, their "r" operands) of a TMA statement's box origin."""
        args = [f'"r"((int)({self.expr(c)}))' for c in reversed(s.coords)]
        return ", ".join(args), str(len(s.coords))

    def stmt_TmaLoad(self, s) -> None:
        """`cp.async.bulk.tensor.<n>d.shared::cluster.global.mbarrier::complete_tx::bytes`."""
        i = spec_of(self.tmaps, s, self._func_params)
        args, rank = self._coords(s)
        slots = ", ".join(f"%{k + 3}" for k in range(len(s.coords)))
        op = f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes"
        hint = policy = ""
        if s.cache_hint:  # an L2 eviction priority: a 64-bit cache policy made by createpolicy
            hint, policy = ".L2::cache_hint", f", %{len(s.coords) + 3}"
            args += f', "l"({self._cache_policy(s.cache_hint)})'
        self.emit(f'asm volatile("{op}{hint} [%0], [%1, {{{slots}}}], [%2]{policy};"')
        self.emit(f'    :: "r"({self._smem(s.dst, s.dst_offset)}), "l"(reinterpret_cast<unsigned long long>'
                  f'(&tilecore_tmap{i})), "r"({self._smem(s.bar, s.bar_offset)}), {args} : "memory");')

    def _cache_policy(self, hint: str) -> str:
        """A C++ expression of the L2 cache policy (`createpolicy.fractional`, the whole access
        at priority `hint`) for a `.L2::cache_hint` operand."""
        return (f'([] {{ unsigned long long p; asm("createpolicy.fractional.L2::{hint}.b64 %0, 1.0;" '
                f': "=l"(p)); return p; }}())')

    def stmt_TmaStore(self, s) -> None:
        """`cp.async.bulk.tensor.<n>d.global.shared::cta.bulk_group` (clipped to the tensor);
        `reduce="add"`: `cp.reduce.async.bulk.tensor.<n>d.global.shared::cta.add.tile.bulk_group`."""
        i = spec_of(self.tmaps, s, self._func_params)
        args, rank = self._coords(s)
        slots = ", ".join(f"%{k + 2}" for k in range(len(s.coords)))
        op = (f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.add.tile.bulk_group" if s.reduce
              else f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group")
        self.emit(f'asm volatile("{op} [%0, {{{slots}}}], [%1];"')
        self.emit(f'    :: "l"(reinterpret_cast<unsigned long long>(&tilecore_tmap{i})), '
                  f'"r"({self._smem(s.src, s.src_offset)}), {args} : "memory");')

    def stmt_WarpSpecialized(self, s) -> None:
        """`if (tx >= split) { producer } else { consumer }`, each side first setting its register
        budget with `setmaxnreg` when the node asks (one branch per role, as ptxas requires)."""
        tx = self.name_of(self.kernel.thread_var)
        self.emit(f"if ({tx} >= {s.split}) {{  // producer warpgroup")
        self.depth += 1
        if s.producer_regs:
            self.stmt_SetMaxNReg(SetMaxNReg(s.producer_regs, False))
        self.stmt(s.producer)
        self.depth -= 1
        self.emit("} else {  // consumers")
        self.depth += 1
        if s.consumer_regs:
            self.stmt_SetMaxNReg(SetMaxNReg(s.consumer_regs, True))
        self.stmt(s.consumer)
        self.depth -= 1
        self.emit("}")

    def stmt_SetMaxNReg(self, s) -> None:
        """`setmaxnreg.inc` / `.dec` (sm_90a): the warpgroup's register budget, from
        `T.set_max_nreg` or a warp-specialized node's producer/consumer budgets."""
        self.emit(f'asm volatile("{s.ptx}");')

    def stmt_AsyncFence(self, s) -> None:
        """`fence.proxy.async.shared::cta` / `fence.mbarrier_init.release.cluster` /
        `fence.acq_rel.cta` (kind "order": ptxas moves no wgmma wait above this MEMBAR; a
        volatile shared load pins the wait too, but its result register made the overlapped
        FlashAttention loop spill and measured slower on the H200)."""
        self.emit(f'asm volatile("{_FENCES[s.kind]}" ::: "memory");')

    def stmt_AsyncCopy(self, s) -> None:
        """`cp.async.{cg,ca}.shared.global [dst], [src], size[, src-size]`.

        16-byte copies bypass L1 (`.cg`, only that size allows it); 4/8-byte ones use `.ca`.
        With a predicate and zero fill, src-size is 0 when it is false (nothing is read, the
        destination is zeroed) and the source address falls back to the tensor's base so no
        out-of-range address is ever formed; without zero fill the copy is skipped."""
        nbytes = s.lanes * s.src.dtype.itemsize
        if s.queue != "cp.async" or s.completion != "group":
            raise TileInternalError(f"CUDA renders cp.async group copies only, not {s.completion}")
        cache = "cg" if nbytes == 16 else "ca"
        # the 32-bit shared-window address (one base per kernel; see shared_operand_address)
        dst = f'"r"({self.shared_operand_address(OperandRef(s.dst, s.dst_offset))})'
        src = f"&{self.ref(s.src, s.src_offset)}"
        if s.pred is None or not s.zero_fill:
            line = (f'asm volatile("cp.async.{cache}.shared.global [%0], [%1], {nbytes};" '
                    f':: {dst}, "l"({src}));')
            self.guarded(s.pred, line)
            return
        pred = self.expr(s.pred)
        self.emit("{")
        self.emit(f"  const bool tc_in = {pred};")
        self.emit(f'  asm volatile("cp.async.{cache}.shared.global [%0], [%1], {nbytes}, %2;" '
                  f':: {dst}, "l"(tc_in ? {src} : {self.name_of(s.src)}), "r"(tc_in ? {nbytes} : 0));')
        self.emit("}")

    def stmt_AsyncCommit(self, s) -> None:
        """`cp.async.commit_group` (queue "bulk": `cp.async.bulk.commit_group`)."""
        q = "cp.async.bulk" if s.queue == "bulk" else "cp.async"
        self.emit(f'asm volatile("{q}.commit_group;" ::: "memory");')

    def stmt_AsyncWait(self, s) -> None:
        """`cp.async.wait_group n`; a memory clobber, since shared memory changes underneath.
        Queue "bulk": `cp.async.bulk.wait_group.read n` (the stores' shared reads are done)."""
        if s.queue == "bulk":
            self.emit(f'asm volatile("cp.async.bulk.wait_group.read {int(s.pending)};" ::: "memory");')
            return
        self.emit(f'asm volatile("cp.async.wait_group {int(s.pending)};" ::: "memory");')

    def stmt_WarpgroupTurn(self, s) -> None:
        """FA3's scheduler barrier (tilecore.ir.thread.WarpgroupTurn): "wait" is `bar.sync` on
        the warpgroup's own barrier, "pass" a `bar.arrive` on the next warpgroup's; each counts
        two warpgroups (the waiter's threads and the passer's)."""
        wg = "((int)threadIdx.x / 128)"
        if s.kind == "wait":
            bar, op = f"{s.base_id} + {wg}", "bar.sync"
        else:
            bar, op = f"{s.base_id} + ({wg} + 1) % {s.groups}", "bar.arrive"
        stmt = f'asm volatile("{op} %0, 256;" :: "r"({bar}) : "memory");'
        if s.only >= 0:
            stmt = f"if ({wg} == {s.only}) {{ {stmt} }}"
        self.emit(f"{stmt}  // warpgroup turn: {s.kind}")

    def stmt_Barrier(self, s) -> None:
        """Block barriers as the base does; `bar.sync id, count` for named and warpgroup ones."""
        if s.scope == "block":
            super().stmt_Barrier(s)
            return
        why = f"  // {s.reason}" if s.reason else ""
        if s.scope == "named":
            self.emit(f'asm volatile("bar.sync {s.barrier_id}, {s.count};" ::: "memory");{why}')
            return
        size = 4 * self.kernel.warp_size if self.kernel is not None else 128
        self.emit(f'asm volatile("bar.sync %0, {size};" :: "r"({s.barrier_id} + (int)threadIdx.x / {size})'
                  f' : "memory");{why}')
