"""TileLang's `tilelang.cuda.intrinsics.sparse_layout`: the 2:4 sparsity metadata contract shared
by a compressor and `T.gemm_sp` (tilecore.language.sparse_ops defines it and decodes it).

- `GROUP_CONFIG[dtype] = (kept, group)`: of each group of `group` consecutive K elements,
  `kept` are stored (2 of 4 for 8/16-bit types, 1 of 2 for float32);
- `get_e_factor(a_dtype, meta_dtype)`: dense K elements described by one metadata element
  (4 bits per group);
- `get_e_replicate_factor(a_dtype)`: how many consecutive threads of NVIDIA's `mma.sp` share a
  metadata value (2 for 16/32-bit types, 1 for 8-bit). tilecore does not lower to `mma.sp`, so
  it is only reported for code that sizes buffers with it.
"""

from __future__ import annotations

from ... import dtypes as dt
from ...language.sparse_ops import e_factor, group_config

GROUP_CONFIG = {d: group_config(d) for d in (dt.float32, dt.float16, dt.bfloat16, dt.int8, dt.uint8,
                                             dt.float8_e4m3fn, dt.float8_e5m2)}


def get_e_factor(a_dtype, meta_dtype) -> int:
    """Dense K elements of A that one `meta_dtype` element describes."""
    return e_factor(a_dtype, meta_dtype)


def get_e_replicate_factor(a_dtype) -> int:
    """Consecutive threads sharing one metadata value in `mma.sp` (1 for 8-bit A, else 2)."""
    return 1 if dt.as_dtype(a_dtype).bits <= 8 else 2


__all__ = ["GROUP_CONFIG", "get_e_factor", "get_e_replicate_factor"]
