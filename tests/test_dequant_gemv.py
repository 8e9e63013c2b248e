"""examples/dequant_gemv_w4a16.py beyond the generic example tests (which run its TEST_SIZES,
float16 with unpack="arith", on every target): the defaults (bfloat16, unpack="bits": `&` on the
packed words) and several rows of X per block, exactly against the NumPy reference
(make_inputs makes every float32 sum exact, so any summation order gives the same bits), on
interp, the thread-level emulator and cpu; the CUDA spelling of the unpacking (nibbles masked
in place in 32-bit words, 16-byte cp.async)."""

import sys
from pathlib import Path

import numpy as np
import pytest

import tilecore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import dequant_gemv_w4a16 as ex  # noqa: E402

# ragged in M (block_M 2 of M 3), K (not a multiple of the tile or the group) and N
CASES = [dict(M=1, N=48, K=512, group_size=128, threads=64, rows=4),
         dict(M=3, N=40, K=301, group_size=64, threads=32, rows=4, block_M=2)]


def _run(target, sizes, **extra):
    kernel = tilecore.compile(ex.program(**sizes, **extra), out_idx=ex.OUT_IDX, target=target)
    args = ex.make_inputs(np.random.default_rng(5), M=sizes["M"], N=sizes["N"], K=sizes["K"],
                          group_size=sizes["group_size"])
    want = ex.reference(*args, K=sizes["K"], group_size=sizes["group_size"])
    np.testing.assert_array_equal(np.asarray(kernel(*args)), want)


# one sm_80 case: its lowering differs from sm_90a's in the copies (cp.async, no TMA) only
@pytest.mark.parametrize("target,case", [("interp", 0), ("interp", 1), ("emu:sm_90a", 0), ("emu:sm_90a", 1),
                                         ("emu:sm_80", 1), ("cpu", 0)])
def test_bfloat16_bit_unpacking_is_exact(target, case):
    _run(target, CASES[case])


def test_arithmetic_unpacking_rows_per_block_on_cpu():
    _run("cpu", CASES[1], unpack="arith")


def test_cuda_source_masks_nibbles_in_place():
    src = tilecore.compile(ex.program(M=1, N=4096, K=4096), out_idx=ex.OUT_IDX,
                           target="cuda:sm_90a").get_kernel_source()
    # each nibble masked where it lies in its word (15 << 0 ... 15 << 28), never shifted
    assert "& (15u)" in src and "& (4026531840u)" in src and ">> (4u)" not in src
    assert "cp.async.cg.shared.global [%0], [%1], 16" in src  # 16-byte moves of the packed weights


def test_bad_tiling_is_refused():
    with pytest.raises(ValueError, match="rows must divide"):
        ex.program(rows=48, group_size=128)
    with pytest.raises(ValueError, match="two threads share"):
        ex.program(threads=33)
    ex.pack(np.zeros((3, 2), np.uint8))  # odd K packs (last high nibble 0)
    q = np.random.default_rng(0).integers(0, 16, (7, 5))
    np.testing.assert_array_equal(ex.unpack(ex.pack(q), 7), q)
    q = np.random.default_rng(1).integers(0, 16, (7, 40))  # through the kernel's strips of words
    tiles = ex.as_tiles(ex.pack(q))
    assert tiles.dtype == np.int32 and tiles.shape == (2, 4, 8)  # 40 columns padded to 64
    np.testing.assert_array_equal(ex.unpack(tiles, 7)[:, :40], q)
    assert not ex.unpack(tiles, 7)[:, 40:].any()
    b = ex.pack(q)  # byte i of word c of strip s is column 32 s + 4 c + i
    assert tiles[1, 2, 1] == int.from_bytes(bytes(b[2, 36:40]), "little", signed=True)
