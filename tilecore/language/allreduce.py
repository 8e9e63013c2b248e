"""TVM's raw cross-thread reduction in thread-level kernels, as TileLang kernels write it
(`gemv/example_gemv.py`):

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, "float32")]), "reduce_scope",
                T.reinterpret(T.uint64(0), dtype="handle")):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, out[0], tk, dtype="handle"))

`out` receives, in every thread, the combination of `acc` over the threads that differ only in
the named thread indices (`tk` = `T.get_thread_binding(1)`: the block's threadIdx.y). tilecore
writes it with thread-level statements every thread-lowered target runs: each thread stores its
value into a shared scratch row, a block barrier, each thread combines the values of its group
in thread-index order (TVM uses a shuffle tree: a float sum may round differently), a barrier
so the scratch can be reused. Only one value per reduction (`size` 1) and the condition `True`
are supported; other forms raise.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import TileShapeError, TileSyntaxError, TileTypeError
from ..ir.buffer import Buffer
from ..ir.expr import Expr, Load, Var, as_expr, binop, cast, const, const_int
from ..ir.stmt import For, SeqStmt, Store
from ..ir.thread_level import ThreadIndex, ThreadSync
from .builder import builtin, current
from .refs import Ref
from .thread_level import _frame


@dataclass(frozen=True)
class CommReducer:
    """`T.comm_reducer(combine, identities)`: a build-time value naming a reduction."""

    combine: object
    identities: tuple


@builtin
def comm_reducer(combiner, identity) -> CommReducer:
    """TVM's commutative reducer: `combiner(x, y)` (a Python function on kernel values) and its
    identity element (a one-element list)."""
    ids = tuple(identity) if isinstance(identity, (list, tuple)) else (identity,)
    if len(ids) != 1:
        raise TileShapeError(f"T.comm_reducer with {len(ids)} values: only single-value reducers are "
                             "supported", current().loc, hint="reduce one value at a time")
    return CommReducer(combiner, ids)


@dataclass(frozen=True)
class ReduceScope:
    """`with T.attr(reducer, "reduce_scope", ...)`: the reducer of the allreduce in its body."""

    reducer: CommReducer

    def tile_region(self, body, loc):
        """The body as it is (the allreduce inside already used the reducer); the scope ends."""
        current().reduce_scope = None
        return body


@builtin
def attr(node, attr_key, value) -> ReduceScope:
    """TIR's `T.attr(node, key, value)`; only `"reduce_scope"` around `T.tvm_thread_allreduce`."""
    b = current()
    if attr_key != "reduce_scope" or not isinstance(node, CommReducer):
        raise TileSyntaxError(f"T.attr({attr_key!r}) is not supported", b.loc,
                              hint="tilecore reads only T.attr(T.comm_reducer(...), 'reduce_scope', ...) "
                                   "around T.tvm_thread_allreduce; use T.* operations otherwise")
    from .bitcast import Handle

    if not (isinstance(value, (Handle, int)) or (isinstance(value, Expr) and value.dtype.is_int)):
        raise TileTypeError(f"T.attr(..., 'reduce_scope', {value!r}): the value is TVM's opaque "
                            "handle", b.loc, hint="pass T.reinterpret(T.uint64(0), dtype='handle')")
    b.reduce_scope = node
    return ReduceScope(node)


@builtin
def evaluate(value) -> None:
    """TIR's `T.evaluate(call)`: the call inside already emitted its statement."""
    if value is not None:
        raise TileSyntaxError("T.evaluate of a value has no effect in tilecore", current().loc,
                              hint="call the operation directly")


def _thread_dim(v, b) -> int:
    """The block dimension a thread-index argument names (through `tk = T.get_thread_binding(1)`)."""
    e = v.as_expr() if isinstance(v, Ref) else v
    seen = 0
    while isinstance(e, Var) and id(e) in b.let_values and seen < 8:
        e = b.let_values[id(e)][1]
        seen += 1
    if not isinstance(e, ThreadIndex):
        raise TileTypeError(f"T.tvm_thread_allreduce reduces over thread indices, got {v!r}", b.loc,
                            hint="pass the T.get_thread_binding(d) values to reduce over")
    return e.dim


