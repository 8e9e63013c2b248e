"""Shared operand addresses as one base per family plus an XOR or an added constant.

A gemm's loader intrinsics (`ldmatrix`) read a swizzled shared tile at one address per
unrolled k step and n / m tile. Rendered as independent expressions of the thread index, each
distinct address is loop-invariant, so ptxas hoists every one out of the main loop and keeps
it live: FlashAttention (64x64 blocks, d=128, 128 threads, Swizzle<3,3,4>) held 20 address
registers instead of 3 and spilled 28 bytes at 168 registers. Across the k steps of a
swizzled tile the addresses differ from each other by a constant XOR (the k step's chunk
bits are XORed with the row's, and XOR distributes), so they are rendered as `base ^ K`
(one LOP3 with an immediate, cheap enough for ptxas to recompute in the loop instead of
keeping it live), or `base + D` when they differ by a constant (folded into the load's
immediate offset). The relation is checked by evaluating both offsets for every thread of
the block, so it holds by construction for any layout; offsets that depend on anything but
the thread index are rendered as before.

Two refinements keep the number of live address registers at the number of distinct XOR
masks (FlashAttention at 128x64 d=128 on sm_80 held 13 for the Q tile alone and spilled 104
bytes): the bits of an XOR that are zero in the base for every thread are an addition (`base ^
0x1020` -> `(base ^ 0x20) + 0x1000`, the addition folded into the load's immediate), and an
offset that is a sum of a thread-only part and a part free of the thread index (a pipeline
stage's `stage * 8192`) relates its thread part and adds the rest (`(base ^ 0x20) + rest`), so
the stage bases of a multi-buffered tile share the thread part's registers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import dtypes as dt
from ..ir.expr import Expr, Var, binop, const, linear
from ..lower.indexing import free_vars, try_evaluate


class OperandBases:
    """The bases (per kernel) shared operand byte offsets are expressed relative to."""

    def __init__(self, thread_var, num_threads: int, name_of: Callable[[Var], str], prefix: str):
        # name_of: the renderer's unique naming, so a base cannot clash with the kernel's names
        self.thread_var = thread_var
        self.env = {id(thread_var): np.arange(num_threads, dtype=np.int64)}
        self.name_of, self.prefix = name_of, prefix
        self.vars: list[Var] = []  # kept alive: the renderer names Vars by identity
        # (C name, byte offset of every thread, the OR of those offsets: the bits some thread sets)
        self.bases: list[tuple[str, np.ndarray, int]] = []
        self.decls: list[tuple[str, Expr]] = []  # (C name, the offset expression it holds)

    def relative(self, nbytes: Expr) -> Relation | None:
        """How the byte offset `nbytes` is rendered: `(base ^ xor) + add (+ rest)` for every
        thread, against a known base or a new one; None when `nbytes` is not a sum of a
        thread-only part and a part free of the thread index (or not plain index arithmetic)."""
        parts = self._split(nbytes)
        if parts is None:
            return None
        own, rest = parts
        try:
            vals = try_evaluate(own, self.env)
        except (ArithmeticError, ValueError):  # not plain index arithmetic: render it as is
            return None
        if vals is None:
            return None
        vals = np.broadcast_to(np.asarray(vals, dtype=np.int64), self.env[id(self.thread_var)].shape)
        if (vals < 0).any() or (vals >= 2**31).any():
            return None
        for name, bv, ones in self.bases:
            delta = int(vals[0] - bv[0])
            if (vals - bv == delta).all():
                return Relation(name, 0, delta, rest)
            mask = int(vals[0] ^ bv[0])
            if ((bv ^ mask) == vals).all():
                # bits no thread's base has set: XOR there is an addition (an immediate offset)
                add = mask & ~ones
                return Relation(name, mask ^ add, add, rest)
        self.vars.append(Var(self.prefix, dt.int32))
        name = self.name_of(self.vars[-1])
        self.bases.append((name, vals, int(np.bitwise_or.reduce(vals))))
        self.decls.append((name, own))
        return Relation(name, 0, 0, rest)

    def _split(self, nbytes: Expr) -> tuple[Expr, Expr | None] | None:
        """(thread-only part, the rest or None) of `nbytes`; None when a term mixes the thread
        index with other variables, or no term depends on the thread index alone."""
        other = [v for v in free_vars(nbytes) if v is not self.thread_var]
        if not other:
            return nbytes, None
        lin = linear(nbytes)
        if lin is None:
            return None
        own, rest = const(lin[1]), None
        for atom, c in lin[0].items():
            vs = free_vars(atom)
            term = binop("mul", atom, const(c)) if c != 1 else atom
            if all(v is self.thread_var for v in vs):
                own = binop("add", own, term)
            elif not any(v is self.thread_var for v in vs):
                rest = term if rest is None else binop("add", rest, term)
            else:
                return None
        if not any(v is self.thread_var for v in free_vars(own)):
            return None
        return own, rest


@dataclass(frozen=True)
class Relation:
    """A shared operand byte offset as `(base ^ xor) + add`, plus `rest` (an expression free
    of the thread index, e.g. a pipeline stage's offset) when not None."""

    name: str
    xor: int
    add: int
    rest: Expr | None = None
