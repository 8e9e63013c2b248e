"""TileLang's warp-level MMA macro emitters: refused with the replacement (see `tilecore.cuda`)."""

from __future__ import annotations

from ....errors import TileTargetError, caller_loc


class _HandWrittenMma:
    """A TileLang emitter of per-warp ldmatrix / mma code; constructing one raises."""

    def __init__(self, *args, **kwargs):
        raise TileTargetError(
            f"{type(self).__name__} (TileLang's hand-written warp-level MMA emitter) is not "
            "provided: tilecore writes tensor-core code itself", caller_loc(),
            hint="express the tile product with T.gemm(A_shared, B_shared, C_local), which "
                 "lowers to mma / wgmma on CUDA and runs on every target")


class TensorCoreIntrinEmitter(_HandWrittenMma):
    """TileLang's mma.sync emitter (refused: use T.gemm)."""


class TensorCoreIntrinEmitterWithLadderTransform(_HandWrittenMma):
    """TileLang's mma emitter for ladder-transformed (pre-permuted) operands (refused)."""


class INT4TensorCoreIntrinEmitter(_HandWrittenMma):
    """TileLang's int4 mma emitter (refused)."""


class INT4TensorCoreIntrinEmitterWithLadderTransform(_HandWrittenMma):
    """TileLang's int4 ladder-transform mma emitter (refused)."""
