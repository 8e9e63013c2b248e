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

import numpy as np

from ..dtypes import DType
from .expr import Expr, const
from .thread import LaneTable

INTRINSIC_KINDS = ("mma", "ldmatrix", "wgmma")
OPERAND_SPACES = ("reg", "shared", "desc")
DESC_MAJORS = ("K", "MN")
DESC_SWIZZLES = (32, 64, 128)


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

    def _axis_terms(self, elem: int, axis: int) -> tuple[tuple[int, ...], tuple | None]:
        """(the values of `elem`'s `axis` over the lanes, their bit fields or None), computed once
        per map: lowering asks for them for every register of every fragment."""
        memo = self.__dict__.get("_terms_memo")
        if memo is None:
            memo = {}
            object.__setattr__(self, "_terms_memo", memo)
        got = memo.get((elem, axis))
        if got is None:
            values = tuple(self.at(lane_i, elem)[axis] for lane_i in range(self.lanes))
            got = memo[(elem, axis)] = (values, bit_linear(list(values)))
        return got

    def coord(self, lane: Expr, elem: int, axis: int) -> Expr:
        """The row (axis 0) or col (axis 1) held by element `elem` of lane `lane` (0 <= lane < lanes),
        as an index expression: a sum of bit fields of `lane` when the table is linear in the
        lane's bits (all tensor-core maps are), else a `LaneTable` lookup."""
        values, terms = self._axis_terms(elem, axis)
        return lane_expr(values, lane, terms)


def lane_expr(values, lane: Expr, terms=False) -> Expr:
    """`values[lane]` (one int per lane, 0 <= lane < len(values)) as an index expression: a sum of
    bit fields of `lane` when the values are linear in its bits (`bit_linear`; pass `terms`
    when already computed), else a `LaneTable` lookup."""
    values = tuple(int(v) for v in values)
    if terms is False:
        terms = bit_linear(list(values))
    if terms is None:
        return LaneTable(values, lane)
    base, fields = terms
    out: Expr = const(base)
    nbits = (len(values) - 1).bit_length()
    for lo, width, coef in fields:
        f = lane if lo == 0 else lane // (1 << lo)
        if lo + width < nbits:
            f = f % (1 << width)
        out = out + f * coef
    return out


