"""`tilecore.plot_layout(kernel, buffer)`: a PNG picture of where a buffer's elements live.

- a **fragment** (`T.alloc_fragment`): one cell per element, labelled with the thread that
  holds it (`T<tx>`) and the register (`r<r>`), coloured by the thread's lane (hue) and warp
  (brightness); a `+` marks an element held by several threads (replicated layouts);
- a **shared** buffer: one cell per element of the tile, labelled with the 16-byte chunk it
  lands in within its 128-byte line (`c<k>`) and its first bank (`b<n>`), coloured by that
  chunk, so a swizzle shows as permuted colours from row to row.

Layouts exist only for targets that lower to threads (cuda, hip, metal, emu:*); for interp
and cpu it is a TileError. With matplotlib installed (an optional extra) the picture is drawn
by matplotlib; otherwise by the small PNG writer below (zlib, an embedded 3x5 digit font),
so the function always writes a file.
"""

from __future__ import annotations

import colorsys
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import TileError, caller_loc


@dataclass(frozen=True)
class LayoutPicture:
    """What is drawn: per cell two text lines and a colour index, plus the palette (RGB 0-255)."""

    title: str
    top: tuple      # rows of top-line labels
    bottom: tuple   # rows of bottom-line labels
    color: np.ndarray  # (rows, cols) int palette index, -1 for an element nobody holds
    palette: np.ndarray  # (n, 3) uint8


def _launch_layouts(kernel):
    from .ir.stmt import KernelLaunch
    from .ir.visit import walk
    from .lower.infer import FragmentLayouts

    for name, mod in kernel.stages:
        if name == "layout-inference":
            for n in walk(mod.func.body):
                if isinstance(n, KernelLaunch):
                    fl = FragmentLayouts.of(n)
                    if fl is not None:
                        yield from fl.entries
    return


def _shared_buffers(kernel):
    from .ir.thread import ThreadKernel
    from .ir.visit import walk

    for n in walk(kernel.stages[-1][1].func.body):
        if isinstance(n, ThreadKernel):
            yield from n.shared


def _rows_cols(shape) -> tuple[int, int]:
    cols = int(shape[-1])
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    return rows, cols


def _lane_palette(threads: int, warp: int) -> np.ndarray:
    out = []
    for t in range(threads):
        lane, w = t % warp, t // warp
        out.append(colorsys.hsv_to_rgb(lane / warp, 0.45, 1.0 - 0.22 * (w % 3)))
    return (np.array(out) * 255).round().astype(np.uint8)


def fragment_picture(kernel, name: str) -> LayoutPicture | None:
    """The picture of fragment `name`'s (thread, register) map, or None if it has no layout."""
    for buf, lay, origin in _launch_layouts(kernel):
        if buf.name != name:
            continue
        coords, valid = lay.table
        rows, cols = _rows_cols(buf.shape)
        flat = lay.flat_index(coords)
        owner = np.full(rows * cols, -1, np.int64)
        reg = np.full(rows * cols, -1, np.int64)
        count = np.zeros(rows * cols, np.int64)
        for t in range(lay.threads - 1, -1, -1):  # the lowest thread wins a replicated cell
            for r in range(lay.nregs - 1, -1, -1):
                if valid[t, r]:
                    e = flat[t, r]
                    owner[e], reg[e] = t, r
                    count[e] += 1
        top = tuple(tuple(f"T{owner[i * cols + j]}" + ("+" if count[i * cols + j] > 1 else "")
                          if owner[i * cols + j] >= 0 else "" for j in range(cols)) for i in range(rows))
        bottom = tuple(tuple(f"r{reg[i * cols + j]}" if reg[i * cols + j] >= 0 else ""
                             for j in range(cols)) for i in range(rows))
        warp = max(1, int(kernel.desc.warp_size)) if kernel.desc is not None else 32
        title = f"fragment {name} {tuple(buf.shape)} {type(lay).__name__}, {lay.threads} threads ({origin})"
        return LayoutPicture(title, top, bottom, owner.reshape(rows, cols),
                             _lane_palette(lay.threads, warp))
    return None


