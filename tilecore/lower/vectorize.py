"""Vector accesses for T.Parallel loops.

A loop partitioned by a strided layout with runs of `vec` gives each thread `vec` consecutive
iterations along the innermost dimension. When their lowered bodies are the same code whose
global/shared accesses sit at consecutive offsets (checked: offset_k - offset_0 == k, offset_0 a
provable multiple of vec, no predicates or guarded reads, no buffer both read and written), the `vec` scalar
reads become `VecMove`s into registers before the bodies and the `vec` scalar writes `VecMove`s
out of registers after them: one per `vector_bytes` of the buffer's dtype, so a run wider than
one access (8 fp32 values of a layout whose runs were sized for fp16) becomes several aligned
16-byte accesses rather than none. `Options.disable_vectorize` keeps every access scalar.
"""

from __future__ import annotations

from ..ir.expr import Const, Expr, Select, const, linear
from ..ir.stmt import LetStmt, SeqStmt, Stmt
from ..ir.thread import MemLoad, MemStore, VecMove
from ..ir.visit import rewrite, walk
from .context import LowerCtx


def fold_selects(s: Stmt) -> Stmt:
    """`s` with every `T.if_then_else` whose condition the known ranges decided (a constant
    after lowering: `bx * block_M + i < M` in an exact grid) replaced by the chosen operand, so
    a read it no longer guards can join a vector access."""
    def fn(n):
        if isinstance(n, Select) and isinstance(n.cond, Const):
            return n.true_value if n.cond.value else n.false_value  # children already folded
        return None

    return rewrite(s, fn)


def _flatten(s: Stmt) -> list | None:
    if isinstance(s, SeqStmt):
        out = []
        for x in s.stmts:
            f = _flatten(x)
            if f is None:
                return None
            out.extend(f)
        return out
    if isinstance(s, LetStmt) or (isinstance(s, MemStore) and s.pred is None):
        return [s]
    return None


def _memory(n) -> bool:
    return n.buffer.scope in ("global", "shared")


def _aligned(e: Expr, vec: int) -> bool:
    lin = linear(e)
    return lin is not None and lin[1] % vec == 0 and all(c % vec == 0 for c in lin[0].values())


def _consecutive(offsets: list, vec: int) -> bool:
    if not _aligned(offsets[0], vec):
        return False
    for k, off in enumerate(offsets):
        lin = linear(off - offsets[0])
        if lin is None or lin[0] or lin[1] != k:
            return False
    return True


def access_lanes(vec: int, itemsize: int, vector_bytes: int) -> int:
    """Elements per access of a run of `vec` elements of `itemsize` bytes: the largest power of
    two dividing `vec` that fits one `vector_bytes` access (VecMove moves at most 16 bytes)."""
    lanes = 1
    while vec % (lanes * 2) == 0 and lanes * 2 * itemsize <= min(vector_bytes, 16):
        lanes *= 2
    return lanes


def _moves(ctx: LowerCtx, dst, dst_base: Expr, src, src_base: Expr, vec: int, lanes: int,
           loc) -> list[Stmt]:
    """`vec` consecutive elements as `vec // lanes` VecMoves of `lanes` elements each."""
    def at(base: Expr, k: int) -> Expr:
        return base if k == 0 else ctx.simp(base + k)

    return [VecMove(dst, at(dst_base, k), src, at(src_base, k), lanes, None, False, loc)
            for k in range(0, vec, lanes)]


def vectorize_group(ctx: LowerCtx, bodies: list, vec: int, loc) -> Stmt | None:
    """The vectorized statement for `vec` consecutive iterations' bodies, or None (also when
    `Options.disable_vectorize` asks for scalar accesses)."""
    if ctx.options.disable_vectorize:
        return None
    flat = [_flatten(b) for b in bodies]
    if any(f is None for f in flat) or len({len(f) for f in flat}) != 1:
        return None
    loads = [[n for n in walk(SeqStmt(tuple(f))) if isinstance(n, MemLoad) and _memory(n)] for f in flat]
    stores = [[s for s in f if isinstance(s, MemStore) and _memory(s)] for f in flat]
    if len({len(x) for x in loads}) != 1 or len({len(x) for x in stores}) != 1:
        return None
    if not loads[0] and not stores[0]:
        return None
    for f in flat:  # a read guarded by a select must stay where the select decides it
        for n in walk(SeqStmt(tuple(f))):
            if isinstance(n, Select) and any(isinstance(m, MemLoad) and _memory(m) for m in walk(n)):
                return None
    read = {id(n.buffer) for n in loads[0]}
    if any(id(s.buffer) in read for s in stores[0]):
        return None
    pre: list[Stmt] = []
    replace: dict[int, Expr] = {}
    for j in range(len(loads[0])):
        group = [ld[j] for ld in loads]
        buf = group[0].buffer
        lanes = access_lanes(vec, buf.dtype.itemsize, ctx.facts.vector_bytes)
        if any(n.buffer is not buf or n.pred is not None for n in group) or \
                not _consecutive([n.offset for n in group], vec) or lanes == 1:
            return None
        tmp = ctx.new_regs(f"{buf.name}_vec", vec, buf.dtype)
        pre.extend(_moves(ctx, tmp, const(0), buf, group[0].offset, vec, lanes, loc))
        for k, n in enumerate(group):
            replace[id(n)] = MemLoad(tmp, const(k))
    post: list[Stmt] = []
    store_tmp: dict[int, tuple] = {}
    for j in range(len(stores[0])):
        group = [st[j] for st in stores]
        buf = group[0].buffer
        lanes = access_lanes(vec, buf.dtype.itemsize, ctx.facts.vector_bytes)
        if any(s.buffer is not buf for s in group) or not _consecutive([s.offset for s in group], vec) \
                or lanes == 1:
            return None
        tmp = ctx.new_regs(f"{buf.name}_vec", vec, buf.dtype)
        post.extend(_moves(ctx, buf, group[0].offset, tmp, const(0), vec, lanes, loc))
        for k, s in enumerate(group):
            store_tmp[id(s)] = (tmp, k)

    def fn(n):
        return replace.get(id(n))

    out: list[Stmt] = list(pre)
    for f in flat:
        for s in f:
            s2 = rewrite(s, fn)
            if id(s) in store_tmp:
                tmp, k = store_tmp[id(s)]
                s2 = MemStore(tmp, const(k), s2.value, None, s.loc)
            out.append(s2)
    return SeqStmt(tuple(out + post), loc)
