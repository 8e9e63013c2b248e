"""T.rng_init / T.rng_rand (issue 14 item 10): cuRAND's Philox4x32-10 stream per thread. A
NumPy model of `curand_init(seed, seq, off)` + `curand()` is checked against Random123's
known-answer vectors for Philox4x32-10, then kernels on interp, the emulator and cpu must give
its numbers bit for bit (several offsets, so the position inside a block of four and the
counter's increment are exercised); misuse is a located error."""

from __future__ import annotations

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T
from tilecore.errors import TileSyntaxError, TileTypeError

pytestmark = pytest.mark.usefixtures("isolated_cache")

MASK = 0xFFFFFFFF


def philox(ctr, key):
    """Philox4x32-10 (Random123) on Python ints."""
    c, k = list(ctr), list(key)
    for r in range(10):
        if r:
            k = [(k[0] + 0x9E3779B9) & MASK, (k[1] + 0xBB67AE85) & MASK]
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & MASK, (p0 >> 32) ^ c[3] ^ k[1], p0 & MASK]
    return c


# Random123's kat_vectors for philox4x32_10: (counter, key) -> output
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK,) * 4, (MASK, MASK), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def test_the_model_is_philox4x32_10():
    for ctr, key, want in KAT:
        assert philox(ctr, key) == list(want)


def curand_stream(seed: int, seq: int, off: int, n: int) -> list[int]:
    """cuRAND: curand_init(seed, seq, off) then n calls of curand()."""
    ctr = [(off >> 2) & MASK, (off >> 34) & MASK, seq & MASK, (seq >> 32) & MASK]
    key, pos, out = [seed & MASK, (seed >> 32) & MASK], off & 3, []
    for _ in range(n):
        out.append(philox(ctr, key)[pos])
        pos += 1
        if pos == 4:
            pos = 0
            for i in range(4):
                ctr[i] = (ctr[i] + 1) & MASK
                if ctr[i]:
                    break
    return out


THREADS, DRAWS, SEED, OFF = 64, 6, 0x1234_5678_9ABC_DEF0, 3


def _kernel():
    @T.prim_func
    def k(Out: T.Tensor((2, THREADS, DRAWS), "uint32"), Mine: T.Tensor((THREADS, 2), "uint32")):
        with T.Kernel(2, threads=THREADS) as bx:
            tx = T.get_thread_binding()
            T.rng_init(SEED, off=OFF)  # seq: tx + bx * THREADS (TileLang's default)
            for d in T.serial(DRAWS):
                Out[bx, tx, d] = T.rng_rand()
            if bx == 0:
                T.rng_init(tx + 7, 5, tx)  # an explicit sequence and a per-thread offset
                Mine[tx, 0] = T.rng_rand()
                Mine[tx, 1] = T.rng_rand()

    return k


@pytest.mark.parametrize("target", target_params("interp", "emu:sm_90a", "emu:sm_80", "metal-cpu"))
def test_rng_matches_curand(target):
    out, mine = np.zeros((2, THREADS, DRAWS), np.uint32), np.zeros((THREADS, 2), np.uint32)
    tilecore.compile(_kernel(), target=target)(out, mine)
    want = np.array([[curand_stream(SEED, tx + bx * THREADS, OFF, DRAWS) for tx in range(THREADS)]
                     for bx in range(2)], dtype=np.uint32)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(mine, [curand_stream(tx + 7, 5, tx, 2) for tx in range(THREADS)])


def test_rng_misuse_is_located():
    with pytest.raises(TileSyntaxError, match="T.rng_rand\\(\\) before T.rng_init") as e:
        @T.prim_func
        def early(Out: T.Tensor((32,), "uint32")):
            with T.Kernel(1, threads=32) as bx:
                tx = T.get_thread_binding()
                Out[tx] = T.rng_rand()
    assert "test_rng.py" in str(e.value)
    with pytest.raises(TileTypeError, match="generator='curandStateXORWOW_t'\\) is not provided"):
        @T.prim_func
        def other(Out: T.Tensor((32,), "uint32")):
            with T.Kernel(1, threads=32) as bx:
                T.rng_init(1, generator="curandStateXORWOW_t")
    with pytest.raises(TileSyntaxError, match="T.rng_init cannot be used inside T.Parallel"):
        @T.prim_func
        def tile(Out: T.Tensor((32,), "uint32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(32):
                    T.rng_init(i)
