"""`tilecore.transform`: TileLang's `tilelang.transform` names.

- `simplify_prim_func` (decorator) / `apply_simplify(func)`: TileLang simplifies a PrimFunc
  before compiling it when asked; tilecore's compile pipeline always runs its simplification
  (`tilecore.passes.simplify`, on every target), so both return the function as built: the
  compiled kernel is the same with or without them.
- `PassConfigKey`: TileLang's pass-config key names, as a str enum.

Each PassConfigKey member's value is the key string `tilecore.options` reads: honoured keys change the
compile, the others are accepted with a one-time warning saying why they have no effect (see
`tilecore.options.HONOURED` / `NOT_APPLIED`)."""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable


class PassConfigKey(str, enum.Enum):
    """Keys of `pass_configs` (TileLang's member names; values are the key strings)."""

    TL_SIMPLIFY = "tl.Simplify"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_DISABLE_DYNAMIC_TAIL_SPLIT = "tl.disable_dynamic_tail_split"
    TL_DYNAMIC_ALIGNMENT = "tl.dynamic_alignment"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tirx.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_NOALIAS = "tirx.noalias"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"

    def __str__(self) -> str:
        return self.value


def apply_simplify(func, inline_let: bool = False):
    """`func` (a PrimFunc) as given: tilecore's compile simplifies every kernel (see the module
    docstring); `inline_let` is accepted for TileLang's signature (lets are inlined there too)."""
    from .ir.module import PrimFunc

    if not isinstance(func, PrimFunc):
        from .errors import TileTypeError

        raise TileTypeError(f"apply_simplify takes a T.prim_func, got {type(func).__name__}",
                            hint="apply it to the function @T.prim_func returned")
    return func


def simplify_prim_func(func: Callable) -> Callable:
    """Decorator over a function returning a PrimFunc: the PrimFunc, checked to be one (the
    simplification itself happens in every compile)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return apply_simplify(func(*args, **kwargs))

    return wrapper


__all__ = ["PassConfigKey", "apply_simplify", "simplify_prim_func"]
