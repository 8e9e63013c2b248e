"""The wgmma/TMA canonical shared layouts (`Panelled`) against the byte-level PTX definition."""

import numpy as np
import pytest

from tilecore.ir.expr import Var
from tilecore.ir.smem_layout import Panelled, Swizzled, canonical_layout
from tilecore.lower.indexing import evaluate


def ptx_address(row, col, rows, cols, itemsize, span):
    """PTX's canonical swizzled layout, written from the ISA text on bytes: the tile is cut into
    panels of `span` bytes along its contiguous dimension, panels stored one after another;
    inside a panel row r starts at r * span; then address bits [4, 4+b) ^= bits [7, 7+b)
    with b = log2(span / 16)."""
    per = span // itemsize
    pre = (col // per) * rows * span + row * span + (col % per) * itemsize
    b = {128: 3, 64: 2, 32: 1}[span]
    return pre ^ (((pre >> 7) & ((1 << b) - 1)) << 4)


@pytest.mark.parametrize("itemsize", [1, 2, 4])
@pytest.mark.parametrize("span", [32, 64, 128])
@pytest.mark.parametrize("rows,cols_bytes", [(8, 128), (64, 256), (16, 512), (128, 64)])
def test_panelled_matches_ptx_bytes(itemsize, span, rows, cols_bytes):
    cols = cols_bytes // itemsize
    lay = canonical_layout(rows, cols, itemsize, span)
    if cols_bytes % span:
        assert lay is None
        return
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    want = ptx_address(r, c, rows, cols, itemsize, span)
    got = lay.offset_np(r, c) * itemsize
    np.testing.assert_array_equal(got, want)
    # a bijection onto the tile's storage, with no padding
    assert sorted(got.ravel() // itemsize) == list(range(rows * cols)) and lay.size == rows * cols
    # the index expression lowering emits computes the same numbers
    rv, cv = Var("r"), Var("c")
    e = lay.offset(rv, cv)
    vals = evaluate(e, {id(rv): r.ravel(), id(cv): c.ravel()})
    np.testing.assert_array_equal(np.asarray(vals).reshape(rows, cols), got // itemsize)


def test_single_panel_is_the_swizzled_layout():
    lay = canonical_layout(128, 64, 2)
    assert lay.panels == 1 and lay.swizzle_bytes() == 128
    r, c = np.meshgrid(np.arange(128), np.arange(64), indexing="ij")
    np.testing.assert_array_equal(lay.offset_np(r, c), Swizzled(128, 64, 3, 3, 3).offset_np(r, c))


def test_panel_geometry():
    lay = canonical_layout(32, 128, 2)  # a 32 x 128 fp16 B tile: two 128-byte panels
    assert isinstance(lay, Panelled) and lay.panels == 2 and lay.panel == 64
    assert lay.panel_offset(1) == 32 * 64 and lay.panel_bytes() == 4096
    assert lay.stride_bytes() == 1024 and lay.align_bytes() == 1024 and lay.period * 2 == 1024
    assert canonical_layout(128, 32, 2).swizzle_bytes() == 64  # 64-byte rows: 64B swizzle
    assert canonical_layout(12, 64, 2) is None  # rows must come in groups of 8
    with pytest.raises(ValueError):
        Panelled(8, 100, 64, 3, 3, 3)


# ----------------------------------------------------------------------------- wgmma descriptors


def cute_canonical(major, span, itemsize, lbo, sbo, mn, k):
    """PTX's canonical layouts in CuTe form (ISA "Canonical Layouts"), in 16-byte units T:
    K-major ((8,m),(T,2k)):((sT,SBO),(1,T)), MN-major ((T,s,m),(8,k)):((1,T,LBO),(sT,SBO)),
    s = span / 16, then Swizzle<b,4,3> on the byte address. Returns byte addresses (mn, k)."""
    T_ = 16 // itemsize
    s = span // 16
    r = np.arange(mn)[:, None]
    c = np.arange(k)[None, :]
    if major == "K":  # element offsets, then bytes; SBO is given in bytes
        off = ((r % 8) * s * T_ + c % T_ + (c // T_) * T_) * itemsize + (r // 8) * sbo
    else:
        off = ((r % T_) + ((r // T_) % s) * T_ + (c % 8) * s * T_) * itemsize + (r // (T_ * s)) * lbo \
            + (c // 8) * sbo
    b = {128: 3, 64: 2, 32: 1}[span]
    return off ^ (((off >> 7) & ((1 << b) - 1)) << 4)


@pytest.mark.parametrize("itemsize", [1, 2])
@pytest.mark.parametrize("span", [32, 64, 128])
@pytest.mark.parametrize("major", ["K", "MN"])
def test_descriptor_from_layout_reads_the_tile(itemsize, span, major):
    from tilecore.ir.intrinsic import desc_from_layout

    k = 32 // itemsize  # one instruction's K: 16 halves or 32 bytes of fp8
    mn = 128  # n = 128: an MN-major operand spans several panels
    per = span // itemsize
    if major == "K":  # the tile is mn x K_tile (rows = mn), one panel per k range
        rows, cols = mn, 2 * per
    else:  # the tile is k x MN_tile (rows = k), panels along mn
        rows, cols = 2 * k, mn
    lay = canonical_layout(rows, cols, itemsize, span)
    if lay is None:  # an MN span wider than the tile
        assert cols * itemsize % span
        return
    d = desc_from_layout(lay, itemsize, major)
    # the CuTe canonical form with the descriptor's own LBO / SBO gives the same addresses
    np.testing.assert_array_equal(d.addresses(0, mn, k), cute_canonical(major, span, itemsize, d.lbo, d.sbo,
                                                                        mn, k))
    for step in range(2):  # every instruction-sized sub-matrix: start = the layout's offset of it
        r, c = np.meshgrid(np.arange(mn), np.arange(k), indexing="ij")
        if major == "K":
            want = lay.offset_np(r, c + step * k)
            start = lay.offset_np(0, step * k)
        else:
            want = lay.offset_np(c + step * k, r)
            start = lay.offset_np(step * k, 0)
        np.testing.assert_array_equal(d.elements(start, mn, k), want)
