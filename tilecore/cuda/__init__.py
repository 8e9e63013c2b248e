"""`tilecore.cuda`: what tilecore offers under TileLang's `tilelang.cuda` (its CUDA tooling).

tilecore writes its CUDA from tile programs itself, so most of TileLang's CUDA package has no
counterpart. What means something on every target is provided with that meaning:

- `tilecore.cuda.intrinsics.make_mma_swizzle_layout(buf, is_smooth=False)`: a layout request
  for a shared buffer: tilecore's XOR swizzle where the row is a multiple of 64 bytes (as
  TileLang's condition), row-major otherwise or with `is_smooth`. A layout places values and
  never changes them; the swizzle pattern itself is the target's (tilecore.lower.smem).
- `get_swizzle_layout(row, col, row_size, dtype, swizzle_bytes=None)`: the 16-byte-chunk XOR
  swizzle as an index function, `(col_tile, row, swizzled_col)`, for explicit `T.Layout`s.

The warp-level MMA emitters (`intrinsics.macro.mma_macro_generator.TensorCoreIntrinEmitter`
and its variants), which write ldmatrix / mma PTX per warp by hand, raise TileTargetError when
constructed: `T.gemm` is tilecore's tensor-core path (lowered to mma / wgmma on CUDA and run
on every other target). Other names are absent (an ImportError names them).
"""
