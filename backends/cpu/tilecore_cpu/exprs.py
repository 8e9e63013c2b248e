"""Scalar expressions to numba-compilable Python source, with the oracle's value semantics.

Each dtype has a *storage* form (what its arrays hold: narrow floats as their bit patterns in
uint16/uint8) and a *compute* form (what expressions hold): float32 for float32 and every narrow
float (a float32 exactly representable in the narrow type), float64, int64 for every integer,
and bool. Integers wrap like C (`semantics`: every operation at its C compute width): add, sub,
mul and neg run in int64, which keeps the low 32 bits exact, and the value is wrapped where
its whole value is seen (`ExprGen.observed`) unless the range analysis proves it fits, and on
store. Division, floor division and the bit operations take observed operands; a zero divisor
or a shift count outside the compute width is a fault (`runtime.cdiv`, `intops`), as on interp.
Narrow-float operations compute in float32 and round once per operation, like `interp`;
float64 (and integer) values round to a narrow float once, through float32 rounded to odd.
"""

from __future__ import annotations

import math

import numpy as np

from tilecore import dtypes as dt
from tilecore import semantics as S
from tilecore.dtypes import DType
from tilecore.ir.expr import BinOp, Cast, Const, Load, Select, Unary, Var

from .emit import Fault, Faults, Names
from .ranges import RING_OPS, Interval, fits, interval, within
from .ranges import observed as observed_range

