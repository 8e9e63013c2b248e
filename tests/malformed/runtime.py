"""Faults inside a running kernel (kind ``run``): each case lists the targets that check that
fault while running (out-of-bounds accesses everywhere but metal-cpu; races and uninitialized
reads in the oracle and the emulator)."""

from __future__ import annotations

from . import CHECKED_RUN, Mistake

_BOUNDS = CHECKED_RUN + ("cpu",)


# global element accesses outside the tensor are undefined (and reported) only with TileLang's
# safe-memory legalization off; by default they read 0 / are dropped (tests/test_safe_memory.py)
_UNSAFE = {"tl.disable_safe_memory_legalize": True}


def _r(name, error, lines, match, targets=CHECKED_RUN):
    return Mistake(name, "run", error, lines.strip("\n") + "\n", match, targets)


MISTAKES = [
    _r("oob_global_read_at_run_time", "TileRuntimeError",
       "m = T.dynamic('m')\n\n\n@T.prim_func\n"
       "def k(A: T.Tensor((m,), 'float32'), B: T.Tensor((m,), 'float32')):\n"
       "    with T.Kernel(1, threads=32) as bx:\n        for i in T.Parallel(16):\n"
       "            B[i] = A[i]  # <- here\n\n\nkern = tilecore.jit(k, out_idx=[-1], target=target, "
       f"pass_configs={_UNSAFE})\nkern(f32(10))", "out-of-bounds", _BOUNDS),
    _r("oob_global_write_at_run_time", "TileRuntimeError",
       "m = T.dynamic('m')\n\n\n@T.prim_func\n"
       "def k(A: T.Tensor((m,), 'float32'), B: T.Tensor((16,), 'float32')):\n"
       "    with T.Kernel(1, threads=32) as bx:\n        for i in T.Parallel(16):\n"
       "            A[i] = B[i]  # <- here\n\n\nkern = tilecore.jit(k, target=target, "
       f"pass_configs={_UNSAFE})\nkern(f32(10), f32(16))", "out-of-bounds", _BOUNDS),
    _r("oob_transposed_store_at_run_time", "TileRuntimeError",
       "m = T.dynamic('m')\n\n\n@T.prim_func\n"
       "def k(A: T.Tensor((8, 4), 'float32'), B: T.Tensor((4, m), 'float32')):\n"
       "    with T.Kernel(1, threads=32) as bx:\n        for i, j in T.Parallel(8, 4):\n"
       "            B[j, i] = A[i, j]  # <- here\n\n\nkern = tilecore.jit(k, target=target, "
       f"pass_configs={_UNSAFE})\nkern(f32(8, 4), f32(4, 4))", "out-of-bounds"),
    _r("oob_shared_read_run_time_offset", "TileRuntimeError",
       "@T.prim_func\n"
       "def k(A: T.Tensor((32,), 'float32'), off: T.int32, B: T.Tensor((32,), 'float32')):\n"
       "    with T.Kernel(1, threads=32) as bx:\n        s = T.alloc_shared((32,), 'float32')\n"
       "        T.copy(A, s)\n        for i in T.Parallel(32):\n"
       "            B[i] = s[i + off]  # <- here\n\n\nkern = tilecore.jit(k, out_idx=[-1], target=target)\n"
       "kern(f32(32), 4)", "out-of-bounds"),
    _r("integer_division_by_zero", "TileRuntimeError",
       "@T.prim_func\n"
       "def k(A: T.Tensor((16,), 'int32'), d: T.int32, B: T.Tensor((16,), 'int32')):\n"
       "    with T.Kernel(1, threads=16) as bx:\n        for i in T.Parallel(16):\n"
       "            B[i] = A[i] // d  # <- here\n\n\nkern = tilecore.jit(k, out_idx=[-1], target=target)\n"
       "kern(np.ones(16, np.int32), 0)", "division by zero"),
    _r("shift_count_too_large", "TileRuntimeError",
       "@T.prim_func\n"
       "def k(A: T.Tensor((16,), 'int32'), c: T.int32, B: T.Tensor((16,), 'int32')):\n"
       "    with T.Kernel(1, threads=16) as bx:\n        for i in T.Parallel(16):\n"
       "            B[i] = A[i] << c  # <- here\n\n\nkern = tilecore.jit(k, out_idx=[-1], target=target)\n"
       "kern(np.ones(16, np.int32), 40)", "shift count"),
    _r("accumulator_never_cleared", "TileRuntimeError",
       "@T.prim_func\n"
       "def k(A: T.Tensor((16, 16), 'float16'), C: T.Tensor((16, 16), 'float32')):\n"
       "    with T.Kernel(1, threads=128) as bx:\n        a = T.alloc_shared((16, 16), 'float16')\n"
       "        c = T.alloc_fragment((16, 16), 'float32')\n        T.copy(A, a)\n"
       "        T.gemm(a, a, c)  # <- here\n        T.copy(c, C)\n\n\n"
       "kern = tilecore.jit(k, out_idx=[-1], target=target)\nkern(np.ones((16, 16), np.float16))",
       "uninitialized"),
    _r("shared_tile_partly_written", "TileRuntimeError",
       "@T.prim_func\ndef k(A: T.Tensor((16,), 'float32'), B: T.Tensor((16,), 'float32')):\n"
       "    with T.Kernel(1, threads=32) as bx:\n        s = T.alloc_shared((16,), 'float32')\n"
       "        for i in T.Parallel(8):\n            s[i] = A[i]\n        for i in T.Parallel(16):\n"
       "            B[i] = s[i]  # <- here\n\n\nkern = tilecore.jit(k, out_idx=[-1], target=target)\n"
       "kern(f32(16))", "uninitialized"),
    _r("reduce_into_uncleared_without_clear", "TileRuntimeError",
       "@T.prim_func\ndef k(A: T.Tensor((4, 8), 'float32'), B: T.Tensor((4,), 'float32')):\n"
       "    with T.Kernel(1, threads=32) as bx:\n        f = T.alloc_fragment((4, 8), 'float32')\n"
       "        o = T.alloc_fragment((4,), 'float32')\n        T.copy(A, f)\n"
       "        T.reduce_sum(f, o, dim=1, clear=False)  # <- here\n        T.copy(o, B)\n\n\n"
       "kern = tilecore.jit(k, out_idx=[-1], target=target)\nkern(f32(4, 8))", "uninitialized"),
    _r("write_write_race_shared", "TileRuntimeError",
       "@T.prim_func\ndef k(A: T.Tensor((32,), 'float32'), B: T.Tensor((1,), 'float32')):\n"
       "    with T.Kernel(1, threads=32) as bx:\n        s = T.alloc_shared((1,), 'float32')\n"
       "        for i in T.Parallel(32):\n            s[0] = A[i]  # <- here\n        B[0] = s[0]\n\n\n"
       "kern = tilecore.jit(k, out_idx=[-1], target=target)\n"
       "kern(np.arange(32, dtype=np.float32))", "race"),
    _r("write_write_race_halved_index", "TileRuntimeError",
       "@T.prim_func\ndef k(A: T.Tensor((32,), 'float32'), B: T.Tensor((16,), 'float32')):\n"
       "    with T.Kernel(1, threads=32) as bx:\n        s = T.alloc_shared((16,), 'float32')\n"
       "        for i in T.Parallel(32):\n            s[i // 2] = A[i]  # <- here\n"
       "        T.copy(s, B)\n\n\nkern = tilecore.jit(k, out_idx=[-1], target=target)\n"
       "kern(np.arange(32, dtype=np.float32))", "race"),
]
