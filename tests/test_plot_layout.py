"""tilecore.plot_layout writes a PNG whose cells show the layout the lowering chose: each
fragment cell has the colour of the thread that holds it, each shared cell the colour of its
16-byte chunk (read back from the file, compared with the layout tables)."""

import importlib.util

import gemm
import numpy as np
import pytest

import tilecore
from tilecore import visual
from tilecore.errors import TileError


def _kernel(target="toy:w4"):
    return tilecore.compile(gemm.program(M=16, N=16, K=16, block_M=8, block_N=8, block_K=8,
                                         threads=8, num_stages=1), target=target)


def _cell_colors(img, pic):
    rows, cols = pic.color.shape
    h = (img.shape[0] - 1) // rows
    w = (img.shape[1] - 1) // cols
    return np.array([[img[i * h + 1, j * w + 1] for j in range(cols)] for i in range(rows)])


def test_fragment_png_shows_the_owner_of_every_element(tmp_path):
    k = _kernel()
    path = tilecore.plot_layout(k, "C_local", tmp_path / "c.png", use_matplotlib=False)
    img = visual.read_png(path)
    pic = visual.layout_picture(k, "C_local")
    assert pic.color.shape == (8, 8)
    # the owners drawn are the layout table's: every (thread, register) names its cell
    (buf, lay, _), = [e for e in visual._launch_layouts(k) if e[0].name == "C_local"]
    coords, valid = lay.table
    for t in range(lay.threads):
        for r in range(lay.nregs):
            if valid[t, r]:
                i, j = coords[t, r]
                assert pic.top[i][j].rstrip("+") == f"T{t}" or pic.top[i][j].endswith("+")
                assert pic.bottom[i][j] == f"r{r}" or pic.top[i][j].endswith("+")
    np.testing.assert_array_equal(_cell_colors(img, pic), pic.palette[pic.color])
    assert len(np.unique(pic.color)) == lay.threads  # every thread holds part of C


def test_shared_png_shows_the_chunk_of_every_element(tmp_path):
    k = _kernel()
    pic = visual.layout_picture(k, "A_shared")
    img = visual.read_png(tilecore.plot_layout(k, "A_shared", tmp_path / "a.png", use_matplotlib=False))
    np.testing.assert_array_equal(_cell_colors(img, pic), pic.palette[pic.color])
    # toy declares no banks: row-major, so chunk = (row * 8 + col) * 2 bytes // 16 % 8
    want = ((np.arange(8)[:, None] * 8 + np.arange(8)[None, :]) * 2 // 16) % 8
    np.testing.assert_array_equal(pic.color, want)


@pytest.mark.skipif(importlib.util.find_spec("tilecore_cuda") is None, reason="needs cuda-lowering")
def test_swizzled_shared_buffer_permutes_chunks(tmp_path):
    k = tilecore.compile(gemm.program(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32),
                         target="emu:sm_80")
    pic = visual.layout_picture(k, "B_shared")
    assert "Swizzle" in pic.title or "swizzled" in pic.title
    # a 128-byte row of fp16 holds 8 chunks; the swizzle gives each of 8 rows another order
    rows = [tuple(pic.color[i, ::8]) for i in range(8)]
    assert len(set(rows)) == 8 and all(sorted(r) == list(range(8)) for r in rows)
    assert tilecore.plot_layout(k, "C_local", tmp_path / "c.png").stat().st_size > 0


def test_png_round_trip_and_errors(tmp_path):
    rgb = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    visual.write_png(tmp_path / "x.png", rgb)
    np.testing.assert_array_equal(visual.read_png(tmp_path / "x.png"), rgb)
    k = _kernel()
    with pytest.raises(TileError, match="C_local"):
        visual.layout_picture(k, "nope")
    pytest.importorskip("tilecore_interp")
    with pytest.raises(TileError, match="does not lower to threads"):
        visual.layout_picture(_kernel("interp"), "C_local")


def test_ir_html_diffs_every_stage(tmp_path):
    k = _kernel()
    page = visual.ir_html(k, tmp_path / "ir.html")
    assert (tmp_path / "ir.html").read_text() == page
    for name in k.stage_names[1:]:
        assert f"<h2>{name}</h2>" in page
    assert "kernel&nbsp;grid(" in page  # the thread IR of the lowering stages (diff-escaped)
    assert page.count("<table") >= 2  # lower-threads changed the program, and so did others


def test_matplotlib_draws_when_installed(tmp_path):
    pytest.importorskip("matplotlib")
    path = tilecore.plot_layout(_kernel(), "C_local", tmp_path / "m.png", use_matplotlib=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