NARROW_BITS = {"float16": "uint16", "bfloat16": "uint16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}
# Sub-byte integers (tilecore.subbyte) are stored one value per byte: int4 as the int8 of its
# value, uint4 as the uint8 (numba has no ml_dtypes types); a store wraps to the nibble
# (`to_storage`), so a load is the value as it is. The host side converts at the call
# (`CpuArtifact.run`); sub-byte global tensors are inputs only, so nothing converts back.
SUB_BYTE_INT = {"int4": "int8", "uint4": "uint8"}


def storage_np(d: DType) -> np.dtype:
    """The NumPy dtype of `d`'s arrays inside generated code."""
    name = NARROW_BITS.get(d.name) or SUB_BYTE_INT.get(d.name)
    return np.dtype(name) if name else d.np


def storage_ctor(d: DType) -> str:
    """The numba-callable constructor of `d`'s storage scalars (e.g. `np.uint16`)."""
    return "np." + (NARROW_BITS.get(d.name) or SUB_BYTE_INT.get(d.name)
                    or ("bool_" if d.is_bool else d.name))


def _nibble(code: str, d: DType) -> str:
    """An int64 value wrapped to 4-bit integer `d` (C conversion), still an int64."""
    if d.kind == "int":
        return f"(((({code}) + 8) & 15) - 8)"
    return f"(({code}) & 15)"


def to_compute(code: str, d: DType) -> str:
    """A stored element of dtype `d` in compute form."""
    if d.name in NARROW_BITS:
        return f"dec_{d.name}({code})"
    if d.is_int:
        return f"np.int64({code})"
    return code


def _unwrap(code: str, fn: str) -> str | None:
    """The argument of `code` when it is exactly one call `fn(...)`, else None."""
    head = fn + "("
    if not (code.startswith(head) and code.endswith(")")):
        return None
    depth = 0
    for i, ch in enumerate(code[len(head) - 1:], start=len(head) - 1):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return code[len(head):-1] if i == len(code) - 1 else None
    return None


def to_storage(code: str, d: DType) -> str:
    """A compute-form value (already of dtype `d`) as a storage element."""
    if d.name in NARROW_BITS:
        inner = _unwrap(code, f"rnd_{d.name}")  # encoding rounds already: skip the double work
        return f"enc_{d.name}({code if inner is None else inner})"
    if d.name in SUB_BYTE_INT:
        return f"np.{SUB_BYTE_INT[d.name]}({_nibble(code, d)})"
    if d.is_int:
        return f"np.{d.name}({code})"
    if d.name == "float32":
        return f"np.float32({code})"
    return code


def round_to(code: str, d: DType) -> str:
    """Round a float32 compute value to narrow dtype `d` (identity for wide types)."""
    return f"rnd_{d.name}({code})" if d.name in NARROW_BITS else code


def convert(code: str, src: DType, dst: DType) -> str:
    """`T.cast` semantics (the oracle's `cast_value`) from compute form of `src` to that of `dst`."""
    if src == dst:
        return code
    if dst.is_bool:
        return f"({code} != 0)"
    if dst.is_float:
        if src.is_int:
            code = f"np.float64({code})"  # the oracle converts integers through float64
        if dst.name == "float64":
            return f"np.float64({code})"
        if src.is_int or src.name == "float64":
            # one rounding from float64 (semantics.round_to): through float32 rounded to odd
            return round_to(f"odd_f32({code})", dst) if dst.name in NARROW_BITS else f"np.float32({code})"
        return round_to(f"np.float32({code})", dst)
    if src.is_float:
        code = f"f2i({code})"
    elif src.is_bool:
        code = f"np.int64({code})"
    if dst.bits == 64:
        return code
    if dst.name in SUB_BYTE_INT:
        return f"np.int64({_nibble(code, dst)})"
    return f"np.int64(np.{dst.name}({code}))"


def wrap_int(code: str, d: DType) -> str:
    """An int64 compute value wrapped to integer dtype `d`'s C compute width
    (`semantics.int_compute_dtype`: int32 under 32 bits, else `d`), as C's arithmetic wraps."""
    c = S.int_compute_dtype(d)
    return code if c.bits == 64 else f"np.int64(np.{c.name}({code}))"


def unsigned(code: str, counters=()) -> str:
    """An index as uint64: numba then skips its negative-index wraparound, which otherwise blocks
    vectorization. Safe because every access is proven or checked in bounds before it happens.
    Literals stay as they are, and so do `counters`: loop variables of a `range` starting at a
    non-negative constant, which LLVM knows are never negative (it folds the wraparound away),
    while each cast is a call numba types and lowers again (about a sixth of a small kernel's
    compile)."""
    if code.strip("()").isdigit() or code in counters:
        return code
    return f"np.uint64({code})"


def int_arg(code) -> str:
    """An int argument of a runtime helper call, never a literal: numba compiles a dispatcher
    once per argument-type tuple and types an int literal as `Literal[int](value)`, so literal
    sizes, starts or fault codes made one compile per distinct value (in the conformance suite
    dozens of compiles of `load_masked2`, `cdiv`, ...); `np.int64(3)` is typed `int64`."""
    code = str(code)
    bare = code.replace("(", "").replace(")", "").replace(" ", "")
    return f"np.int64({bare})" if bare.lstrip("-").isdigit() else code


def const_code(value, d: DType) -> str:
    """A typed literal in compute form (narrow constants rounded to their dtype first)."""
    if d.is_bool:
        return "True" if value else "False"
    if d.is_int:
        return f"({int(value)})"
    v = float(value)
    if d.name in NARROW_BITS:
        v = float(np.array(v, dtype=np.float32).astype(d.np).astype(np.float32))
    ctor = "np.float64" if d.name == "float64" else "np.float32"
    if math.isnan(v):
        return f"{ctor}(np.nan)"
    if math.isinf(v):
        return f"{ctor}({'-' if v < 0 else ''}np.inf)"
    return f"{ctor}({v!r})"


_FLOAT_BIN = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
# integer divisions through the runtime's checked helpers (runtime.cdiv, intops.cfloordiv, ...)
_DIVISIONS = {"div": "cdiv", "mod": "cmod", "floordiv": "cfloordiv", "floormod": "cfloormod"}
# and, or, xor of observed operands: the result is inside the compute width already
_INT_BIT = {"bitand": "&", "bitor": "|", "bitxor": "^"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_UNARY_NP = {
    "exp": "np.exp", "exp2": "np.exp2", "log": "np.log", "log2": "np.log2", "sqrt": "np.sqrt",
    "tanh": "np.tanh", "floor": "np.floor", "ceil": "np.ceil", "sin": "np.sin", "cos": "np.cos",
    "round": "np.rint", "trunc": "np.trunc",
}


class ExprGen:
    """Emits expressions; `env` holds proven ranges of variables, `loc` the current statement."""

    def __init__(self, names: Names, faults: Faults):
        self.names = names
        self.faults = faults
        self.env: dict[int, Interval] = {}
        # (index expression, bound) pairs known to satisfy `index < bound` here: the conditions
        # of enclosing `if`s, so a masked access `if i < n: A[i]` needs no check of its own
        self.facts: list[tuple] = []
        self.loc = None
        # generated names of loop variables counting up from a constant >= 0 (`unsigned`)
        self.counters: set[str] = set()

    # ----------------------------------------------------------------- bounds
    def dim(self, buf, d: int) -> str:
        """Source for the size of dimension `d` of `buf`."""
        return f"{self.names.of(buf)}.shape[{d}]"

    def in_bounds(self, buf, idx_exprs, idx_codes, extents=None) -> str | None:
        """A condition that the element (or region, with `extents`) lies inside `buf`; None when
        the range analysis proves it always does."""
        conds = []
        for d, (e, c) in enumerate(zip(idx_exprs, idx_codes)):
            n = 1 if extents is None else extents[d]
            r = interval(e, self.env)
            if within(r, n, buf.shape[d]):
                continue
            if n == 1 and r is not None and r[0] >= 0 and self._bounded(e, buf.shape[d]):
                continue
            if n == 1:
                conds.append(f"0 <= {c} < {self.dim(buf, d)}")
            else:
                conds.append(f"0 <= {c} and {c} + {n} <= {self.dim(buf, d)}")
        return " and ".join(f"({x})" for x in conds) if conds else None

    def _bounded(self, e, size) -> bool:
        """True when an enclosing condition proves `e < size`."""
        for fe, bound in self.facts:
            if fe is e or (type(fe) is type(e) and fe == e):
                if bound is size or (isinstance(bound, int) and isinstance(size, int) and bound <= size):
                    return True
        return False

    def fault_call(self, kind: str, buf, idx_codes) -> str:
        """`oob(err, code, i0..i3)`: records a fault site with up to four indices."""
        code = self.faults.add(Fault(kind, buf, self.loc, len(idx_codes)))
        ix = [int_arg(c) for c in idx_codes[:4]] + ["np.int64(-1)"] * (4 - min(4, len(idx_codes)))
        return f"oob(err, {int_arg(code)}, {', '.join(ix)})"

    # ----------------------------------------------------------------- expressions
    def gen(self, e) -> str:
        """Source of `e` in compute form."""
        if isinstance(e, Const):
            return const_code(e.value, e.dtype)
        if isinstance(e, Var):
            return self.names.of(e)
        if isinstance(e, Load):
            return self.load(e)
        if isinstance(e, Cast):
            return convert(self.observed(e.value), e.value.dtype, e.dtype)
        if isinstance(e, BinOp):
            return self.binop(e)
        if isinstance(e, Unary):
            return self.unary(e)
        if isinstance(e, Select):
            return f"({self.gen(e.true_value)} if {self.gen(e.cond)} else {self.gen(e.false_value)})"
        raise TypeError(f"cpu codegen cannot emit {type(e).__name__}")

    def load(self, e: Load) -> str:
        buf = e.buffer
        idx = [self.gen(i) for i in e.indices]
        ref = f"{self.names.of(buf)}[{', '.join(unsigned(c, self.counters) for c in idx)}]"
        ok = self.in_bounds(buf, e.indices, idx)
        if ok is not None:
            ref = f"({ref} if {ok} else {storage_ctor(buf.dtype)}({self.fault_call('read', buf, idx)}))"
        return to_compute(ref, buf.dtype)

    def observed(self, e, code: str | None = None) -> str:
        """Source of `e` where its whole value is seen (a comparison, division, min / max, cast,
        loop bound): an integer wrapped to its C compute width (`wrap_int`) unless the range
        analysis proves it is already inside it. Integer add / sub / mul and negation skip the
        wrap (RING_OPS: int64 arithmetic keeps their low 32 bits exact), and so do indices: an
        index in bounds is below 2**31, where the wrap is the identity, and one out of bounds
        faults either way."""
        code = self.gen(e) if code is None else code
        if not e.dtype.is_int:
            return code
        r = interval(e, self.env)
        return code if r is not None and fits(r, e.dtype) else wrap_int(code, e.dtype)

    def binop(self, e: BinOp) -> str:
        a, b = self.gen(e.a), self.gen(e.b)
        t = e.a.dtype
        if e.op in _CMP:
            if t.is_int:  # comparisons compare values: a constant is compared as it is
                a = a if isinstance(e.a, Const) else self.observed(e.a, a)  # (`x <= -1` on
                b = b if isinstance(e.b, Const) else self.observed(e.b, b)  # uint32 never holds)
            return f"({a} {_CMP[e.op]} {b})"
        if e.op == "and":
            return f"({a} & {b})"
        if e.op == "or":
            return f"({a} | {b})"
        if t.is_int or t.is_bool:
            if e.op not in RING_OPS:  # these see the whole value: wrap it first
                a, b = self.observed(e.a, a), self.observed(e.b, b)
            if e.op in ("min", "max"):
                return f"{e.op}({a}, {b})"
            if e.op in ("floordiv", "floormod") and _positive_const(e.b):
                return f"({a} {'//' if e.op == 'floordiv' else '%'} {b})"  # Python's = floor's
            if e.op in _DIVISIONS:
                code = self.faults.add(Fault("divzero", None, self.loc))
                r = f"{_DIVISIONS[e.op]}({int_arg(a)}, {int_arg(b)}, err, {int_arg(code)})"
            elif e.op in ("shl", "shr"):
                r = self._shift(e, a, b)
            elif e.op in _INT_BIT:
                r = f"({a} {_INT_BIT[e.op]} {b})"
            elif e.op in ("add", "sub", "mul"):
                r = f"({a} {_FLOAT_BIN[e.op]} {b})"
            else:
                r = f"({a} ** {b})"
            return r
        if e.op in _FLOAT_BIN:
            r = f"({a} {_FLOAT_BIN[e.op]} {b})"
        elif e.op in ("min", "max"):
            r = f"f{e.op}({a}, {b})"
        elif e.op == "mod":
            r = f"np.fmod({a}, {b})"
        else:
            r = f"np.power({a}, {b})"
        return round_to(r, t)

    def _shift(self, e: BinOp, a: str, b: str) -> str:
        """`a << b` / `a >> b` on observed operands; a count not proven inside [0, compute
        width) goes through the runtime's checked shift, which reports a fault as interp does."""
        width = S.int_compute_dtype(e.a.dtype).bits
        r = observed_range(interval(e.b, self.env), e.b.dtype)
        if r is not None and 0 <= r[0] and r[1] < width:
            return f"({a} {'<<' if e.op == 'shl' else '>>'} {b})"
        code = self.faults.add(Fault("shift", f"`{e.op}` on {e.a.dtype}", self.loc, width))
        return f"c{e.op}({int_arg(a)}, {int_arg(b)}, np.int64({width}), err, {int_arg(code)})"

    def unary(self, e: Unary) -> str:
        a = self.gen(e.a)
        t = e.dtype
        if e.op == "not":
            return f"(not {a})"
        if e.op == "bitnot":  # on the two's complement bits at the compute width
            a = self.observed(e.a, a)
            c = S.int_compute_dtype(t)
            return f"({a} ^ {dt.max_value(c)})" if c.kind == "uint" else f"(~{a})"
        if e.op == "neg":
            return f"(-{a})"
        if e.op == "abs":
            return f"abs({self.observed(e.a, a)})"
        one = const_code(1.0, t if t.name == "float64" else dt.float32)
        if e.op in ("exp", "exp2", "sigmoid") and t.name != "float64":
            # float32 exp/exp2 as inline arithmetic that vectorizes (runtime.exp_f32), not libm
            if e.op == "sigmoid":
                r = f"({one} / ({one} + exp_f32(-{a})))"
            else:
                r = f"{e.op}_f32({a})"
        elif e.op in _UNARY_NP:
            r = f"{_UNARY_NP[e.op]}({a})"
        elif e.op == "rsqrt":
            r = f"({one} / np.sqrt({a}))"
        elif e.op == "sigmoid":
            r = f"({one} / ({one} + np.exp(-{a})))"
        elif e.op == "erf":
            # the oracle evaluates erf in float64 and rounds to the compute type
            r = f"math.erf(np.float64({a}))"
            if t.name != "float64":
                r = f"np.float32({r})"
        else:
            raise TypeError(f"cpu codegen has no unary {e.op}")
        return round_to(r, t)


def _positive_const(e) -> bool:
    """An integer constant divisor above zero: floor division by it needs no fault check."""
    return isinstance(e, Const) and int(e.value) > 0
