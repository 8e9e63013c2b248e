"""TileLang's `tilelang.carver.template`: its roller's operator templates.

tilecore has no roller (TileLang's model-driven search for tile shapes). `MatmulTemplate`
records its problem so a program that imports or constructs it runs on; asking it for a
function or for hints raises a TileError naming the replacement: list the configs and search
them with `tilecore.autotune` / `tilecore.autotuner.AutoTuner`.
"""

from __future__ import annotations

from ..errors import TileError, caller_loc

_HINT = ("list the tile configs to try (dicts of block sizes, stages, threads) and search them "
         "with @tilecore.autotune(configs=...) or tilecore.autotuner.AutoTuner.from_kernel(...)")


class MatmulTemplate:
    """A GEMM problem for TileLang's roller (M, N, K, dtypes); see the module docstring."""

    def __init__(self, M=None, N=None, K=None, in_dtype="float16", out_dtype="float16",
                 accum_dtype="float16", with_bias=False):
        self.M, self.N, self.K = M, N, K
        self.in_dtype, self.out_dtype, self.accum_dtype = in_dtype, out_dtype, accum_dtype
        self.with_bias = with_bias
        self.arch = None

    def with_arch(self, arch) -> MatmulTemplate:
        """Record the device description (a `tilecore.carver.arch.CUDA`); returns self."""
        self.arch = arch
        return self

    def equivalent_function(self):
        """TileLang's TIR compute definition for the roller: not in tilecore (raises)."""
        raise TileError("tilecore.carver has no roller: MatmulTemplate.equivalent_function() "
                        "is not provided", caller_loc(), hint=_HINT)

    def recommend_hints(self, topk: int = 10):
        """TileLang's roller hints: not in tilecore (raises)."""
        raise TileError("tilecore.carver has no roller: MatmulTemplate.recommend_hints() is not "
                        "provided", caller_loc(), hint=_HINT)


__all__ = ["MatmulTemplate"]
