"""Integer interval analysis over index expressions: proves accesses in bounds so the generated
code can skip their checks (a checked access in an inner loop blocks vectorization)."""

from __future__ import annotations

from tilecore.ir.expr import BinOp, Cast, Const, Var

Interval = tuple[int, int]  # inclusive [lo, hi]


def interval(e, env: dict[int, Interval]) -> Interval | None:
    """The range of integer expression `e` given ranges of variables (by id), or None if unknown."""
    if isinstance(e, Const):
        if e.dtype.is_int:
            return int(e.value), int(e.value)
        return None
    if isinstance(e, Var):
        return env.get(id(e))
    if isinstance(e, Cast):
        if not (e.dtype.is_int and e.value.dtype.is_int):
            return None
        r = interval(e.value, env)
        if r is None:
            return None
        bits = e.dtype.bits
        lo, hi = (0, 2**bits - 1) if e.dtype.kind == "uint" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        return r if lo <= r[0] and r[1] <= hi else None
    if isinstance(e, BinOp) and e.dtype.is_int:
        a, b = interval(e.a, env), interval(e.b, env)
        if a is None or b is None:
            return None
        return _binop(e.op, a, b)
    return None


def _binop(op: str, a: Interval, b: Interval) -> Interval | None:
    if op == "add":
        return a[0] + b[0], a[1] + b[1]
    if op == "sub":
        return a[0] - b[1], a[1] - b[0]
    if op == "mul":
        ps = [x * y for x in a for y in b]
        return min(ps), max(ps)
    if op == "min":
        return min(a[0], b[0]), min(a[1], b[1])
    if op == "max":
        return max(a[0], b[0]), max(a[1], b[1])
    if op == "div" and b[0] == b[1] and b[0] > 0 and a[0] >= 0:
        return a[0] // b[0], a[1] // b[0]
    if op == "mod" and b[0] == b[1] and b[0] > 0 and a[0] >= 0:
        return 0, min(a[1], b[0] - 1)
    return None


def loop_range(start, stop, step: int, env) -> Interval | None:
    """The values a loop variable takes in `range(start, stop, step)` (a superset), or None."""
    s, e = interval(start, env), interval(stop, env)
    if s is None or e is None:
        return None
    if step > 0:
        return s[0], max(s[0], e[1] - 1)
    return min(s[1], e[0] + 1), s[1]


def within(r: Interval | None, extent: int, size) -> bool:
    """True when [r.lo, r.hi + extent) lies inside [0, size) (size an int; symbolic never proves)."""
    return r is not None and isinstance(size, int) and r[0] >= 0 and r[1] + extent <= size


def upper_facts(cond) -> list[tuple]:
    """(expr, bound) pairs with `expr < bound` implied by condition `cond` (conjunctions split);
    `bound` is a Var or an int."""
    from tilecore.ir.expr import BinOp, Const, Var

    if not isinstance(cond, BinOp):
        return []
    if cond.op == "and":
        return upper_facts(cond.a) + upper_facts(cond.b)
    a, b = cond.a, cond.b
    if cond.op in ("gt", "ge"):
        a, b = b, a
    elif cond.op not in ("lt", "le"):
        return []
    strict = cond.op in ("lt", "gt")
    if isinstance(b, Const) and b.dtype.is_int:
        return [(a, int(b.value) + (0 if strict else 1))]
    if isinstance(b, Var) and strict:
        return [(a, b)]
    return []
