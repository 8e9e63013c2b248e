"""Mistakes the compiler refuses before code generation (kind ``compile``): the static checks
of `tilecore.ir.static_checks` (run for every target) and bad `tilecore.jit` arguments."""

from __future__ import annotations

from . import Mistake


def _static(name, error, stmt_lines, match="", header='A: T.Tensor((64,), "float32")',
            launch="T.Kernel(1, threads=32)", pre=""):
    """A kernel that parses but must not compile; the marker is on the offending statement."""
    body = "\n".join("        " + ln for ln in stmt_lines.strip("\n").splitlines())
    src = (f"{pre}@T.prim_func\ndef k({header}):\n    with {launch} as bx:\n{body}\n"
           "tilecore.jit(k, target=target)\n")
    return Mistake(name, "compile", error, src, match)


def _launch(name, error, launch, match, header='A: T.Tensor((64,), "float32")', pre="",
            names="bx"):
    src = (f"{pre}@T.prim_func\ndef k({header}):\n    with {launch} as {names}:  # <- here\n"
           "        A[0] = 1.0\ntilecore.jit(k, target=target)\n")
    return Mistake(name, "compile", error, src, match)


def _jit(name, error, call, match):
    """A good kernel given bad jit arguments: the marker is on the jit call."""
    src = ('@T.prim_func\ndef k(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):\n'
           "    with T.Kernel(1, threads=32) as bx:\n        for i in T.Parallel(16):\n"
           f"            B[i] = A[i]\n{call}  # <- here\n")
    return Mistake(name, "compile", error, src, match)


