"""Calls a compiled kernel refuses before running (kind ``call``); every case reuses the
preamble's kernels, so a target compiles each of them once for the whole suite."""

from __future__ import annotations

from . import CHEAP_BUILD, Mistake


def _c(name, error, lines, match=""):
    own = "@T.prim_func" in lines  # a kernel of its own: built only where that is cheap
    return Mistake(name, "call", error, lines.strip("\n") + "\n", match,
                   CHEAP_BUILD if own else None)


MISTAKES = [
    _c("call_wrong_argument_count", "TileCallError",
       "kern = good(target)\nkern(f32(16), f32(16))  # <- here", "takes 1 input"),
    _c("call_no_arguments", "TileCallError", "kern = good(target)\nkern()  # <- here", "takes 1 input"),
    _c("call_wrong_rank", "TileCallError", "kern = good(target)\nkern(f32(4, 4))  # <- here", "rank"),
    _c("call_wrong_static_shape", "TileCallError",
       "kern = inplace(target)\nkern(f32(17))  # <- here", "(17,)"),
    _c("call_wrong_dtype", "TileCallError",
       "kern = good(target)\nkern(np.zeros(16, np.float64))  # <- here", "float64"),
    _c("call_not_an_array", "TileCallError",
       "kern = good(target)\nkern([1.0, 2.0])  # <- here", "list"),
    _c("call_scalar_given_float", "TileCallError",
       "kern = scalar(target)\nkern(np.zeros(16, np.int32), 1.5)  # <- here", "scalar"),
    _c("call_scalar_given_bool", "TileCallError",
       "kern = scalar(target)\nkern(np.zeros(16, np.int32), True)  # <- here", "bool"),
    _c("call_scalar_out_of_range", "TileCallError",
       "kern = scalar(target)\nkern(np.zeros(16, np.int32), 2**40)  # <- here", "does not fit"),
    _c("call_scalar_given_array", "TileCallError",
       "kern = scalar(target)\nkern(np.zeros(16, np.int32), np.zeros(16, np.int32))  # <- here",
       "ndarray"),
    _c("call_unknown_keyword", "TileCallError",
       "kern = good(target)\nkern(X=f32(16))  # <- here", "'X'"),
    _c("call_keyword_twice", "TileCallError",
       "kern = good(target)\nkern(f32(16), A=f32(16))  # <- here", "twice"),
    _c("call_missing_keyword_input", "TileCallError",
       "kern = scalar(target)\nkern(A=np.zeros(16, np.int32))  # <- here", "missing"),
    _c("call_output_passed_by_name", "TileCallError",
       "kern = good(target)\nkern(A=f32(16), B=f32(16))  # <- here", "'B'"),
    _c("call_readonly_array_written", "TileCallError",
       "kern = inplace(target)\na = f32(16)\na.setflags(write=False)\nkern(a)  # <- here", "read-only"),
    _c("call_broadcast_view_written", "TileCallError",
       "kern = inplace(target)\nkern(np.broadcast_to(np.float32(1), (16,)))  # <- here", "broadcast"),
    _c("call_meta_tensor", "TileCallError",
       "import torch\nkern = good(target)\nkern(torch.zeros(16, device='meta'))  # <- here", "meta"),
    _c("call_expanded_tensor_written", "TileCallError",
       "import torch\nkern = inplace(target)\nkern(torch.zeros(1).expand(16))  # <- here", "broadcast"),
    _c("call_size_over_int32", "TileCallError",
       "kern = good(target)\nbig = np.lib.stride_tricks.as_strided(f32(1), (2**31 + 1,), (0,))\n"
       "kern(big)  # <- here", "int64"),
    _c("call_grid_from_negative_size", "TileCallError",
       "m = T.dynamic('m')\n\n\n@T.prim_func\n"
       "def k(A: T.Tensor((m,), 'float32')):\n    with T.Kernel(m - 40, threads=32) as bx:\n"
       "        A[0] = 1.0\n\n\nkern = tilecore.jit(k, target=target)\nkern(f32(8))  # <- here",
       "m - 40 = -32"),
    _c("call_scalar_grid_zero", "TileCallError",
       "@T.prim_func\ndef k(A: T.Tensor((16,), 'float32'), g: T.int32):\n"
       "    with T.Kernel(g, threads=32) as bx:\n        A[0] = 1.0\n\n\n"
       "kern = tilecore.jit(k, target=target)\nkern(f32(16), 0)  # <- here", "g = 0"),
    _c("get_ir_unknown_stage", "TileError", "kern = good(target)\nkern.get_ir('no-such-pass')  # <- here",
       "no-such-pass"),
]
