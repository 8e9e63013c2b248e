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
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import dtypes as dt
from ..ir.expr import Expr, Var
from ..lower.indexing import free_vars, try_evaluate


class OperandBases:
    """The bases (per kernel) shared operand byte offsets are expressed relative to."""

    def __init__(self, thread_var, num_threads: int, name_of: Callable[[Var], str], prefix: str):
        # name_of: the renderer's unique naming, so a base cannot clash with the kernel's names
        self.thread_var = thread_var
        self.env = {id(thread_var): np.arange(num_threads, dtype=np.int64)}
        self.name_of, self.prefix = name_of, prefix
        self.vars: list[Var] = []  # kept alive: the renderer names Vars by identity
        self.bases: list[tuple[str, np.ndarray]] = []  # (C name, byte offset of every thread)
        self.decls: list[tuple[str, Expr]] = []  # (C name, the offset expression it holds)

    def relative(self, nbytes: Expr) -> tuple[str, str, int] | None:
        """(base name, "^" or "+", constant) such that the byte offset `nbytes` is
        `base ^ constant` or `base + constant` for every thread; a new base when none of the
        known ones relates; None when `nbytes` depends on more than the thread index."""
        if any(v is not self.thread_var for v in free_vars(nbytes)):
            return None
        try:
            vals = try_evaluate(nbytes, self.env)
        except (ArithmeticError, ValueError):  # not plain index arithmetic: render it as is
            return None
        if vals is None:
            return None
        vals = np.broadcast_to(np.asarray(vals, dtype=np.int64), self.env[id(self.thread_var)].shape)
        if (vals < 0).any() or (vals >= 2**31).any():
            return None
        for name, bv in self.bases:
            delta = int(vals[0] - bv[0])
            if (vals - bv == delta).all():
                return name, "+", delta
            mask = int(vals[0] ^ bv[0])
            if ((bv ^ mask) == vals).all():
                return name, "^", mask
        self.vars.append(Var(self.prefix, dt.int32))
        name = self.name_of(self.vars[-1])
        self.bases.append((name, vals))
        self.decls.append((name, nbytes))
        return name, "+", 0
