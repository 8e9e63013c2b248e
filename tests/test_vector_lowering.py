"""Vector widths, copy layouts, default-layout order, `disable_vectorize` and block-index
bounds of the thread lowering (issue 9, item 6: the row kernels' 16-byte accesses).

Each test checks the generated CUDA (rendered offline, no GPU) and, where the lowering changes
what runs, the result on `emu:sm_80` (which reports out-of-bounds accesses and races) against
NumPy."""

from __future__ import annotations

import importlib
import re

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.lower.layout import default_layout, run_length

pytest.importorskip("tilecore_cuda")
EMU = "emu:sm_80"
ROWS = ["softmax", "rmsnorm", "layernorm"]


def cuda_source(func, out_idx, **kw) -> str:
    return tilecore.compile(func, out_idx=out_idx, target="cuda:sm_90a", **kw).get_kernel_source()


def emu_run(func, out_idx, *args, **kw):
    pytest.importorskip("tilecore_emu")
    return tilecore.jit(func, out_idx=out_idx, target=EMU, **kw)(*args)


def vector_accesses(src: str, buf: str) -> dict:
    """{'load'|'store': {bytes: count}} of the vector accesses of global buffer `buf`."""
    out = {"load": {}, "store": {}}
    width = {"uint4": 16, "uint2": 8, "unsigned int": 4, "uint": 4}
    for t, b in width.items():
        n_ld = len(re.findall(rf"reinterpret_cast<const {t}\*>\(&{buf}\[", src))
        n_st = len(re.findall(rf"^\s*(?:if \(.*\) )?\*reinterpret_cast<{t}\*>\(&{buf}\[", src, re.M))
        if n_ld:
            out["load"][b] = out["load"].get(b, 0) + n_ld
        if n_st:
            out["store"][b] = out["store"].get(b, 0) + n_st
    return out


# --------------------------------------------------------------------------- run lengths


def test_default_runs_are_one_16_byte_access_of_the_narrowest_memory_dtype():
    assert run_length((1, 8192), 256, 2, 16) == 8  # fp16: 8 elements
    assert run_length((1, 8192), 256, 4, 16) == 4  # fp32
    assert run_length((1, 8192), 256, 1, 16) == 16  # int8
    assert run_length((1, 8192), 256, 8, 16) == 2  # fp64: 16 bytes, not 32
    # halved until the runs tile the row and every thread gets whole runs
    assert run_length((1, 24), 4, 2, 16) == 2
    assert run_length((3, 5), 4, 2, 16) == 1
    lay = default_layout((1, 8192), 256, 2, 16)
    assert lay.vec == 8 and lay.nregs == 32


@pytest.mark.parametrize("name", ROWS)
def test_row_kernels_move_16_bytes_per_access(name):
    mod = importlib.import_module(name)
    src = cuda_source(mod.program(M=16384, N=8192), mod.OUT_IDX)
    x, y = vector_accesses(src, "X"), vector_accesses(src, "Y")
    # 32 halves per thread (8192 / 256): four 16-byte loads, four 16-byte stores, nothing narrower
    assert x["load"] == {16: 4}, x
    assert y["store"] == {16: 4}, y
    if name != "softmax":  # the weight (and bias) are read in the output loop, 16 bytes at a time
        assert vector_accesses(src, "W")["load"] == {16: 4}


