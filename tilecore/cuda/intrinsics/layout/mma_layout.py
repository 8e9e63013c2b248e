"""Shared-memory layout helpers of TileLang's `tilelang.cuda.intrinsics.layout.mma_layout`
(see `tilecore.cuda`)."""

from __future__ import annotations

from ....dtypes import as_dtype
from ....errors import TileShapeError, TileTypeError


def make_mma_swizzle_layout(shared_buf, is_smooth: bool = False):
    """A layout request for `shared_buf`: swizzled when its rows are a multiple of 64 bytes and
    not `is_smooth`, row-major otherwise (TileLang's rule for its mma swizzle)."""
    from ....language.layout_ops import make_row_major_layout, make_swizzled_layout

    shape = getattr(shared_buf, "shape", None)
    if not shape:
        raise TileTypeError("make_mma_swizzle_layout takes a shared buffer",
                            hint="pass a buffer from T.alloc_shared")
    row_bits = int(shape[-1]) * as_dtype(shared_buf.dtype).bits
    if is_smooth or row_bits % 512:
        return make_row_major_layout(shared_buf)
    return make_swizzled_layout(shared_buf)


def get_swizzle_layout(row_idx, col_idx, row_size: int, dtype, swizzle_bytes=None):
    """The XOR swizzle of 16-byte chunks: element (row, col) of a row of `row_size` elements
    goes to `(col_tile, row, swizzled_col)`, where the row's chunks are permuted in groups of
    `swizzle_bytes` (default min(128, row bytes)) by `(row % 8) // (8 // chunks_per_group)`."""
    bits = as_dtype(dtype).bits
    row_bytes = bits * row_size // 8
    if row_bytes % 32:
        raise TileShapeError(f"get_swizzle_layout: a row of {row_size} x {bits}-bit elements is "
                             f"{row_bytes} bytes, not a multiple of 32", hint="pad the row")
    group = min(128, row_bytes) if swizzle_bytes is None else int(swizzle_bytes)
    per_chunk = 128 // bits
    chunks = group // 16
    chunk, within = col_idx // per_chunk, col_idx % per_chunk
    phase = (row_idx % 8) // (8 // chunks)
    return chunk // chunks, row_idx, ((chunk % chunks) ^ phase) * per_chunk + within
