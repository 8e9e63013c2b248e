"""examples/dequant_gemv_w4a16.py beyond the generic example tests (which run its TEST_SIZES,
float16 with unpack="arith", on every target): the defaults (bfloat16, unpack="bits": `&` and
`>>` on the packed bytes) and several rows of X per block, exactly against the NumPy reference
(make_inputs makes every float32 sum exact, so any summation order gives the same bits), on
interp, the thread-level emulator and cpu; the CUDA spelling of the unpacking."""

import sys
from pathlib import Path

import numpy as np
import pytest

import tilecore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import dequant_gemv_w4a16 as ex  # noqa: E402

# ragged in M (block_M 2 of M 3), K (not a multiple of the tile or the group) and N
CASES = [dict(M=1, N=48, K=512, block_K=256, group_size=128, block_N=16, threads=128),
         dict(M=3, N=40, K=301, block_K=128, group_size=64, block_N=16, threads=128, block_M=2)]


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


def test_cuda_source_unpacks_with_masks_and_shifts():
    src = tilecore.compile(ex.program(M=1, N=4096, K=4096), out_idx=ex.OUT_IDX,
                           target="cuda:sm_90a").get_kernel_source()
    assert "& (15u)" in src and ">> (4u)" in src
    assert "uint4" in src or "cp.async" in src  # 16-byte moves of the packed weights


def test_bad_tiling_is_refused():
    with pytest.raises(ValueError, match="block_K a multiple"):
        ex.program(block_K=192, group_size=128)
    ex.pack(np.zeros((3, 2), np.uint8))  # odd K packs (last high nibble 0)
    q = np.random.default_rng(0).integers(0, 16, (7, 5))
    np.testing.assert_array_equal(ex.unpack(ex.pack(q), 7), q)
