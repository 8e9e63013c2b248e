"""Integer interval analysis over index expressions: proves accesses in bounds so the generated
code can skip their checks (a checked access in an inner loop blocks vectorization)."""

from __future__ import annotations

from tilecore import dtypes as dt
from tilecore import semantics as S
from tilecore.ir.expr import BinOp, Cast, Const, Load, Unary, Var

Interval = tuple[int, int]  # inclusive [lo, hi]


def interval(e, env: dict[int, Interval]) -> Interval | None:
    """The range of integer expression `e` given ranges of variables (by id), or None if unknown:
    of the value the generated code holds (add / sub / mul unwrapped, see RING_OPS)."""
    if isinstance(e, Const):
        if e.dtype.is_int:
            return int(e.value), int(e.value)
        return None
    if isinstance(e, Var):
        return env.get(id(e))
    if isinstance(e, Load):  # an element holds a value of its dtype (stores wrap to it)
        return (dt.min_value(e.dtype), dt.max_value(e.dtype)) if e.dtype.is_int else None
    if isinstance(e, Cast):
        if not (e.dtype.is_int and e.value.dtype.is_int):
            return None
        r = observed(interval(e.value, env), e.value.dtype)
        if r is None:
            return None
        bits = e.dtype.bits
        lo, hi = (0, 2**bits - 1) if e.dtype.kind == "uint" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        return r if lo <= r[0] and r[1] <= hi else None
    if isinstance(e, BinOp) and e.dtype.is_int:
        a, b = interval(e.a, env), interval(e.b, env)
        if e.op not in RING_OPS:  # the generated code wraps these operands first (observed)
            a, b = observed(a, e.a.dtype), observed(b, e.b.dtype)
        if a is None or b is None:
            return None
        if e.op in ("shl", "shr"):
            return _shift(e.op, a, b, S.int_compute_dtype(e.a.dtype).bits)
        return _binop(e.op, a, b)
    if isinstance(e, Unary) and e.op == "bitnot":
        a = observed(interval(e.a, env), e.a.dtype)
        c = S.int_compute_dtype(e.dtype)
        if c.kind == "uint":  # exprs: `a ^ max`
            return dt.max_value(c) - a[1], dt.max_value(c) - a[0]
        return ~a[1], ~a[0]
    return None


# Integer operations whose low 32 bits int64 arithmetic computes exactly: the cpu code runs
# them unwrapped and wraps the value where something sees all of it (exprs.ExprGen.observed).
RING_OPS = ("add", "sub", "mul")


def compute_range(d) -> Interval:
    """The values of integer dtype `d`'s C compute width (`semantics.int_compute_dtype`)."""
    c = S.int_compute_dtype(d)
    return dt.min_value(c), dt.max_value(c)


def fits(r: Interval, d) -> bool:
    """True when every value of `r` is representable in `d`'s compute width (no wrap)."""
    lo, hi = compute_range(d)
    return lo <= r[0] and r[1] <= hi


def observed(r: Interval | None, d) -> Interval | None:
    """The range of a value of range `r` once wrapped to `d`'s compute width (ints only)."""
    if not d.is_int:
        return r
    return r if r is not None and fits(r, d) else compute_range(d)


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
    if op == "div" and b[0] == b[1] and b[0] > 0:  # C division truncates: monotonic in a
        return S.c_div(a[0], b[0]), S.c_div(a[1], b[0])
    if op == "mod" and b[0] == b[1] and b[0] > 0 and a[0] >= 0:
        return 0, min(a[1], b[0] - 1)
    if op == "floordiv" and b[0] == b[1] and b[0] > 0:  # monotonic in a
        return a[0] // b[0], a[1] // b[0]
    if op == "floormod" and b[0] == b[1] and b[0] > 0:  # the divisor's sign: never negative
        return (a[0], a[1]) if a[0] >= 0 and a[1] < b[0] else (0, b[0] - 1)
    if op == "bitand" and (a[0] >= 0 or b[0] >= 0):  # below every non-negative operand
        return 0, min(x[1] for x in (a, b) if x[0] >= 0)
    if op in ("bitor", "bitxor") and a[0] >= 0 and b[0] >= 0:  # no bit above the wider one's
        return 0, (1 << max(a[1], b[1]).bit_length()) - 1
    return None


