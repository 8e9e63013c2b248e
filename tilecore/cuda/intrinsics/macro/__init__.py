"""TileLang's `tilelang.cuda.intrinsics.macro` emitters (refused when constructed)."""

from .mma_macro_generator import TensorCoreIntrinEmitter, TensorCoreIntrinEmitterWithLadderTransform

__all__ = ["TensorCoreIntrinEmitter", "TensorCoreIntrinEmitterWithLadderTransform"]