def bit_linear(values: list[int]):
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
class MatrixDesc:
    """Where a shared-memory matrix operand's elements are, relative to its start address: the
    canonical swizzled layouts of PTX's wgmma matrix descriptors, as data.

    The operand is an `mn x k` matrix (A: M x K, B: N x K in (mn, k) coordinates). `major` "K":
    rows (mn) of `swizzle` bytes, 8-row groups `sbo` bytes apart, k contiguous within a row
    (CuTe ((8,m),(T,2k)):((sT,SBO),(1,T))). "MN": `swizzle` bytes contiguous along mn, such
    blocks `lbo` bytes apart, k rows `swizzle` bytes apart in groups of 8 `sbo` bytes apart
    (((T,s,m),(8,k)):((1,T,LBO),(sT,SBO))). Then, on the absolute byte address, bits [4, 4+b)
    ^= bits [7, 7+b), b = log2(swizzle / 16); the buffer is aligned to the 8-row pattern, so
    the matrix base offset field is 0. `itemsize` is the element size in bytes."""

    major: str
    swizzle: int
    lbo: int
    sbo: int
    itemsize: int

    def __post_init__(self):
        if self.major not in DESC_MAJORS or self.swizzle not in DESC_SWIZZLES:
            raise TypeError(f"unsupported matrix descriptor {self.major}-major {self.swizzle}B")
        if self.lbo % 16 or self.sbo % 16 or self.lbo <= 0 or self.sbo <= 0:
            raise TypeError("descriptor byte offsets are positive multiples of 16")

    @property
    def bits(self) -> int:
        """Swizzle bits b (the XOR moves b bits of the 16-byte chunk index)."""
        return {32: 1, 64: 2, 128: 3}[self.swizzle]

    def addresses(self, start: int | np.ndarray, mn: int, k: int) -> np.ndarray:
        """Byte addresses (..., mn, k) of every element of an `mn x k` operand whose descriptor
        start address is `start` (bytes; an array of starts broadcasts in front)."""
        r = np.arange(mn, dtype=np.int64)[:, None]
        c = np.arange(k, dtype=np.int64)[None, :]
        b, s = self.itemsize, self.swizzle
        if self.major == "K":
            rel = (r % 8) * s + (r // 8) * self.sbo + c * b
        else:
            per = s // b
            rel = (r % per) * b + (r // per) * self.lbo + (c % 8) * s + (c // 8) * self.sbo
        pre = np.asarray(start, dtype=np.int64)[..., None, None] + rel
        return pre ^ (((pre >> 7) & ((1 << self.bits) - 1)) << 4)

    def elements(self, start_elem, mn: int, k: int) -> np.ndarray:
        """Flat element offsets (..., mn, k) for a start given as an element offset."""
        addr = self.addresses(np.asarray(start_elem, dtype=np.int64) * self.itemsize, mn, k)
        return addr // self.itemsize


def desc_from_layout(layout, itemsize: int, major: str) -> MatrixDesc:
    """The descriptor fields reading a `Panelled` shared layout (tilecore.ir.smem_layout): a
    K-major operand has its mn along the layout's rows (one panel per k range, 8-row groups
    `stride_bytes` apart); an MN-major one has k along the rows and mn along the panels
    (`panel_bytes` apart). Raises TypeError for any other layout."""
    from .smem_layout import Panelled

    if not isinstance(layout, Panelled):
        raise TypeError(f"a wgmma descriptor reads a panelled (canonical) layout, not {layout.describe()}")
    span = layout.swizzle_bytes(itemsize)
    if major == "K":
        return MatrixDesc("K", span, 16, layout.stride_bytes(itemsize), itemsize)
    lbo = layout.panel_bytes(itemsize) if layout.panels > 1 else 16
    return MatrixDesc("MN", span, lbo, layout.stride_bytes(itemsize), itemsize)


@dataclass(frozen=True)
class Operand:
    """One operand of an intrinsic: its role ('in'/'out'), dtype, storage and lane map.

    Descriptor operands (space "desc") have no lane map (`map` None) but a `shape` (rows,
    cols) of the logical matrix and, once the shared layout is known, a `desc`; the lowering
    fills it in (`Intrinsic.with_descs`)."""

    name: str
    role: str
    dtype: DType
    space: str
    map: LaneMap | None
    desc: MatrixDesc | None = None
    shape: tuple = ()

    def __post_init__(self):
        if self.role not in ("in", "out"):
            raise TypeError(f"operand role must be 'in' or 'out', got {self.role}")
        if self.space not in OPERAND_SPACES:
            raise TypeError(f"operand space must be one of {OPERAND_SPACES}, got {self.space}")
        if (self.map is None) != (self.space == "desc"):
            raise TypeError("descriptor operands have no lane map; every other operand has one")
        if self.space == "desc" and len(self.shape) != 2:
            raise TypeError("a descriptor operand needs its matrix shape (rows, cols)")

    @property
    def elems(self) -> int:
        """Elements each lane holds (registers operands) or addresses (memory operands); a
        descriptor operand is one 64-bit value."""
        return 1 if self.map is None else self.map.elems

    @property
    def dims(self) -> tuple[int, int]:
        """(rows, cols) of the operand's logical matrix."""
        return tuple(self.shape) if self.map is None else (self.map.rows, self.map.cols)


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
            if op.map is not None and op.map.lanes != self.lanes:
                raise TypeError(f"operand {op.name} of {self.name} maps {op.map.lanes} lanes, "
                                f"not {self.lanes}")
            if op.space == "desc" and self.kind != "wgmma":
                raise TypeError("only wgmma reads operands through matrix descriptors")
        if self.kind in ("mma", "wgmma"):
            m, n, k = self.shape
            want = {"D": (m, n), "A": (m, k), "B": (k, n), "C": (m, n)}
            names = tuple(o.name for o in self.operands)
            if names != ("D", "A", "B", "C"):
                raise TypeError(f"mma operands must be (D, A, B, C), got {names}")
            for o in self.operands:
                got = o.dims
                if got != want[o.name]:
                    raise TypeError(f"mma operand {o.name} is {got[0]}x{got[1]}, "
                                    f"expected {want[o.name]}")
            if self.kind == "wgmma" and (self.operand("B").space != "desc"
                                         or self.operand("D").space != "reg"):
                raise TypeError("wgmma reads B through a descriptor and accumulates in registers")
        else:
            count, rows, cols = self.shape
            dst, src = self.operands
            if src.map.elems != 1 or src.space != "shared" or dst.space != "reg":
                raise TypeError("ldmatrix takes (dst registers, src shared addresses with one per lane)")
            for o in (dst, src):
                if o.map.rows != count * rows or o.map.cols != cols:
                    raise TypeError(f"ldmatrix operand {o.name} must map the stacked "
                                    f"{count * rows}x{cols} array")

    @property
    def queue(self) -> str | None:
        """The per-thread asynchronous queue the instruction is issued into (None: synchronous)."""
        return "wgmma" if self.kind == "wgmma" else None

    def with_descs(self, **descs: MatrixDesc) -> Intrinsic:
        """A copy whose descriptor operands (by name) read through the given descriptors."""
        ops = tuple(replace(o, desc=descs[o.name]) if o.name in descs else o for o in self.operands)
        return replace(self, operands=ops)

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

