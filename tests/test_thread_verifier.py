"""The thread-IR verifier on hand-built kernels (each broken in one way), and in the pipeline."""

from __future__ import annotations

import dataclasses

import pytest

from tilecore import dtypes as dt
from tilecore.errors import TileInternalError
from tilecore.ir.buffer import Buffer
from tilecore.ir.expr import Var, binop, cast, const
from tilecore.ir.module import Module, PrimFunc
from tilecore.ir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt
from tilecore.ir.thread import Barrier, MemLoad, MemStore, Shuffle, ThreadKernel
from tilecore.ir.thread_verifier import verify_thread_func
from tilecore.passes.base import Pass
from tilecore.passes.pipeline import run_pipeline, verify_module
from tilecore.target import Target, TargetDesc, TargetFacts

THREADS, WARP = 8, 4


def _kernel(body_fn, shared=True, regs=True):
    """y[bx * 8 + tx] = f(x): a kernel with one shared buffer and one register array."""
    X = Buffer("X", (64,), dt.float32, "global")
    Y = Buffer("Y", (64,), dt.float32, "global")
    tx, bx = Var("tx"), Var("bx")
    s = Buffer("s", (THREADS,), dt.float32, "shared")
    r = Buffer("r", (1,), dt.float32, "local")
    body = body_fn(X, Y, tx, bx, s, r)
    k = ThreadKernel((const(8),), (bx,), tx, THREADS, WARP, (s,) if shared else (), (r,) if regs else (),
                     body)
    return PrimFunc("k", (X, Y), k)


def _good(X, Y, tx, bx, s, r):
    i = Var("i")
    return SeqStmt((
        LetStmt(i, bx * THREADS + tx),
        MemStore(s, tx, MemLoad(X, i)),
        Barrier("s"),
        MemStore(r, const(0), MemLoad(s, (tx + 1) % THREADS)),
        IfThenElse(binop("lt", tx // WARP, 1),  # warp-uniform: a shuffle inside is fine
                   MemStore(r, const(0), Shuffle(MemLoad(r, const(0)), "xor", const(1), WARP))),
        For(Var("k"), const(0), const(2), 1, "serial", Barrier("uniform loop")),
        MemStore(Y, i, MemLoad(r, const(0))),
    ))


def test_a_well_formed_kernel_passes():
    verify_thread_func(_kernel(_good))


def test_undeclared_shared_buffer():
    with pytest.raises(TileInternalError, match="buffer s .*neither a parameter nor declared"):
        verify_thread_func(_kernel(_good, shared=False))


def test_undeclared_register_array():
    with pytest.raises(TileInternalError, match="buffer r "):
        verify_thread_func(_kernel(_good, regs=False))


def test_variable_used_before_definition():
    def body(X, Y, tx, bx, s, r):
        i = Var("i")
        return SeqStmt((MemStore(Y, i, MemLoad(X, tx)), LetStmt(i, bx * THREADS + tx)))

    with pytest.raises(TileInternalError, match="variable i used before definition"):
        verify_thread_func(_kernel(body))


def test_let_does_not_leak_out_of_its_sequence():
    def body(X, Y, tx, bx, s, r):
        i = Var("i")
        return SeqStmt((SeqStmt((LetStmt(i, tx), MemStore(r, const(0), MemLoad(X, i)))),
                        MemStore(Y, i, MemLoad(r, const(0)))))

    with pytest.raises(TileInternalError, match="variable i used before definition"):
        verify_thread_func(_kernel(body))


def test_barrier_under_a_thread_dependent_branch():
    def body(X, Y, tx, bx, s, r):
        return IfThenElse(binop("lt", tx, 4), Barrier("divergent"))

    with pytest.raises(TileInternalError, match="barrier under control flow"):
        verify_thread_func(_kernel(body))


def test_barrier_under_a_warp_uniform_but_block_divergent_branch():
    def body(X, Y, tx, bx, s, r):
        return IfThenElse(binop("eq", tx // WARP, 0), Barrier("only warp 0"))

    with pytest.raises(TileInternalError, match="barrier under control flow"):
        verify_thread_func(_kernel(body))


def test_barrier_under_a_register_dependent_loop():
    def body(X, Y, tx, bx, s, r):
        n = Var("n", dt.int32)
        return SeqStmt((LetStmt(n, cast(MemLoad(r, const(0)), dt.int32)),
                        For(Var("k"), const(0), n, 1, "serial", Barrier("trip count per thread"))))

    with pytest.raises(TileInternalError, match="barrier under control flow"):
        verify_thread_func(_kernel(body))


def test_shuffle_under_a_lane_divergent_branch():
    def body(X, Y, tx, bx, s, r):
        return IfThenElse(binop("lt", tx % WARP, 2),
                          MemStore(r, const(0), Shuffle(MemLoad(r, const(0)), "xor", const(1), WARP)))

    with pytest.raises(TileInternalError, match="shuffle under control flow"):
        verify_thread_func(_kernel(body))


def test_non_bool_condition():
    def body(X, Y, tx, bx, s, r):
        return IfThenElse(tx + 1, MemStore(r, const(0), MemLoad(X, tx)))

    with pytest.raises(TileInternalError, match="not bool"):
        verify_thread_func(_kernel(body))


def test_pipeline_names_the_pass_that_broke_the_ir(monkeypatch):
    """TILECORE_VERIFY=1: a backend pass that drops the kernel's register declarations is caught
    right after it runs, naming it."""
    monkeypatch.setenv("TILECORE_VERIFY", "1")

    def drop_registers(module, desc):
        """Forget every register array (a deliberate bug)."""
        k = module.func.body
        return module.with_func(module.func.with_body(dataclasses.replace(k, registers=())))

    t = Target("toyverify")
    desc = TargetDesc(t, t, TargetFacts(t), passes=(("after:simplify", Pass("drop-regs", drop_registers)),))
    func = _kernel(_good)
    verify_module(Module(func))
    with pytest.raises(TileInternalError, match="after pass 'drop-regs'.*buffer r "):
        run_pipeline(Module(func), desc)


@dataclasses.dataclass(frozen=True)
class _FutureStmt(Stmt):
    """A statement kind the verifier does not know (as later design steps will add)."""

    buffer: Buffer
    offset: object
    loc: object = None


def test_unknown_statement_kinds_are_still_checked():
    def good(X, Y, tx, bx, s, r):
        return _FutureStmt(s, tx)

    def bad_buffer(X, Y, tx, bx, s, r):
        return _FutureStmt(Buffer("ghost", (4,), dt.float32, "shared"), tx)

    def bad_var(X, Y, tx, bx, s, r):
        return _FutureStmt(s, Var("nowhere"))

    verify_thread_func(_kernel(good))
    with pytest.raises(TileInternalError, match="buffer ghost"):
        verify_thread_func(_kernel(bad_buffer))
    with pytest.raises(TileInternalError, match="variable nowhere"):
        verify_thread_func(_kernel(bad_var))
