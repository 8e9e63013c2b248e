"""Target intrinsics as data: each operand's lane map and the operation, declared once.

A warp-wide instruction such as `mma.sync` or `ldmatrix` spreads the elements of small matrices
over the lanes of a warp. Its declaration here says, for every operand, which matrix element
every (lane, element) pair holds: `LaneMap.table[lane * elems + e] = (row, col)`. The code
generators derive index expressions from that table (`LaneMap.coord`), and the `emu` backend
executes the instruction from the same table, so the two can never disagree.

Operations (`Intrinsic.kind`), vendor-neutral:

- ``"mma"``: operands ``(D, A, B, C)``, `shape` ``(m, n, k)``; D[m, n] = A[m, k] @ B[k, n] + C[m, n]
  with exact products, summed in D's dtype. Register operands are `elems` consecutive elements
  of a register array; code generators pack them into 32-bit registers in element order.
- ``"ldmatrix"``: operands ``(dst, src)``, `shape` ``(count, rows, cols)``: `count` matrices of
  `rows x cols` elements stacked into one ``(count * rows, cols)`` array. `src` is a memory
  operand whose map has one element per lane: lane l supplies the address of stacked row
  ``src.map.table[l][0]`` (its `cols` elements are contiguous in memory). `dst` maps each
  (lane, element) to the stacked (row, col) it receives.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..dtypes import DType
from .expr import Expr, const
from .thread import LaneTable

INTRINSIC_KINDS = ("mma", "ldmatrix")
OPERAND_SPACES = ("reg", "shared")


@dataclass(frozen=True)
class LaneMap:
    """Which (row, col) of a `rows x cols` operand each (lane, element) holds."""

    rows: int
    cols: int
    lanes: int
    elems: int
    table: tuple

    def __post_init__(self):
        if len(self.table) != self.lanes * self.elems:
            raise TypeError(f"lane map has {len(self.table)} entries, expected {self.lanes * self.elems}")
        for rc in self.table:
            if not (isinstance(rc, tuple) and len(rc) == 2 and 0 <= rc[0] < self.rows
                    and 0 <= rc[1] < self.cols):
                raise TypeError(f"lane map entry {rc!r} is outside the {self.rows}x{self.cols} operand")

    @staticmethod
    def from_fn(rows: int, cols: int, lanes: int, elems: int, fn) -> LaneMap:
        """Build the table from `fn(lane, elem) -> (row, col)`."""
        table = tuple((int(r), int(c)) for lane in range(lanes) for e in range(elems)
                      for r, c in [fn(lane, e)])
        return LaneMap(rows, cols, lanes, elems, table)

    def at(self, lane: int, elem: int) -> tuple[int, int]:
        """The (row, col) held by `lane` in element `elem`."""
        return self.table[lane * self.elems + elem]

    def arrays(self):
        """(rows, cols) as NumPy int arrays of shape (lanes, elems)."""
        import numpy as np

        t = np.array(self.table, dtype=np.int64).reshape(self.lanes, self.elems, 2)
        return t[:, :, 0], t[:, :, 1]

    def is_bijective(self) -> bool:
        """True when every element of the operand is held by exactly one (lane, element)."""
        return len(set(self.table)) == len(self.table) == self.rows * self.cols

    def with_entry(self, lane: int, elem: int, rc: tuple[int, int]) -> LaneMap:
        """A copy with one entry replaced (mutation tests corrupt tables with this)."""
        t = list(self.table)
        t[lane * self.elems + elem] = rc
        return replace(self, table=tuple(t))

    def coord(self, lane: Expr, elem: int, axis: int) -> Expr:
        """The row (axis 0) or col (axis 1) held by element `elem` of lane `lane` (0 <= lane < lanes),
        as an index expression: a sum of bit fields of `lane` when the table is linear in the
        lane's bits (all tensor-core maps are), else a `LaneTable` lookup."""
        values = [self.at(lane_i, elem)[axis] for lane_i in range(self.lanes)]
        terms = _bit_linear(values)
        if terms is None:
            return LaneTable(tuple(values), lane)
        base, fields = terms
        out: Expr = const(base)
        nbits = (self.lanes - 1).bit_length()
        for lo, width, coef in fields:
            f = lane if lo == 0 else lane // (1 << lo)
            if lo + width < nbits:
                f = f % (1 << width)
            out = out + f * coef
        return out


