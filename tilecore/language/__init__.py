"""`import tilecore.language as T`: the kernel language, with TileLang's names and meanings."""

from ..dtypes import FLOAT4_UNPACKED as float4_e2m1_unpacked
from ..dtypes import (
    bfloat16,
    bool_,
    float4_e2m1fn,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    float64,
    int4,
    int8,
    int16,
    int32,
    int64,
    uint4,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ..ir.expr import cast
from .allreduce import attr, comm_reducer, evaluate, tvm_thread_allreduce
from .async_ops import cp_async_barrier_noinc, fence_proxy_async, wait_wgmma, wgmma_gemm
from .atomic_ops import atomic_add, atomic_max, atomic_min
from .bitcast import reinterpret
from .buffer_annotations import FragmentBuffer, LocalBuffer, SharedBuffer
from .builder import builtin
from .compat_ops import Cast, Ramp, alloc_global, annotate_safe_value, clamp, dtype, truncdiv, truncmod
from .compat_ops import alloc_buffer as alloc_buffer
from .debug_ops import device_assert, print_format
from .debug_ops import print as print  # noqa: A004 - T.print mirrors TileLang
from .dot_ops import dp4a, index_to_coordinates
from .eager import const, empty
from .global_views import im2col
from .grid_sync import sync_global
from .grid_sync import sync_grid as sync_grid
from .hints import (
    annotate_consumer_reg_alloc,
    annotate_producer_reg_dealloc,
    disable_warp_group_reg_alloc,
    no_set_max_nreg,
)
from .intops import (
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    floordiv,
    floormod,
    shift_left,
    shift_right,
)
from .layout_ops import (
    annotate_layout,
    make_padded_layout,
    make_row_major_layout,
    make_swizzled_layout,
    stream_k,
    use_swizzle,
)
from .layouts import Fragment, Layout
from .ops import (
    Buffer_ as Buffer,
)
from .ops import (
    GemmWarpPolicy,
    Kernel,
    Parallel,
    Pipelined,
    Tensor,
    alloc_fragment,
    alloc_local,
    alloc_shared,
    alloc_var,
    ceil,
    ceildiv,
    clear,
    copy,
    cos,
    cumsum,
    dynamic,
    erf,
    exp,
    exp2,
    fill,
    floor,
    gemm,
    if_then_else,
    infinity,
    log,
    log2,
    max_value,
    min_value,
    region,
    rsqrt,
    serial,
    sigmoid,
    sin,
    sqrt,
    sync_threads,
    tanh,
    trunc,
    unroll,
    vectorized,
)
from .ops import abs as abs  # noqa: A004 - T.abs mirrors TileLang
from .ops import max as max  # noqa: A004
from .ops import min as min  # noqa: A004
from .ops import pow as pow  # noqa: A004
from .ops import round_ as round  # noqa: A004
from .parser import macro, prim_func
from .persistent import Persistent
from .pointers import make_tensor, ptr
from .reduce_ops import (
    reduce,
    reduce_absmax,
    reduce_abssum,
    reduce_bitand,
    reduce_bitor,
    reduce_bitxor,
    reduce_max,
    reduce_min,
    reduce_sum,
)
from .reducers import alloc_reducer, finalize_reducer
from .rng import rng_init, rng_rand
from .sparse_ops import gemm_sp
from .thread_level import (
    access_ptr,
    alloc_barrier,
    barrier_arrive,
    barrier_wait,
    get_block_binding,
    get_thread_binding,
    mbarrier_arrive,
    mbarrier_wait_parity,
    ptx_commit_group,
    ptx_cp_async,
    ptx_wait_group,
    set_max_nreg,
    sync_threads,  # noqa: F811 - real barriers in thread-level kernels
    thread_binding,
    tma_copy,
    tvm_warp_shuffle,
    ws,
)
from .transpose import transpose
from .views import reshape, view

cast = builtin(cast)
symbolic = dynamic
parallel = Parallel  # TIR's lower-case spelling of a parallel loop
Serial = serial  # TIR's capitalized spelling
# TF32 tensor-core inputs: stored as float32 (the strings "tfloat32" / "tf32" too); tilecore's gemm
# computes them in float32, not TF32's 10 mantissa bits, a documented difference (docs/tilelang.md)
tfloat32 = float32
float8_e4m3 = float8_e4m3fn
bool = bool_  # noqa: A001
half = float16
float = float32  # noqa: A001
# TileLang's C-style spellings (its dtypes display them as the sized names)
int = int32  # noqa: A001
uint = uint32
long = int64
short = int16
double = float64

__all__ = [
    "Buffer", "GemmWarpPolicy", "Kernel", "Parallel", "Pipelined", "Tensor", "abs", "alloc_fragment",
    "alloc_local", "alloc_shared", "alloc_var", "annotate_layout", "atomic_add", "atomic_max", "atomic_min",
    "bfloat16", "bool",
    "bool_", "cast", "ceil", "ceildiv", "clear", "copy", "cos", "cumsum", "dynamic", "erf", "exp",
    "exp2", "fill", "float16", "float32", "float64", "float8_e4m3", "float8_e4m3fn", "float8_e5m2",
    "floor", "gemm", "if_then_else", "infinity", "int8", "int16", "int32", "int64", "log", "log2",
    "macro", "make_padded_layout", "make_row_major_layout", "make_swizzled_layout", "max",
    "max_value", "min", "min_value", "pow", "prim_func", "reduce_abssum",
    "reduce_absmax", "reduce_max", "reduce_min", "reduce_sum",
    "reduce", "reduce_bitand", "reduce_bitor", "reduce_bitxor", "transpose", "Ramp",
    "sync_global", "annotate_safe_value", "rng_init", "rng_rand",
    "region", "round", "rsqrt", "serial",
    "sigmoid", "sin", "sqrt", "symbolic", "sync_threads", "tanh", "trunc", "uint8", "uint16", "uint32",
    "uint64",
    "unroll", "use_swizzle", "stream_k", "vectorized", "half", "float",
    "const", "empty", "floordiv", "floormod", "shift_left", "shift_right", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "print", "print_format", "device_assert",
    "Layout", "Fragment",
    "Cast", "clamp", "dtype", "truncdiv", "truncmod", "annotate_consumer_reg_alloc",
    "annotate_producer_reg_dealloc", "disable_warp_group_reg_alloc", "no_set_max_nreg",
    "parallel", "tfloat32", "alloc_global", "Serial",
    "alloc_barrier", "barrier_arrive", "barrier_wait", "get_thread_binding", "mbarrier_arrive",
    "mbarrier_wait_parity", "set_max_nreg", "thread_binding", "tma_copy", "ws",
    "Persistent",
    "reinterpret", "alloc_buffer", "reshape", "view",
    "int", "uint", "long", "short", "double", "im2col", "tvm_warp_shuffle", "int4", "access_ptr",
    "float4_e2m1fn", "float4_e2m1_unpacked", "uint4",
    "ptx_cp_async", "ptx_commit_group", "ptx_wait_group",
    "wgmma_gemm", "wait_wgmma", "fence_proxy_async", "cp_async_barrier_noinc", "gemm_sp",
    "attr", "comm_reducer", "evaluate", "tvm_thread_allreduce", "make_tensor", "ptr",
    "alloc_reducer", "finalize_reducer", "SharedBuffer", "FragmentBuffer", "LocalBuffer",
    "dp4a", "index_to_coordinates", "get_block_binding",
]
