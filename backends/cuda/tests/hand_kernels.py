"""Thread-level modules built by hand, to test rendering, building and launching without lowering.

`mma_module` computes C[N, 8] = A[N, 16] @ B[16, 8] with one warp per 16-row tile through
`ldmatrix` + `mma.sync` m16n8k16; every operand address follows the documented fragment layouts,
so its result on a GPU checks the driver-API launch path and the inline-PTX register packing.
"""

from __future__ import annotations

from tilecore_cuda.intrinsics import ldmatrix, mma_m16n8k16

from tilecore import dtypes as dt
from tilecore.ir.buffer import Buffer
from tilecore.ir.expr import Const, Unary, Var, binop, cast, const, select, unary
from tilecore.ir.module import Module, PrimFunc
from tilecore.ir.stmt import For, IfThenElse, LetStmt, SeqStmt
from tilecore.ir.thread import (
    Atomic,
    Barrier,
    IntrinsicCall,
    LaneTable,
    MemLoad,
    MemStore,
    OperandRef,
    Shuffle,
    ThreadKernel,
    VecMove,
)


def mma_module(dtype=dt.float16) -> Module:
    """C = A @ B (A: N x 16, B: 16 x 8, C: N x 8 float32), N symbolic, 16 rows per block."""
    N = Var("N")
    A = Buffer("A", (N, 16), dtype, "global")
    B = Buffer("B", (16, 8), dtype, "global")
    C = Buffer("C", (N, 8), dt.float32, "global")
    tx, bx = Var("tx"), Var("bx")
    a_s = Buffer("A_shared", (256,), dtype, "shared")
    b_s = Buffer("B_shared", (128,), dtype, "shared")
    ra = Buffer("a_frag", (8,), dtype, "local")
    rb = Buffer("b_frag", (4,), dtype, "local")
    rc = Buffer("c_frag", (4,), dt.float32, "local")
    row, e = Var("row"), Var("e")
    crow = bx * 16 + tx // 4 + (e // 2) * 8
    body = SeqStmt((
        # 32 threads x 8 halves = the 16x16 A tile; rows past N read as zeros
        LetStmt(row, bx * 16 + tx // 2),
        VecMove(a_s, (tx // 2) * 16 + (tx % 2) * 8, A, row * 16 + (tx % 2) * 8, 8,
                pred=binop("lt", row, N), zero_fill=True),
        IfThenElse(binop("lt", tx, 16), VecMove(b_s, tx * 8, B, tx * 8, 8)),
        Barrier("A_shared, B_shared written by other threads"),
        IntrinsicCall(ldmatrix(4, False, dtype),
                      (OperandRef(ra, const(0)), OperandRef(a_s, (tx % 16) * 16 + (tx // 16) * 8))),
        IntrinsicCall(ldmatrix(2, True, dtype), (OperandRef(rb, const(0)), OperandRef(b_s, (tx % 16) * 8))),
        For(e, const(0), const(4), 1, "unroll", MemStore(rc, e, cast(0.0, dt.float32))),
        IntrinsicCall(mma_m16n8k16(dtype), (OperandRef(rc, const(0)), OperandRef(ra, const(0)),
                                            OperandRef(rb, const(0)), OperandRef(rc, const(0)))),
        For(e, const(0), const(4), 1, "unroll",
            MemStore(C, crow * 8 + (tx % 4) * 2 + e % 2, MemLoad(rc, e), pred=binop("lt", crow, N))),
    ))
    kernel = ThreadKernel(((N + 15) // 16,), (bx,), tx, 32, 32, (a_s, b_s), (ra, rb, rc), body)
    return Module(PrimFunc("hand_mma", (A, B, C), kernel))


def misc_module(dtype=dt.float16) -> Module:
    """Shuffles, lane tables, atomics, selects, infinities and narrow-float math in one kernel
    (a rendering/compile test: every node kind the base renderer knows)."""
    N = Var("N")
    X = Buffer("X", (N,), dtype, "global")
    Y = Buffer("Y", (N,), dt.float32, "global")
    tx, bx = Var("tx"), Var("bx")
    r = Buffer("r", (2,), dt.float32, "local")
    s = Buffer("s", (64,), dtype, "shared")
    i = Var("i")
    body = SeqStmt((
        LetStmt(i, bx * 64 + tx),
        MemStore(r, const(0), cast(MemLoad(X, i, pred=binop("lt", i, N)), dt.float32)),
        MemStore(r, const(1), MemLoad(r, const(0)) + Shuffle(MemLoad(r, const(0)), "xor", const(1), 32)
                 * cast(LaneTable((1, 2, 3, 4), tx % 4), dt.float32)),
        MemStore(s, tx, cast(select(binop("gt", MemLoad(r, const(1)), float("inf")), -float("inf"),
                                    binop("max", MemLoad(r, const(1)), 1.5)), dtype)),
        Barrier("s"),
        # negation of negative literals must not print as C's `--` (found by conformance)
        MemStore(r, const(1), Unary("neg", Const(-1.5, dt.float32), dt.float32)
                 + cast(Unary("neg", Const(-1, dt.int32), dt.int32), dt.float32)),
        IfThenElse(binop("lt", i, N),
                   Atomic("add", Y, i % 7, unary("exp2", cast(MemLoad(s, (tx + 1) % 64), dt.float32))
                          + cast(unary("exp", MemLoad(s, tx)), dt.float32))),
    ))
    kernel = ThreadKernel(((N + 63) // 64,), (bx,), tx, 64, 32, (s,), (r,), body)
    return Module(PrimFunc("hand_misc", (X, Y), kernel))


def casts_module() -> Module:
    """Every dtype converted to every other, plus a shuffle and (where CUDA has one) an atomic
    add of each: a compile test of the dtype table and every conversion spelling."""
    tx = Var("tx")
    bufs = [Buffer(f"x_{d.name}", (64,), d, "global") for d in dt.ALL]
    stmts = []
    for dst in bufs:
        for src in bufs:
            if src is not dst:
                stmts.append(MemStore(dst, tx, cast(MemLoad(src, tx), dst.dtype)))
        stmts.append(MemStore(dst, tx, Shuffle(MemLoad(dst, (tx + 1) % 64), "idx", const(3), 32)))
        if not dst.dtype.is_bool:
            stmts.append(Atomic("add", dst, const(0), MemLoad(dst, tx)))
    kernel = ThreadKernel((const(1),), (Var("bx"),), tx, 64, 32, (), (), SeqStmt(tuple(stmts)))
    return Module(PrimFunc("hand_casts", tuple(bufs), kernel))


def atomic_module(dtype) -> Module:
    """Y[i % 8] += X[i] atomically for 32 threads (8/16-bit types go through a CAS loop)."""
    X = Buffer("X", (32,), dtype, "global")
    Y = Buffer("Y", (8,), dtype, "global")
    tx = Var("tx")
    kernel = ThreadKernel((const(1),), (Var("bx"),), tx, 32, 32, (), (),
                          Atomic("add", Y, tx % 8, MemLoad(X, tx)))
    return Module(PrimFunc("hand_atomic", (X, Y), kernel))
