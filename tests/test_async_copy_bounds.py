"""Pipelined copies whose bounds check holds in every block (block indices within the grid,
let-bound heads within their range: tilecore.lower.async_pipeline.kernel_bounds) lose the
check, and with it the zero fill's per-copy pointer select; a check that can fail (a ragged
sequence's last rows) keeps both."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import tilecore

ROOT = Path(__file__).resolve().parent.parent


def _program(**kw):
    spec = importlib.util.spec_from_file_location("fa_bounds", ROOT / "examples" / "flash_attention.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.program(**kw)


def _loop_copies(src: str) -> list[str]:
    """The cp.async lines of the pipelined loop's body."""
    body = src[src.index("for (int k = 0;"):]
    return [line for line in body.splitlines() if re.search(r"cp\.async\.c[ag]\.", line)]


@pytest.mark.parametrize("kv_heads", [4, 2])  # kv_head = by, or by // 2 (grouped queries)
def test_in_range_heads_need_no_zero_fill_select(kv_heads):
    func = _program(batch=1, heads=4, kv_heads=kv_heads, seq_len=256, dim=64, block_M=64,
                    block_N=64, num_stages=2, threads=128)
    src = tilecore.compile(func, target="cuda:sm_80").get_kernel_source()
    copies = _loop_copies(src)
    assert copies and "tc_in" not in src
    # one warp-uniform tile check per copy: skipped past the end, not zero-filled
    assert all(re.match(r"\s*if \(\(\(1 \+ k\) < 4\)\) asm", c) for c in copies), copies[:2]


def test_ragged_rows_keep_the_zero_fill():
    func = _program(batch=1, heads=2, seq_len=200, dim=64, block_M=64, block_N=64, num_stages=2,
                    threads=128)
    src = tilecore.compile(func, target="cuda:sm_80").get_kernel_source()
    assert "tc_in ?" in src  # the last K/V tile's rows past 200 are zero-filled