def _shift(op: str, a: Interval, s: Interval, width: int) -> Interval | None:
    """`a << s` / `a >> s` for counts proven inside [0, width) (only then does the generated
    code shift unchecked; a checked shift that faults returns 0, which need not lie in here):
    monotonic in each operand, so the corners bound it. Values beyond int64 are unknown (int64
    `<<` wraps there)."""
    if s[0] < 0 or s[1] >= width:
        return None
    corners = [(x << y) if op == "shl" else (x >> y) for x in a for y in s]
    lo, hi = min(corners), max(corners)
    return (lo, hi) if -(2**63) <= lo and hi < 2**63 else None


def loop_range(start, stop, step: int, env) -> Interval | None:
    """The values a loop variable takes in `range(start, stop, step)` (a superset), or None."""
    # the generated loop's bounds are the observed (wrapped) values
    s, e = observed(interval(start, env), start.dtype), observed(interval(stop, env), stop.dtype)
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


def split_guard(loop):
    """For `for i in range(a, b): [lets]; if cond: body` (no else, step 1) whose condition is a
    conjunction of comparisons that are linear in `i` with coefficient +-1, or free of `i`:
    (i-free conjuncts, lower bounds, upper bounds, lets, the IfThenElse) such that the guard holds
    exactly for `max(a, *lows) <= i < min(b, *highs)` when the i-free conjuncts hold. Else None.

    Masked tails (`if idx < n`) then cost nothing per element, and the loop vectorizes.
    """
    from tilecore.ir.expr import BinOp, Const, binop, linear
    from tilecore.ir.stmt import IfThenElse, LetStmt, SeqStmt
    from tilecore.ir.visit import substitute, walk

    if loop.step != 1:
        return None
    stmts = loop.body.stmts if isinstance(loop.body, SeqStmt) else (loop.body,)
    if not stmts or not isinstance(stmts[-1], IfThenElse) or stmts[-1].else_body is not None:
        return None
    lets, guard = stmts[:-1], stmts[-1]
    if not all(isinstance(x, LetStmt) for x in lets):
        return None
    env: dict = {}
    for let in lets:
        env[let.var] = substitute(let.value, env) if env else let.value
    i = loop.var

    def uses_i(e) -> bool:
        return any(n is i for n in walk(e))

    def conjuncts(c):
        if isinstance(c, BinOp) and c.op == "and":
            return conjuncts(c.a) + conjuncts(c.b)
        return [c]

    outer, lows, highs = [], [], []
    for c in conjuncts(guard.cond):
        c = substitute(c, env) if env else c
        if not uses_i(c):
            outer.append(c)
            continue
        if not isinstance(c, BinOp) or c.op not in ("lt", "le", "gt", "ge") or not c.a.dtype.is_int:
            return None
        a, b, op = (c.a, c.b, c.op) if c.op in ("lt", "le") else (c.b, c.a, "lt" if c.op == "gt" else "le")
        side, other, upper = (a, b, True) if uses_i(a) else (b, a, False)
        if uses_i(other):
            return None
        lin = linear(side)
        if lin is None or lin[0].get(i) != 1 or any(uses_i(x) for x in lin[0] if x is not i):
            return None
        rest = substitute(side, {i: Const(0, i.dtype)})  # side == i + rest
        strict = op == "lt"
        if upper:  # i + rest < other  <=>  i < other - rest   (<=: one more)
            bound = binop("sub", other, rest)
            highs.append(bound if strict else binop("add", bound, 1))
        else:  # other < i + rest  <=>  i >= other - rest + 1   (<=: i >= other - rest)
            bound = binop("sub", other, rest)
            lows.append(binop("add", bound, 1) if strict else bound)
    if not lows and not highs:
        return None
    return outer, lows, highs, list(lets), guard