MISTAKES = [
    _launch("grid_zero", "TileShapeError", "T.Kernel(0, threads=32)", "grid dimension"),
    _launch("grid_negative", "TileShapeError", "T.Kernel(-2, threads=32)", "-2"),
    _launch("grid_zero_second_dim", "TileShapeError", "T.Kernel(2, 0, threads=32)", "grid dimension 1",
            names="(bx, by)"),
    _launch("threads_over_portable_limit", "TileShapeError", "T.Kernel(1, threads=2048)", "2048"),
    _launch("threads_2d_over_limit", "TileShapeError", "T.Kernel(1, threads=(64, 32))", "portable"),
    _launch("dynamic_used_by_no_parameter", "TileBindingError", "T.Kernel(m, threads=32)", "m",
            pre='m = T.dynamic("m")\n'),
    Mistake("shared_memory_over_portable_limit", "compile", "TileShapeError",
            '@T.prim_func\ndef k(A: T.Tensor((64,), "float32")):\n'
            "    with T.Kernel(1, threads=32) as bx:  # <- here\n"
            "        s = T.alloc_shared((256, 256), 'float32')\n        T.fill(s, 0.0)\n"
            "        A[0] = s[0, 0]\ntilecore.jit(k, target=target)\n", "shared memory"),
    _static("parallel_zero_extent", "TileShapeError",
            "for i in T.Parallel(0):  # <- here\n    A[i] = 1.0", "not positive"),
    _static("parallel_negative_extent", "TileShapeError",
            "for i in T.Parallel(-4):  # <- here\n    A[i] = 1.0", "not positive"),
    _static("shared_index_past_end", "TileShapeError",
            "s = T.alloc_shared((64,), 'float32')\nT.copy(A, s)\nA[0] = s[64]  # <- here", "64"),
    _static("shared_index_negative", "TileShapeError",
            "s = T.alloc_shared((64,), 'float32')\nT.copy(A, s)\nA[0] = s[-1]  # <- here", "-1"),
    _static("fragment_index_loop_past_end", "TileShapeError",
            "f = T.alloc_fragment((32,), 'float32')\nfor i in T.Parallel(64):\n"
            "    f[i] = A[i]  # <- here\nT.copy(f, A[0])", "63"),
    _static("global_store_past_end", "TileShapeError",
            "for i in T.Parallel(64):\n    A[i + 1] = 1.0  # <- here", "64"),
    _static("global_load_2d_past_row", "TileShapeError",
            "for i, j in T.Parallel(4, 8):\n    B[i, j] = A[i, j + 1]  # <- here", "8",
            header='A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")'),
    _static("transposed_store_past_end", "TileShapeError",
            "for i, j in T.Parallel(8, 4):\n    B[j, i] = A[i, j]  # <- here", "7",
            header='A: T.Tensor((8, 4), "float32"), B: T.Tensor((4, 4), "float32")'),
    _static("serial_loop_index_past_end", "TileShapeError",
            "for i in T.serial(65):\n    A[i] = 1.0  # <- here", "64"),
    _static("block_index_past_end", "TileShapeError",
            "A[bx * 64 + 64] = 1.0  # <- here", "64", launch="T.Kernel(2, threads=32)"),
    _static("let_bound_index_past_end", "TileShapeError",
            "for i in T.Parallel(32):\n    j = i * 2 + 2\n    A[j] = 1.0  # <- here", "64"),
    _static("copy_region_past_shared_tile", "TileShapeError",
            "s = T.alloc_shared((64,), 'float32')\nf = T.alloc_fragment((32,), 'float32')\n"
            "T.copy(A, s)\nT.copy(s[48], f)  # <- here\nT.copy(f, A[0])", "runs past"),
    _static("copy_into_fragment_past_end", "TileShapeError",
            "f = T.alloc_fragment((64,), 'float32')\nT.fill(f, 0.0)\n"
            "T.copy(A[0:32], f[40])  # <- here\nT.copy(f, A)", "runs past"),
    Mistake("dynamic_name_collision", "compile", "TileBindingError",
            'n1 = T.dynamic("n")\nn2 = T.dynamic("n")\n@T.prim_func\n'
            'def k(A: T.Tensor((n1,), "float32"), B: T.Tensor((n2,), "float32")):  # <- here\n'
            "    with T.Kernel(1, threads=32) as bx:\n        B[0] = A[0]\n"
            "tilecore.jit(k, target=target)\n", "share the name"),
    _jit("jit_unknown_keyword", "TileError", "tilecore.jit(k, targt=target)", "targt"),
    _jit("jit_unknown_pass_config", "TileError",
         "tilecore.jit(k, target=target, pass_configs={'tl.no_such_option': True})", "no_such_option"),
    _jit("out_idx_out_of_range", "TileCallError", "tilecore.jit(k, out_idx=[2], target=target)",
         "out of range"),
    _jit("out_idx_duplicate", "TileCallError", "tilecore.jit(k, out_idx=[1, -1], target=target)",
         "twice"),
    _jit("out_idx_bool", "TileCallError", "tilecore.jit(k, out_idx=[True], target=target)", "bool"),
    _jit("unknown_target", "TileTargetError", "tilecore.jit(k, target='tpu')", "tpu"),
    _jit("arch_on_archless_target", "TileTargetError", "tilecore.jit(k, target='interp:sm_75')",
         "no archs"),
    _jit("unknown_arch", "TileTargetError", "tilecore.jit(k, target='metal-cpu:apple1')", "apple1"),
    # issue 16 item 6's own example: an arch on the cpu target (ignored before)
    _jit("arch_on_cpu_target", "TileTargetError", "tilecore.jit(k, target='cpu:sm_75')", "no archs"),
    # an emulator spec no installed lowering has (unlocated before: raised by emu's hook)
    _jit("emu_unknown_lowering_arch", "TileTargetError", "tilecore.jit(k, target='emu:sm_75x')",
         "sm_75x"),
    _jit("compile_unknown_keyword", "TileError", "tilecore.compile(k, targt=target)", "targt"),
    _jit("compile_not_a_kernel", "TileError", "tilecore.compile(lambda: 0, target=target)",
         "prim_func"),
    _jit("jit_not_callable", "TileError", "tilecore.jit(42, target=target)", "int"),
    Mistake("out_idx_names_scalar", "compile", "TileCallError",
            '@T.prim_func\ndef k(A: T.Tensor((16,), "float32"), s: T.int32):\n'
            "    with T.Kernel(1, threads=32) as bx:\n        A[0] = 1.0\n"
            "tilecore.jit(k, out_idx=[1], target=target)  # <- here\n", "scalar"),
    Mistake("factory_returns_non_kernel", "compile", "TileError",
            "@tilecore.jit(target=target)\ndef fac(m):\n    return m\nfac(3)  # <- here\n",
            "prim_func"),
]