def shared_picture(kernel, name: str) -> LayoutPicture | None:
    """The picture of shared buffer `name`'s placement (16-byte chunk and bank per element)."""
    for buf in _shared_buffers(kernel):
        lay = getattr(buf, "layout", None)
        if buf.name != name or lay is None:
            continue
        rows, cols = lay.rows, lay.cols
        r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        off = np.asarray(lay.offset_np(r, c), dtype=np.int64)
        size = buf.dtype.itemsize
        byte = off * size
        desc = kernel.desc
        bank_bytes = int(desc.get("shared_bank_bytes", 4) or 4) if desc is not None else 4
        banks = int(desc.get("shared_banks", 32) or 32) if desc is not None else 32
        chunk = (byte // 16) % 8
        bank = (byte // bank_bytes) % banks
        top = tuple(tuple(f"c{int(chunk[i, j])}" for j in range(cols)) for i in range(rows))
        bottom = tuple(tuple(f"b{int(bank[i, j])}" for j in range(cols)) for i in range(rows))
        palette = (np.array([colorsys.hsv_to_rgb(k / 8, 0.45, 0.97) for k in range(8)]) * 255
                   ).round().astype(np.uint8)
        title = f"shared {name} {rows}x{cols} {buf.dtype}: {lay.describe()}"
        return LayoutPicture(title, top, bottom, chunk, palette)
    return None


def layout_picture(kernel, buffer) -> LayoutPicture:
    """The picture of `buffer` (a name, or an object with `.name`) in `kernel`."""
    name = buffer if isinstance(buffer, str) else getattr(buffer, "name", None)
    if not isinstance(name, str):
        raise TileError(f"plot_layout takes a buffer or its name, got {buffer!r}", caller_loc(),
                        hint="pass the T.alloc_* buffer or its name string")
    if "layout-inference" not in kernel.stage_names:
        raise TileError(f"target {kernel.target} does not lower to threads, so {name} has no layout",
                        caller_loc(), hint="compile for a thread target to look at layouts, e.g. "
                                           "target='emu:sm_80' or 'cuda:sm_90a'")
    pic = fragment_picture(kernel, name) or shared_picture(kernel, name)
    if pic is None:
        names = sorted({b.name for b, _, _ in _launch_layouts(kernel)}
                       | {b.name for b in _shared_buffers(kernel) if getattr(b, "layout", None)})
        raise TileError(f"kernel {kernel.func.name} has no fragment or shared buffer {name!r}",
                        caller_loc(), hint=f"buffers with a layout: {', '.join(names) or 'none'}")
    return pic


def plot_layout(kernel, buffer, path=None, *, use_matplotlib: bool | None = None) -> Path:
    """Draw `buffer`'s layout in `kernel` as a PNG at `path` (default `<buffer>_layout.png`);
    returns the path. `use_matplotlib=False` forces the built-in writer."""
    pic = layout_picture(kernel, buffer)
    out = Path(path) if path is not None else Path(f"{getattr(buffer, 'name', buffer)}_layout.png")
    if use_matplotlib is not False:
        try:
            import matplotlib
        except ImportError:
            if use_matplotlib:
                raise
        else:
            matplotlib.use("Agg")
            _draw_matplotlib(pic, out)
            return out
    write_png(out, render(pic))
    return out


def _draw_matplotlib(pic: LayoutPicture, out: Path) -> None:
    import matplotlib.pyplot as plt

    rows, cols = pic.color.shape
    rgb = np.where(pic.color[..., None] >= 0, pic.palette[np.maximum(pic.color, 0)], 255)
    fig, ax = plt.subplots(figsize=(max(4, cols * 0.5), max(3, rows * 0.4 + 0.6)))
    ax.imshow(rgb.astype(np.uint8), interpolation="nearest")
    for i in range(rows):
        for j in range(cols):
            ax.text(j, i, f"{pic.top[i][j]}\n{pic.bottom[i][j]}", ha="center", va="center", fontsize=5)
    ax.set_title(pic.title, fontsize=8)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.tick_params(labelsize=5)
    fig.tight_layout()
    fig.savefig(out, dpi=150)
    plt.close(fig)


# --------------------------------------------------------------------------- the IR, pass by pass


def ir_html(kernel, path=None) -> str:
    """An HTML page of `kernel`'s IR after every pipeline stage, each stage shown as a side by
    side diff against the one before (difflib); written to `path` when given, returned."""
    import difflib
    import html

    from .passes.pipeline import render as render_ir

    texts = [(name, render_ir(mod)) for name, mod in kernel.stages]
    diff = difflib.HtmlDiff(wrapcolumn=100)
    parts = [f"<!doctype html><meta charset='utf-8'><title>{html.escape(kernel.func.name)} IR</title>",
             f"<h1>{html.escape(kernel.func.name)} on {html.escape(str(kernel.target))}</h1>",
             "<h2>input</h2><pre>" + html.escape(texts[0][1]) + "</pre>"]
    for (prev, a), (name, b) in zip(texts, texts[1:]):
        parts.append(f"<h2>{html.escape(name)}</h2>")
        if a == b:
            parts.append("<p>(unchanged)</p>")
        else:
            parts.append(diff.make_table(a.splitlines(), b.splitlines(), prev, name, context=True,
                                         numlines=3))
    page = "\n".join(parts) + "\n"
    if path is not None:
        Path(path).write_text(page, encoding="utf-8")
    return page


# --------------------------------------------------------------------------- the built-in PNG

# 3x5 glyphs, one string of 15 bits (row-major) per character
_FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111",
    "3": "111001111001111", "4": "101101111001001", "5": "111100111001111",
    "6": "111100111101111", "7": "111001001001001", "8": "111101111101111",
    "9": "111101111001111", "T": "111010010010010", "r": "000011100100100",
    "c": "000111100100111", "b": "100100111101111", "+": "000010111010000",
    " ": "000000000000000",
}
GLYPH_W, GLYPH_H = 4, 6  # 3x5 glyph plus one pixel of spacing


def _text_width(s: str) -> int:
    return len(s) * GLYPH_W


def render(pic: LayoutPicture) -> np.ndarray:
    """The picture as an RGB array: a grid of coloured cells with two label lines each."""
    rows, cols = pic.color.shape
    width = max([_text_width(t) for row in pic.top + pic.bottom for t in row] + [8]) + 4
    height = 2 * GLYPH_H + 4
    img = np.full((rows * height + 1, cols * width + 1, 3), 255, np.uint8)
    for i in range(rows):
        for j in range(cols):
            y, x = i * height, j * width
            k = pic.color[i, j]
            img[y:y + height, x:x + width] = pic.palette[k] if k >= 0 else 255
            img[y, x:x + width] = 96  # grid lines
            img[y:y + height, x] = 96
            _text(img, y + 2, x + 2, pic.top[i][j])
            _text(img, y + 2 + GLYPH_H, x + 2, pic.bottom[i][j])
    img[-1, :] = 96
    img[:, -1] = 96
    return img


def _text(img: np.ndarray, y: int, x: int, s: str) -> None:
    for ch in s:
        bits = _FONT.get(ch, _FONT[" "])
        for k, b in enumerate(bits):
            if b == "1":
                img[y + k // 3, x + k % 3] = 0
        x += GLYPH_W


def write_png(path, rgb: np.ndarray) -> None:
    """Write an (h, w, 3) uint8 array as an 8-bit RGB PNG (no filtering, zlib level 6)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
    Path(path).write_bytes(png)


def read_png(path) -> np.ndarray:
    """Read back an 8-bit RGB PNG with unfiltered rows (what `write_png` writes), checking
    every chunk's CRC; for tests and tools."""
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        tag, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        if zlib.crc32(tag + body) != crc:
            raise ValueError(f"bad CRC in chunk {tag!r}")
        if tag == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if (depth, ctype) != (8, 2):
                raise ValueError("only 8-bit RGB PNGs are read")
        elif tag == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    rows = [raw[y * (3 * w + 1):(y + 1) * (3 * w + 1)] for y in range(h)]
    if any(r[0] != 0 for r in rows):
        raise ValueError("filtered rows are not supported")
    return np.frombuffer(b"".join(r[1:] for r in rows), np.uint8).reshape(h, w, 3)
