"""Shared-memory layouts as IR data: where element (row, col) of a shared tile lives.

A shared buffer of the tile program is a 2-D view (`rows` = the product of its leading
dimensions, `cols` = its last dimension) stored in one flat thread-level buffer. Its layout is
one of these frozen dataclasses, each with a single definition of the placement, written twice:
`offset` builds the index expression lowering puts into the thread IR (so the emulator, the
barrier pass and the renderers read explicit offsets and need nothing else), `offset_np`
computes the same numbers with NumPy (tests, the bank-conflict model, future descriptors).

- `RowMajor`: `row * cols + col`.
- `Padded`: rows `cols + pad` elements apart (the padding is never read).
- `Panelled`: the tile cut into column panels of `panel` columns (a panel row is one swizzle
  span: 32, 64 or 128 bytes); panel p is stored whole after panels 0..p-1, each panel a
  `Swizzled` row-major block. This is the canonical layout of wgmma descriptors and TMA boxes
  for tiles whose rows are wider than the swizzle span (see `Panelled`).
- `Swizzled`: the row-major offset with CuTe's `Swizzle<bits, base, shift>` applied: bits
  `[base, base + bits)` of the element offset (which `base`-aligned chunk of a row segment) are
  XORed with bits `[base + shift, base + shift + bits)`. With `2**base` elements = 16 bytes and
  `shift` = log2(chunks in one 128-byte line) this is the XOR of 16-byte chunks within
  32/64/128-byte rows that tensor-memory-accelerator and wgmma descriptors name 32B/64B/128B
  swizzling. No padding; the pattern repeats every `period` elements.
- `IndexMapped` (`tilecore.ir.index_layout`): a user's `T.Layout` index map that no layout
  above equals, read through its own expressions and a tabulated NumPy table.

The IR has bitwise operators (`^ & >>`, which index maps use); the lowering's range-aware
simplifier reasons about divisions and remainders and treats a bit operation as an opaque atom
it can bound (`tilecore.lower.indexing`), never look into. So `Swizzled.offset` keeps the XOR
to one atom whose operands are divisions and remainders: when a row holds a power of two of
chunks and the two XORed fields fall one in the column's chunk and one in the row (every
panel of a canonical 32/64/128-byte layout, and the planner's swizzles of rows of 128 bytes or
more), it is `row * cols + (c ^ f) *
chunk + col % chunk` with `c = col // chunk` and `f` the row's field. The simplifier folds `c`
(a constant in an unrolled fragment store), `f` (one per-thread term) and `col % chunk` (a
chunk-aligned column plus k < chunk gives k, so vector accesses stay provably contiguous), and
each access costs one XOR: FlashAttention's 8 fragment-store chunks of O_shared, written as
sums of per-bit terms, each became a long-lived register sum and spilled at 128 registers.
Other shapes write the XOR bit by bit on the chunk index `c`: chunk bit i becomes
`((c // 2**i) % 2 + (c // 2**(shift + i)) % 2) % 2` (the parity of the sum of two bits is
their XOR), every term a division or remainder by a power of two of a non-negative value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .buffer import Buffer
from .expr import Expr, binop, const

LAYOUT_KINDS = ("row_major", "padded", "swizzled")
# The swizzle spans of the tensor-memory-accelerator / wgmma canonical layouts, widest first.
SWIZZLE_SPANS = (128, 64, 32)
# KernelLaunch annotation keys written by T.annotate_layout / T.use_swizzle (tilecore.language
# .layout_ops) and read by the thread lowering: ((buffer, layout, loc), ...) and
# (panel_size, order, loc).
LAYOUT_ANNOTATION = "smem_layout"
RASTER_ANNOTATION = "rasterize"
# T.stream_k(W, Flags): (W, Flags, loc), the workspace of a stream-K persistent GEMM
# (tilecore.lower.stream_k)
STREAM_K_ANNOTATION = "stream_k"


def _int(x) -> Expr:
    return x if isinstance(x, Expr) else const(int(x))


@dataclass(frozen=True)
class SharedLayout:
    """Base class: a `rows x cols` tile placed in `size` elements of flat shared storage."""

    rows: int
    cols: int

    def __post_init__(self):
        if self.rows < 1 or self.cols < 1:
            raise ValueError(f"a shared layout needs a positive shape, got {self.rows}x{self.cols}")

    @property
    def size(self) -> int:
        """Elements of flat storage the tile occupies (padding included)."""
        return self.rows * self.cols

    @property
    def period(self) -> int:
        """The placement repeats every `period` elements: copies of the layout at bases that are
        multiples of it (pipeline stages) see the same bank pattern; `size` is a multiple of it."""
        return 1

    def offset(self, row: Expr, col: Expr) -> Expr:
        """The flat element offset of (row, col) as an index expression."""
        return _int(row) * self.cols + _int(col)

    def offset_np(self, row, col) -> np.ndarray:
        """`offset` computed with NumPy for integer arrays (the same numbers)."""
        return np.asarray(row, dtype=np.int64) * self.cols + np.asarray(col, dtype=np.int64)

    def contiguous(self, vec: int) -> bool:
        """True when `vec` consecutive elements starting at any column that is a multiple of
        `vec` are contiguous in storage and start at a multiple of `vec` (one vector access)."""
        return self.cols % vec == 0

    def describe(self) -> str:
        """A short text for printed IR."""
        return f"row_major {self.rows}x{self.cols}"


@dataclass(frozen=True)
class RowMajor(SharedLayout):
    """Row-major: element (row, col) at `row * cols + col`."""


@dataclass(frozen=True)
class Padded(SharedLayout):
    """Row-major with `pad` unused elements after every row (rows `cols + pad` apart)."""

    pad: int = 0

    def __post_init__(self):
        super().__post_init__()
        if self.pad < 0:
            raise ValueError(f"padding must be non-negative, got {self.pad}")

    @property
    def stride(self) -> int:
        """Elements between the starts of consecutive rows."""
        return self.cols + self.pad

    @property
    def size(self) -> int:
        return self.rows * self.stride

    def offset(self, row: Expr, col: Expr) -> Expr:
        return _int(row) * self.stride + _int(col)

    def offset_np(self, row, col) -> np.ndarray:
        return np.asarray(row, dtype=np.int64) * self.stride + np.asarray(col, dtype=np.int64)

    def contiguous(self, vec: int) -> bool:
        return self.cols % vec == 0 and self.stride % vec == 0

    def describe(self) -> str:
        return f"padded {self.rows}x{self.cols} +{self.pad}"


@dataclass(frozen=True)
class Swizzled(SharedLayout):
    """Row-major with `Swizzle<bits, base, shift>` on the element offset (see the module doc):
    offset bits [base, base+bits) ^= bits [base+shift, base+shift+bits)."""

    bits: int = 3
    base: int = 3
    shift: int = 3

    def __post_init__(self):
        super().__post_init__()
        if self.bits < 1 or self.base < 0 or self.shift < self.bits:
            raise ValueError(f"Swizzle<{self.bits}, {self.base}, {self.shift}> needs bits >= 1, "
                             f"base >= 0 and shift >= bits (the XORed fields must not overlap)")
        if self.cols % self.chunk:
            raise ValueError(f"a swizzled row of {self.cols} elements is not a whole number of "
                             f"{self.chunk}-element chunks")
        if self.size % self.period:
            raise ValueError(f"a {self.rows}x{self.cols} tile is not a whole number of swizzle "
                             f"periods ({self.period} elements)")

    @property
    def chunk(self) -> int:
        """Elements per swizzled chunk (kept contiguous and in order)."""
        return 1 << self.base

    @property
    def period(self) -> int:
        return 1 << (self.base + self.shift + self.bits)

    def _bit(self, row: Expr, col: Expr, j: int) -> Expr:
        """Bit j of the chunk index `(row * cols + col) // chunk`. When a row holds a power of
        two of chunks, low bits come from the column's chunk and high bits from the row, which
        keeps the expression short and lets the simplifier see through it."""
        cpr = self.cols // self.chunk
        if cpr & (cpr - 1) == 0:
            low = cpr.bit_length() - 1
            if j < low:
                src, k = (binop("div", col, self.chunk) if self.base else col), j
            else:
                src, k = row, j - low
        else:
            lin = row * self.cols + col
            src, k = (binop("div", lin, self.chunk) if self.base else lin), j
        return binop("mod", binop("div", src, 1 << k) if k else src, 2)

    def _row_chunk_fields(self) -> int | None:
        """log2(chunks per row) when the XORed fields split cleanly: a row holds a power of two
        of chunks, the low field [0, bits) of the chunk index lies in the column's chunk and the
        high one [shift, shift + bits) in the row. None otherwise."""
        cpr = self.cols // self.chunk
        if cpr & (cpr - 1):
            return None
        low = cpr.bit_length() - 1
        return low if self.bits <= low <= self.shift else None

    def offset(self, row: Expr, col: Expr) -> Expr:
        row, col = _int(row), _int(col)
        low = self._row_chunk_fields()
        if low is not None:
            # one XOR of the column's chunk with the row's field (the module doc says why)
            c = binop("div", col, self.chunk) if self.base else col
            field = binop("div", row, 1 << (self.shift - low)) if self.shift > low else row
            m = binop("mod", field, 1 << self.bits)
            within = binop("mod", col, self.chunk) if self.base else const(0)
            return row * self.cols + binop("bitxor", c, m) * self.chunk + within
        delta: Expr = const(0)
        for i in range(self.bits):
            z = self._bit(row, col, i)
            xor = binop("mod", z + self._bit(row, col, self.shift + i), 2)
            delta = delta + (xor - z) * (1 << i)
        return row * self.cols + col + delta * self.chunk

    def offset_np(self, row, col) -> np.ndarray:
        lin = np.asarray(row, dtype=np.int64) * self.cols + np.asarray(col, dtype=np.int64)
        mask = (1 << self.bits) - 1
        return lin ^ (((lin >> (self.base + self.shift)) & mask) << self.base)

    def contiguous(self, vec: int) -> bool:
        return self.chunk % vec == 0

    def describe(self) -> str:
        return f"swizzled {self.rows}x{self.cols} Swizzle<{self.bits},{self.base},{self.shift}>"


@dataclass(frozen=True)
class Panelled(SharedLayout):
    """Column panels of `panel` columns, each a `Swizzled(rows, panel, bits, base, shift)` block.

    Element (row, col) lives in panel `p = col // panel`, which occupies elements
    `[p * rows * panel, (p + 1) * rows * panel)`; inside it at the swizzled row-major offset of
    (row, col % panel). With `2**base` elements = 16 bytes, `shift = 3` and a panel row of
    `16 * 2**bits` bytes (32B, 64B or 128B) each panel is, byte for byte, PTX's canonical
    swizzled layout: rows `panel * itemsize` bytes apart, 16-byte chunk c of row r stored at
    chunk `c ^ ((r >> (3 - bits)) % 2**bits)`, i.e. byte-address bits [4, 4 + bits) XOR bits
    [7, 7 + bits) (`Swizzle<bits, 4, 3>` on bytes), repeating every 8 rows (`period`).

    Interface for copies and descriptors (TMA, wgmma): a panel is one `rows x panel` box with
    the swizzle of `swizzle_bytes(itemsize)`, its first element at `panel_offset(p)`; a K-major
    wgmma operand (rows = M or N, cols = K) reads 8-row groups `stride_bytes` apart inside one
    panel; an MN-major one (rows = K, cols = M or N) reads panels `panel_bytes` apart. The
    buffer's base must be aligned to `align_bytes` (the pattern is defined on absolute
    addresses), which the renderers honour and pipeline stages keep (`period`)."""

    panel: int = 64
    bits: int = 3
    base: int = 3
    shift: int = 3

    def __post_init__(self):
        super().__post_init__()
        if self.panel < 1 or self.cols % self.panel:
            raise ValueError(f"{self.cols} columns are not a whole number of {self.panel}-column panels")
        _ = self.inner  # building one panel's layout validates the swizzle

    @property
    def inner(self) -> Swizzled:
        """The layout of one panel."""
        return Swizzled(self.rows, self.panel, self.bits, self.base, self.shift)

    @property
    def panels(self) -> int:
        """Number of column panels."""
        return self.cols // self.panel

    @property
    def period(self) -> int:
        return self.inner.period

    def panel_offset(self, p: int) -> int:
        """Element offset of the first element of panel `p`."""
        return p * self.rows * self.panel

    def itemsize(self) -> int:
        """Bytes per element implied by the 16-byte chunk (`2**base` elements)."""
        return max(1, 16 >> self.base)

    def swizzle_bytes(self, itemsize: int | None = None) -> int:
        """The swizzle span: bytes of one panel row (32, 64 or 128)."""
        return self.panel * (itemsize or self.itemsize())

    def panel_bytes(self, itemsize: int | None = None) -> int:
        """Bytes between the starts of consecutive panels."""
        return self.rows * self.swizzle_bytes(itemsize)

    def stride_bytes(self, itemsize: int | None = None) -> int:
        """Bytes between consecutive 8-row groups inside a panel."""
        return 8 * self.swizzle_bytes(itemsize)

    def align_bytes(self, itemsize: int | None = None) -> int:
        """Alignment the buffer's base address needs: one full swizzle pattern (8 rows)."""
        return self.stride_bytes(itemsize)

    def offset(self, row: Expr, col: Expr) -> Expr:
        row, col = _int(row), _int(col)
        if self.panels == 1:
            return self.inner.offset(row, col)
        p = binop("div", col, self.panel)
        return p * (self.rows * self.panel) + self.inner.offset(row, binop("mod", col, self.panel))

    def offset_np(self, row, col) -> np.ndarray:
        col = np.asarray(col, dtype=np.int64)
        return (col // self.panel) * (self.rows * self.panel) + self.inner.offset_np(row, col % self.panel)

    def contiguous(self, vec: int) -> bool:
        return self.inner.contiguous(vec)

    def describe(self) -> str:
        return (f"panelled {self.rows}x{self.cols} in {self.panels} panel(s) of {self.panel} "
                f"Swizzle<{self.bits},{self.base},{self.shift}>")


def canonical_layout(rows: int, cols: int, itemsize: int, span: int | None = None) -> Panelled | None:
    """The wgmma/TMA canonical layout of a `rows x cols` tile of `itemsize`-byte elements: the
    widest swizzle span (128, 64, 32 bytes, or exactly `span`) that divides a row, as panels of
    one span each. None when no span fits (rows not a multiple of 8, rows under 32 bytes)."""
    if itemsize not in (1, 2, 4) or rows % 8:
        return None
    base = (16 // itemsize).bit_length() - 1
    for s in ((span,) if span else SWIZZLE_SPANS):
        if s not in SWIZZLE_SPANS or (cols * itemsize) % s:
            continue
        bits = {128: 3, 64: 2, 32: 1}[s]
        return Panelled(rows, cols, s // itemsize, bits, base, 3)
    return None


@dataclass(frozen=True, eq=False)
class LayoutRequest:
    """What a kernel asks for with `T.annotate_layout({buf: T.make_swizzled_layout(buf)})`:
    a layout kind for a shared buffer, resolved against the target's facts when lowering
    (`kind` in LAYOUT_KINDS; `pad` in elements for "padded", None = chosen by the target)."""

    kind: str
    buffer: Buffer
    pad: int | None = None

    def __post_init__(self):
        if self.kind not in LAYOUT_KINDS:
            raise ValueError(f"unknown shared layout kind {self.kind!r}")


def tile_view(buf: Buffer) -> tuple[int, int]:
    """(rows, cols) of the 2-D view a layout places: leading dimensions flattened into rows."""
    shape = buf.static_shape
    if shape is None:
        raise ValueError(f"shared buffer {buf.name} has a symbolic shape")
    cols = shape[-1] if shape else 1
    rows = 1
    for s in shape[:-1]:
        rows *= s
    return rows, cols
