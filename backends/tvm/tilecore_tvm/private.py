"""Which fragments can live in per-thread registers under the GPU mapping (no `tvm` import).

The GPU mapping deals the elements of every split statement to threads by their flat
row-major index (`Lowerer.elements`: element f goes to thread f % threads, iteration
f // threads). A fragment every access of which is made *at the element's own position* by a
split statement whose element space is the fragment itself — `F[i, j]` in a `T.Parallel(M, N)`
nest over F's shape, F as a whole region of a copy / fill / tile atomic add, as gemm's
accumulator, as a reduction's destination — is therefore only ever touched by one thread per
element, at one iteration number: it is stored per thread as `ceil(numel / threads)` values
indexed by that iteration. Everything else (shared tiles, fragments read across elements:
gemm operands, reduction sources, scans, scalar code) stays in shared memory, which is small
on GPUs (32 KiB on lavapipe): the 128 x 128 float32 gemm accumulator alone is 64 KiB.
"""

from __future__ import annotations

from tilecore.ir.buffer import Region
from tilecore.ir.expr import Load, Var
from tilecore.ir.stmt import (
    AtomicAdd,
    AtomicAddRegion,
    Copy,
    CumSum,
    Fill,
    For,
    Gemm,
    IfThenElse,
    LetStmt,
    Reduce,
    SeqStmt,
    Store,
)
from tilecore.ir.visit import walk


def _squeeze(shape) -> tuple:
    return tuple(n for n in shape if n != 1)


class _Scan:
    def __init__(self, allocs):
        self.cand = {id(b): b for b in allocs
                     if b.scope in ("fragment", "local") and not b.is_var and b.static_shape}
        self.bad: set[int] = set()

    def expr(self, e, nest) -> None:
        """Loads in `e`; `nest` is (loop vars, extents) of the enclosing split T.Parallel nest."""
        if e is None:
            return
        for n in walk(e):
            if isinstance(n, Load):
                self.access(n.buffer, n.indices, nest)

    def access(self, buf, indices, nest) -> None:
        if id(buf) not in self.cand:
            return
        owned = (nest is not None and tuple(buf.static_shape) == nest[1]
                 and len(indices) == len(nest[0])
                 and all(isinstance(i, Var) and i is v for i, v in zip(indices, nest[0])))
        if not owned:
            self.bad.add(id(buf))

    def region(self, r: Region, owned: bool) -> None:
        if id(r.buffer) in self.cand and not (owned and r.is_full):
            self.bad.add(id(r.buffer))
        for e in r.starts:
            self.expr(e, None)

    def stmt(self, s, nest, split: bool) -> None:
        """`split`: whether `s` is inside a statement split over threads."""
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                self.stmt(x, nest, split)
        elif isinstance(s, LetStmt):
            self.expr(s.value, nest)
        elif isinstance(s, (Store, AtomicAdd)):
            self.access(s.buffer, s.indices, nest)
            for i in s.indices:
                self.expr(i, nest)
            self.expr(s.value, nest)
        elif isinstance(s, IfThenElse):
            self.expr(s.cond, nest)
            self.stmt(s.then_body, nest, split)
            if s.else_body is not None:
                self.stmt(s.else_body, nest, split)
        elif isinstance(s, For):
            self.expr(s.start, nest)
            self.expr(s.stop, nest)
            if s.kind == "parallel" and not split:
                self.parallel(s)
            else:
                self.stmt(s.body, nest, split)
        else:
            self.tile_op(s, not split)

    def parallel(self, s: For) -> None:
        loops = [s]
        while isinstance(loops[-1].body, For) and loops[-1].body.kind == "parallel":
            loops.append(loops[-1].body)
        vars_, extents = [], []
        for lp in loops:
            start, stop = lp.start, lp.stop
            if not (getattr(start, "value", None) == 0 and isinstance(getattr(stop, "value", None), int)):
                vars_ = None
                break
            vars_.append(lp.var)
            extents.append(stop.value)
        nest = None if vars_ is None else (tuple(vars_), tuple(extents))
        self.stmt(loops[-1].body, nest, True)

    def tile_op(self, s, top: bool) -> None:
        if isinstance(s, Copy):
            same = s.src.buffer is s.dst.buffer
            self.region(s.src, top and not same)
            self.region(s.dst, top and not same)
        elif isinstance(s, Fill):
            self.region(s.dst, top)
            self.expr(s.value, None)
        elif isinstance(s, AtomicAddRegion):
            self.region(s.dst, top)
            self.region(s.src, top)
        elif isinstance(s, Gemm):
            self.region(s.a, False)
            self.region(s.b, False)
            lead = s.c.extents[:-2]
            self.region(s.c, top and all(n == 1 for n in lead))
        elif isinstance(s, Reduce):
            self.bad.add(id(s.src))
            kept = [n for d, n in enumerate(s.src.static_shape) if d != s.dim]
            if _squeeze(kept) != _squeeze(s.dst.static_shape) or not top:
                self.bad.add(id(s.dst))
        elif isinstance(s, CumSum):
            self.bad.update((id(s.src), id(s.dst)))
        else:  # a statement kind this scan does not know: keep everything it names shared
            for n in walk(s):
                if id(n) in self.cand:
                    self.bad.add(id(n))


def private_fragments(launch) -> set[int]:
    """The ids of `launch`'s fragment / local buffers that can be per-thread (module doc)."""
    scan = _Scan(launch.allocs)
    scan.stmt(launch.body, None, False)
    return set(scan.cand) - scan.bad
