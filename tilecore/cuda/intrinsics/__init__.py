"""TileLang's `tilelang.cuda.intrinsics` names that tilecore has (`tilecore.cuda` says which)."""

from .layout.mma_layout import get_swizzle_layout, make_mma_swizzle_layout
from .macro.mma_macro_generator import (
    TensorCoreIntrinEmitter,
    TensorCoreIntrinEmitterWithLadderTransform,
)

__all__ = ["TensorCoreIntrinEmitter", "TensorCoreIntrinEmitterWithLadderTransform",
           "get_swizzle_layout", "make_mma_swizzle_layout"]