@builtin
def tvm_thread_allreduce(size, *args, dtype=None) -> None:
    """`out` = the reduction of `value` over the threads differing only in `thread_indices`,
    in every thread (size 1, cond True; inside `T.attr(T.comm_reducer(...), "reduce_scope")`)."""
    b = _frame("T.tvm_thread_allreduce")
    if dtype not in (None, "handle"):
        raise TileTypeError(f"T.tvm_thread_allreduce(dtype={dtype!r}): the call is a statement",
                            b.loc, hint='write dtype="handle" or leave it out')
    n = const_int(as_expr(size))
    if n != 1 or len(args) < 4:
        raise TileShapeError(f"T.tvm_thread_allreduce(size={size!r}, ...): only one value per reduction "
                             "(size 1: value, True, out, thread indices...)", b.loc,
                             hint="reduce one value at a time")
    value, cond, out, tvars = args[0], args[1], args[2], args[3:]
    if not (cond is True or const_int(as_expr(cond)) == 1):
        raise TileShapeError("T.tvm_thread_allreduce with a condition other than True", b.loc,
                             hint="select the identity for threads that should not contribute")
    reducer = getattr(b, "reduce_scope", None)
    if reducer is None:
        raise TileSyntaxError("T.tvm_thread_allreduce outside `with T.attr(T.comm_reducer(...), "
                              "'reduce_scope', ...)`", b.loc, hint="wrap it in the reduce_scope attr")
    if not (isinstance(out, Ref) and out.is_element):
        raise TileTypeError("T.tvm_thread_allreduce writes an element (`out[0]`)", b.loc,
                            hint="pass an element of a T.alloc_local buffer")
    v = as_expr(value.as_expr() if isinstance(value, Ref) else value)
    dims = sorted({_thread_dim(t, b) for t in tvars})
    threads = tuple(b.kernel.threads)
    total = 1
    for t in threads:
        total *= t
    idx = [ThreadIndex(dt.int32, d) for d in range(len(threads))]

    def linear(coords) -> Expr:
        e, stride = as_expr(0), 1
        for d, c in enumerate(coords):
            e = binop("add", e, binop("mul", c, stride)) if stride != 1 else binop("add", e, c)
            stride *= threads[d]
        return e

    acc_t = v.dtype
    scratch = b.allocate(Buffer(b.unique_name("allreduce_scratch"), (total,), acc_t, "shared"))
    acc = b.allocate(Buffer(b.unique_name("allreduce_acc"), (1,), acc_t, "local"))
    loc = b.loc
    ident = cast(as_expr(reducer.identities[0], acc_t), acc_t)
    loops = [Var(b.unique_name(f"r{d}"), dt.int32) for d in dims]
    coords = list(idx)
    for d, lv in zip(dims, loops):
        coords[d] = lv
    combined = reducer.combine(Load(acc, (as_expr(0),)), Load(scratch, (linear(coords),)))
    body = SeqStmt((Store(acc, (as_expr(0),), cast(as_expr(combined), acc_t), loc),), loc)
    for d, lv in reversed(list(zip(dims, loops))):
        body = For(lv, const(0), const(threads[d]), 1, "serial", body, (), loc)
    ob = out.buffer
    b.emit(Store(scratch, (linear(idx),), v, loc))
    b.emit(ThreadSync(None, None, loc))
    b.emit(Store(acc, (as_expr(0),), ident, loc))
    b.emit(body)
    b.emit(Store(ob, tuple(as_expr(i) for i in out.items), cast(Load(acc, (as_expr(0),)), ob.dtype), loc))
    b.emit(ThreadSync(None, None, loc))


__all__ = ["CommReducer", "attr", "comm_reducer", "evaluate", "tvm_thread_allreduce"]