def widened(M, N, threads):
    """fp16 in, fp32 out: the fragment's runs are sized for fp16 (8), so the fp32 side of each
    run is two 16-byte stores."""

    @T.prim_func
    def k(X: T.Tensor((M, N), "float16"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(M, threads=threads) as bx:
            x = T.alloc_fragment((1, N), "float32")
            for i, j in T.Parallel(1, N):
                x[i, j] = X[bx + i, j]
            for i, j in T.Parallel(1, N):
                Z[bx + i, j] = x[i, j] * 2.0

    return k


def test_fp32_runs_wider_than_16_bytes_split_into_16_byte_accesses():
    M, N, threads = 4, 512, 32
    src = cuda_source(widened(M, N, threads), [-1])
    per_thread = N // threads  # 16 elements: two runs of 8
    assert vector_accesses(src, "X")["load"] == {16: per_thread // 8}
    assert vector_accesses(src, "Z")["store"] == {16: per_thread // 4}
    x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float16)
    np.testing.assert_array_equal(emu_run(widened(M, N, threads), [-1], x), x.astype(np.float32) * 2)


def converting_copy(M, N, rows, threads):
    @T.prim_func
    def k(X: T.Tensor((M, N), "float16"), Z: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, rows), threads=threads) as bx:
            x = T.alloc_fragment((rows, N), "float32")
            T.copy(X[bx * rows, 0], x)
            for i, j in T.Parallel(rows, N):
                x[i, j] = x[i, j] + 1.0
            T.copy(x, Z[bx * rows, 0])

    return k


def test_copy_from_fp16_into_fp32_fragment_moves_8_elements():
    M, N = 8, 256
    src = cuda_source(converting_copy(M, N, 2, 32), [-1])
    # the fp32 registers are not a 16-byte access: 8 halves per load, 8 per store
    assert vector_accesses(src, "X")["load"] == {16: 2}
    assert vector_accesses(src, "Z")["store"] == {16: 2}
    x = np.random.default_rng(1).integers(-8, 8, (M, N)).astype(np.float16)
    np.testing.assert_array_equal(emu_run(converting_copy(M, N, 2, 32), [-1], x), x + np.float16(1))


# --------------------------------------------------------------------------- copies into (1, W)


def one_row_copy(M, N, threads):
    @T.prim_func
    def k(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(M, threads=threads) as bx:
            x = T.alloc_fragment((1, N), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, 0:N], x)
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(1, N):
                x[i, j] = x[i, j] - s[i]
            T.copy(x, Y[bx, 0:N])

    return k


def test_copy_of_one_row_into_a_unit_row_fragment():
    M, N, threads = 4, 256, 32
    src = cuda_source(one_row_copy(M, N, threads), [-1])
    assert vector_accesses(src, "X")["load"] == {16: 1} and vector_accesses(src, "Y")["store"] == {16: 1}
    x = np.random.default_rng(2).integers(-4, 5, (M, N)).astype(np.float16)
    want = (x.astype(np.float32) - x.astype(np.float32).sum(1, keepdims=True)).astype(np.float16)
    np.testing.assert_array_equal(emu_run(one_row_copy(M, N, threads), [-1], x), want)


# --------------------------------------------------------------------------- default order


def row_sum_first(M, N, threads):
    """The first T.Parallel loop touches only the per-row vector the reduction accumulates into."""

    @T.prim_func
    def k(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(M, threads=threads) as bx:
            x = T.alloc_fragment((1, N), "float32")
            s = T.alloc_fragment((1,), "float32")
            for i in T.Parallel(1):
                s[i] = 1.0
            for i, j in T.Parallel(1, N):
                x[i, j] = X[bx + i, j]
            T.reduce_sum(x, s, dim=1, clear=False)
            for i in T.Parallel(1):
                Y[bx + i] = s[i]

    return k


def test_reduction_layout_does_not_depend_on_statement_order():
    M, N, threads = 4, 512, 64
    src = cuda_source(row_sum_first(M, N, threads), [-1])
    assert "__shfl_xor_sync" in src
    assert "_staged" not in src  # the row is not staged through shared memory
    x = np.random.default_rng(3).integers(-4, 5, (M, N)).astype(np.float16)
    np.testing.assert_array_equal(emu_run(row_sum_first(M, N, threads), [-1], x),
                                  x.astype(np.float32).sum(1) + 1)


# --------------------------------------------------------------------------- disable_vectorize


@pytest.mark.parametrize("make, shape", [(lambda: widened(4, 512, 32), (4, 512)),
                                         (lambda: converting_copy(8, 256, 2, 32), (8, 256))])
def test_disable_vectorize_keeps_every_access_one_element(make, shape):
    cfg = {"tir.disable_vectorize": True}
    assert re.search(r"uint[24]|reinterpret_cast<const", cuda_source(make(), [-1]))
    src = cuda_source(make(), [-1], pass_configs=cfg)
    assert not re.search(r"uint[24]|reinterpret_cast<const", src)
    x = np.random.default_rng(4).integers(-8, 8, shape).astype(np.float16)
    np.testing.assert_array_equal(emu_run(make(), [-1], x, pass_configs=cfg), emu_run(make(), [-1], x))


# --------------------------------------------------------------------------- block bounds


def tiled_copy(M, N, rows, threads):
    @T.prim_func
    def k(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, rows), threads=threads) as bx:
            s = T.alloc_shared((rows, N), "float16")
            T.copy(X[bx * rows, 0], s)
            T.copy(s, Y[bx * rows, 0])

    return k


def row_guards(src: str) -> list[str]:
    """The lines of `src` that test the block index (bounds guards of block rows)."""
    return [ln for ln in src.splitlines() if re.search(r"(if \(|\?).*\bbx\b.*<", ln)]


def test_block_index_below_a_constant_grid_drops_provable_predicates():
    src = cuda_source(tiled_copy(64, 256, 4, 64), [-1])
    assert "bx" in src and not row_guards(src)  # every row of every block is inside
    x = np.random.default_rng(5).standard_normal((64, 256)).astype(np.float16)
    np.testing.assert_array_equal(emu_run(tiled_copy(64, 256, 4, 64), [-1], x), x)


def test_ragged_grid_keeps_its_predicates():
    M = 62  # the last block's rows 62, 63 are outside
    src = cuda_source(tiled_copy(M, 256, 4, 64), [-1])
    assert any("62" in ln for ln in row_guards(src))
    x = np.random.default_rng(6).standard_normal((M, 256)).astype(np.float16)
    np.testing.assert_array_equal(emu_run(tiled_copy(M, 256, 4, 64), [-1], x), x)


def padded_row(M, N, width, threads):
    """A row padded to `width` columns, the padding read as 0 through T.if_then_else."""

    @T.prim_func
    def k(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(M, threads=threads) as bx:
            x = T.alloc_fragment((1, width), "float32")
            for i, j in T.Parallel(1, width):
                x[i, j] = T.if_then_else(bx + i < M and j < N, X[bx + i, j], 0.0)
            for i, j in T.Parallel(1, width):
                if bx + i < M and j < N:
                    Y[bx + i, j] = x[i, j] + 1.0

    return k


def test_guards_the_grid_and_layout_decide_do_not_block_vector_access():
    M, N, width, threads = 4, 504, 512, 32  # rows 16-byte aligned: 504 halves
    src = cuda_source(padded_row(M, N, width, threads), [-1])
    # run 0 of every thread (columns < 256) is provably inside; run 1 reaches column 511
    assert vector_accesses(src, "X")["load"] == {16: 1}
    assert vector_accesses(src, "Y")["store"] == {16: 1}
    assert "true ?" not in src
    x = np.random.default_rng(7).integers(-8, 8, (M, N)).astype(np.float16)
    np.testing.assert_array_equal(emu_run(padded_row(M, N, width, threads), [-1], x), x + np.float16(1))
