"""A toy thread-lowering backend that lets the core test its lowering with nothing else installed.

It is a complete backend in the sense of `tilecore.hookspec`, registered at run time by
`tests/conftest.py` (`tilecore.plugins.register(toy_backend.TOY, name="toy")`):

- target kinds `toy:w4` and `toy:w64`: warps of 4 and 64 lanes, so nothing in the lowering can
  lean on NVIDIA's 32;
- `lowers_to_threads=True` facts with no vendor extras (features that read `facts.get(key)` stay
  off), 8-byte vectors on w4 and 16-byte ones on w64;
- tensor cores with deliberately scrambled lane maps: a 4x4x4 mma on w4 (each lane holds four
  elements of every operand) and an 8x8x8 mma on w64 (one element each), fp16/bf16 in, fp32
  accumulate. A natural map (lane = row, element = col) hides index mistakes; a scrambled one
  does not: A and B are permutations no bit-field formula reproduces (the lowering must use a
  lookup table); C is an XOR pattern, linear in the lane's bits with negative coefficients on
  w4 (the lowering derives formulas) and a table again on w64;
- no renderer: `tile_build` returns the core emulator's artifact, which executes the thread IR
  lane by lane from the same lane maps.

Everything here is data: the lane maps are tables built once, so a test can corrupt an entry
(`with_entry`) and watch the results break.
"""

from __future__ import annotations

import contextlib

from tilecore import dtypes as dt
from tilecore import plugins
from tilecore.hookspec import hookimpl
from tilecore.ir.intrinsic import Intrinsic, LaneMap, Operand
from tilecore.lower.tensorize import GemmQuery, MmaPlan, warp_grid
from tilecore.target import Target, TargetFacts, TargetInfo

KIND = "toy"
WARP_SIZES = {"w4": 4, "w64": 64}
VECTOR_BYTES = {"w4": 8, "w64": 16}
MMA_SHAPES = {4: (4, 4, 4), 64: (8, 8, 8)}
_MMA_DTYPES = ("float16", "bfloat16")


def warp_size(target: Target) -> int:
    """The warp size of a toy target (`toy` alone means w4)."""
    return WARP_SIZES[target.arch or "w4"]


