"""Common subexpressions of one element-wise statement, evaluated once per execution.

Index arithmetic repeats itself: `T.im2col`'s load tests `ih >= 0`, `ih < H`, ... and then
indexes with the same `ih`, `iw`, `n`, each a chain of `//` and `%` over the nest's index
arrays; a safe-memory guard repeats an index again. The oracle evaluates every expression tree
as written, so each occurrence was one more NumPy operation over the whole nest (the
convolution example spent three quarters of its time there). Within one execution of a
statement the environment is fixed, and a *pure* subexpression (arithmetic and comparisons of
loop variables, let values and constants; division and remainder only by a non-zero constant;
no load, no select) has one value for every lane whatever the mask, and cannot fault. So each
pure subexpression occurring more than once is compiled to one closure that computes its value
on first use in an execution and returns it again until the statement runs next (`epoch`).
"""

from __future__ import annotations

from collections import Counter

from tilecore.ir.expr import BinOp, Cast, Const, Var
from tilecore.ir.visit import walk

_PURE = frozenset(("add", "sub", "mul", "min", "max", "lt", "le", "gt", "ge", "eq", "ne", "and", "or"))
_BY_CONSTANT = frozenset(("div", "mod", "floordiv", "floormod"))


def _pure(e, memo: dict) -> bool:
    key = id(e)
    got = memo.get(key)
    if got is None:
        if isinstance(e, (Var, Const)):
            got = True
        elif isinstance(e, BinOp):
            by_const = e.op in _BY_CONSTANT and isinstance(e.b, Const) and e.b.value != 0
            got = (e.op in _PURE or by_const) and _pure(e.a, memo) and _pure(e.b, memo)
        elif isinstance(e, Cast):
            got = _pure(e.value, memo)
        else:
            got = False
        memo[key] = got
    return got


class Cse:
    """The repeated pure subexpressions of a statement's expressions, and their closures."""

    def __init__(self, exprs):
        memo: dict = {}
        counts: Counter = Counter()
        for e in exprs:
            for n in walk(e):
                if isinstance(n, (BinOp, Cast)) and _pure(n, memo):
                    counts[n] += 1
        self.repeated = frozenset(n for n, c in counts.items() if c > 1)
        self.epoch = [0]
        self._fns: dict = {}

    def compiled(self, e, build):
        """The one caching closure of repeated subexpression `e` (`build()` compiles it)."""
        fn = self._fns.get(e)
        if fn is None:
            fn = self._fns[e] = _cached(build(), self.epoch)
        return fn

    def each_run(self, run):
        """`run` advancing the epoch first (`run` itself when nothing repeats)."""
        if not self._fns:
            return run
        epoch = self.epoch

        def fresh(env, mask):
            epoch[0] += 1
            return run(env, mask)

        return fresh


def _cached(f, epoch: list):
    seen = [-1, None]

    def cached(env, mask):
        if seen[0] != epoch[0]:
            seen[1] = f(env, mask)
            seen[0] = epoch[0]
        return seen[1]

    return cached