def _bit_linear(values: list[int]):
    """(base, [(lo_bit, width, coef)]) with values[l] = base + sum coef * bits(l)[lo:lo+width], or None.

    Consecutive bits whose coefficients double are merged into one field, so lane maps read as
    `lane // 4` and `lane % 4 * 2` rather than single bits."""
    n = len(values)
    if n & (n - 1):
        return None
    nbits = (n - 1).bit_length()
    base = values[0]
    coefs = [values[1 << b] - base for b in range(nbits)]
    for lane in range(n):
        v = base + sum(c for b, c in enumerate(coefs) if lane >> b & 1)
        if v != values[lane]:
            return None
    fields: list[tuple[int, int, int]] = []
    b = 0
    while b < nbits:
        if coefs[b] == 0:
            b += 1
            continue
        lo, width = b, 1
        while lo + width < nbits and coefs[lo + width] == coefs[lo] << width:
            width += 1
        fields.append((lo, width, coefs[lo]))
        b = lo + width
    return base, fields


@dataclass(frozen=True)
class Operand:
    """One operand of an intrinsic: its role ('in'/'out'), dtype, storage and lane map."""

    name: str
    role: str
    dtype: DType
    space: str
    map: LaneMap

    def __post_init__(self):
        if self.role not in ("in", "out"):
            raise TypeError(f"operand role must be 'in' or 'out', got {self.role}")
        if self.space not in OPERAND_SPACES:
            raise TypeError(f"operand space must be one of {OPERAND_SPACES}, got {self.space}")

    @property
    def elems(self) -> int:
        """Elements each lane holds (registers operands) or addresses (memory operands)."""
        return self.map.elems


@dataclass(frozen=True)
class Intrinsic:
    """A warp-wide instruction: `name` is the mnemonic a code generator prints; `kind` and `shape`
    give its operation (see the module docstring); `operands` are in call order."""

    name: str
    kind: str
    shape: tuple
    operands: tuple
    lanes: int = 32

    IR_LEAF = True  # a constant table: IR traversals do not descend into it

    def __post_init__(self):
        if self.kind not in INTRINSIC_KINDS:
            raise TypeError(f"unknown intrinsic kind {self.kind}")
        for op in self.operands:
            if op.map.lanes != self.lanes:
                raise TypeError(f"operand {op.name} of {self.name} maps {op.map.lanes} lanes, "
                                f"not {self.lanes}")
        if self.kind == "mma":
            m, n, k = self.shape
            want = {"D": (m, n), "A": (m, k), "B": (k, n), "C": (m, n)}
            names = tuple(o.name for o in self.operands)
            if names != ("D", "A", "B", "C"):
                raise TypeError(f"mma operands must be (D, A, B, C), got {names}")
            for o in self.operands:
                if (o.map.rows, o.map.cols) != want[o.name]:
                    raise TypeError(f"mma operand {o.name} is {o.map.rows}x{o.map.cols}, "
                                    f"expected {want[o.name]}")
        else:
            count, rows, cols = self.shape
            dst, src = self.operands
            if src.map.elems != 1 or src.space != "shared" or dst.space != "reg":
                raise TypeError("ldmatrix takes (dst registers, src shared addresses with one per lane)")
            for o in (dst, src):
                if o.map.rows != count * rows or o.map.cols != cols:
                    raise TypeError(f"ldmatrix operand {o.name} must map the stacked "
                                    f"{count * rows}x{cols} array")

    def operand(self, name: str) -> Operand:
        """The operand called `name`."""
        for o in self.operands:
            if o.name == name:
                return o
        raise KeyError(name)

    def with_operand(self, name: str, **changes) -> Intrinsic:
        """A copy with one operand's fields replaced (used by mutation tests)."""
        ops = tuple(replace(o, **changes) if o.name == name else o for o in self.operands)
        return replace(self, operands=ops)