def _permuted(rows: int, cols: int, lanes: int, mult: int, add: int) -> LaneMap:
    """A lane map sending cell index p = row * cols + col to slot (mult * p + add) mod n, where a
    slot s is (lane s // elems, element s % elems): a bijection (mult is odd, n a power of 2)
    that scatters neighbouring cells over different lanes."""
    n = rows * cols
    elems = n // lanes
    slot_of = {(mult * p + add) % n: (p // cols, p % cols) for p in range(n)}
    return LaneMap.from_fn(rows, cols, lanes, elems, lambda lane, e: slot_of[lane * elems + e])


def _xor_map(rows: int, cols: int, lanes: int) -> LaneMap:
    """C and D: slot (lane, e) takes natural cell (r, c) (r, c = divmod(lane * elems + e, cols))
    to (r ^ (c % rows), c ^ (cols - 1)), a bijection. On w4 (c = e) it is linear in the lane's
    bits with negative coefficients, so the lowering derives index formulas; on w64 (c depends
    on the lane) no formula fits and the lowering uses a lookup table."""
    elems = rows * cols // lanes

    def fn(lane: int, e: int) -> tuple[int, int]:
        r, c = divmod(lane * elems + e, cols)
        return r ^ (c % rows), c ^ (cols - 1)

    lmap = LaneMap.from_fn(rows, cols, lanes, elems, fn)
    if not lmap.is_bijective():  # the construction must stay a bijection for every shape
        raise AssertionError("toy C map is not a bijection")
    return lmap


def mma_maps(lanes: int) -> dict[str, LaneMap]:
    """The scrambled A, B and C lane maps of the toy mma for warps of `lanes`."""
    m, n, k = MMA_SHAPES[lanes]
    return {"A": _permuted(m, k, lanes, 5, 3), "B": _permuted(k, n, lanes, 11, 7),
            "C": _xor_map(m, n, lanes)}


def toy_mma(lanes: int, in_dtype=dt.float16, maps: dict | None = None) -> Intrinsic:
    """The toy mma for warps of `lanes` as data; `maps` overrides operand lane maps (tests)."""
    use = {**mma_maps(lanes), **(maps or {})}
    m, n, k = MMA_SHAPES[lanes]
    return Intrinsic(
        name=f"toy.mma.m{m}n{n}k{k}.f32.{in_dtype.name}",
        kind="mma",
        shape=(m, n, k),
        operands=(
            Operand("D", "out", dt.float32, "reg", use["C"]),
            Operand("A", "in", in_dtype, "reg", use["A"]),
            Operand("B", "in", in_dtype, "reg", use["B"]),
            Operand("C", "in", dt.float32, "reg", use["C"]),
        ),
        lanes=lanes,
    )


def _only_by_name() -> tuple[bool, str]:
    return False, "a test fixture of the core: name toy:w4 or toy:w64 explicitly"


class ToyBackend:
    """The hook implementations (an object, so a test can register a variant with other maps)."""

    def __init__(self, maps: dict | None = None, tensorize: bool = True):
        self.maps = maps or {}
        self.tensorize = tensorize

    @hookimpl
    def tile_targets(self):
        """`toy` with archs w4 and w64. It runs anywhere (on the emulator) but declares itself
        not runnable, so it never wins `auto` nor joins "every runnable target" (the conformance
        plugin's default): it runs where a test names it."""
        return [TargetInfo(KIND, "toy thread-lowering target (core tests)", priority=-100,
                           archs=tuple(WARP_SIZES), default_arch="w4", available=_only_by_name)]

    @hookimpl
    def tile_target_facts(self, target):
        """Warps of 4 or 64 lanes, up to 1024 threads, 96 KiB shared memory, no vendor extras."""
        if target.kind != KIND:
            return None
        arch = target.arch or "w4"
        return TargetFacts(target=target, lowers_to_threads=True, warp_size=WARP_SIZES[arch],
                           max_threads=1024, shared_memory_bytes=96 * 1024,
                           vector_bytes=VECTOR_BYTES[arch])

    @hookimpl
    def tile_gemm_tensorize(self, target, query: GemmQuery):
        """The scrambled toy mma for fp16/bf16 inputs with an fp32 accumulator, when the block
        tile divides into the instruction's tiles for some warp grid under the gemm's policy."""
        if target.kind != KIND or not self.tensorize:
            return None
        q = query
        if q.a_dtype != q.b_dtype or q.a_dtype.name not in _MMA_DTYPES or q.c_dtype != dt.float32:
            return None
        lanes = warp_size(target)
        m, n, k = MMA_SHAPES[lanes]
        if q.warp_size != lanes or q.threads % lanes or q.k % k:
            return None
        warps = warp_grid(q.policy, q.threads // lanes, q.m, q.n, m, n)
        if warps is None:
            return None
        return MmaPlan(mma=toy_mma(lanes, q.a_dtype, self.maps), warps=warps)

    @hookimpl
    def tile_build(self, target, module):
        """The core emulator's artifact: the lowered thread program run lane by lane."""
        if target.kind != KIND:
            return None
        from tilecore.emulator.machine import EmuArtifact

        return EmuArtifact(module)

    @hookimpl
    def tile_tolerance(self, target, dtype):
        """The mma sums in another order than the oracle: fp16-sized tolerances for narrow floats."""
        if target.kind != KIND:
            return None
        if dtype.is_float and dtype.bits <= 16:
            return (2e-2, 2e-2)
        if dtype.is_float:
            return (1e-4, 1e-4)
        return None


def with_entry(lanes: int, operand: str, lane: int, elem: int, rc: tuple) -> dict:
    """Toy maps with one entry of `operand`'s map replaced (mutation tests)."""
    return {operand: mma_maps(lanes)[operand].with_entry(lane, elem, rc)}


def swapped(lanes: int, operand: str, a: tuple, b: tuple) -> dict:
    """Toy maps with the cells of slots a = (lane, elem) and b exchanged in `operand`'s map:
    still a bijection, so a lowering and an executor that both read the table stay correct."""
    good = mma_maps(lanes)[operand]
    return {operand: good.with_entry(*a, good.at(*b)).with_entry(*b, good.at(*a))}


TOY = ToyBackend()


@contextlib.contextmanager
def installed(variant: ToyBackend):
    """Answer the `toy` target with `variant` instead of the session's toy backend for a while."""
    plugins.unregister("toy")
    plugins.register(variant, name="toy")
    try:
        yield variant
    finally:
        plugins.unregister("toy")
        plugins.register(TOY, name="toy")
