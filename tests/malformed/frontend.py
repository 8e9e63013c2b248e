"""Mistakes the frontend refuses while parsing the kernel (kind ``parse``)."""

from __future__ import annotations

from . import Mistake


def _k(name, error, stmt_lines, match="", header='A: T.Tensor((16,), "float32")', pre=""):
    """A parse mistake whose kernel body (inside `with T.Kernel`) is `stmt_lines`."""
    body = "\n".join("        " + ln for ln in stmt_lines.strip("\n").splitlines())
    src = (f"{pre}@T.prim_func\ndef k({header}):\n    with T.Kernel(1, threads=32) as bx:\n"
           f"{body}\n")
    return Mistake(name, "parse", error, src, match)


def _whole(name, error, src, match=""):
    return Mistake(name, "parse", error, src, match)


MISTAKES = [
    _k("while_loop", "TileSyntaxError", "while True:  # <- here\n    A[0] = 1.0", "while"),
    _k("break_in_parallel", "TileSyntaxError", "for i in T.Parallel(4):\n    break  # <- here",
       "break"),
    _k("continue", "TileSyntaxError", "for i in T.serial(4):\n    continue  # <- here", "continue"),
    _k("return_in_kernel", "TileSyntaxError", "return 1  # <- here", "return"),
    _k("try_block", "TileSyntaxError", "try:  # <- here\n    A[0] = 1.0\nexcept ValueError:\n    pass",
       "try"),
    _k("raise", "TileSyntaxError", "raise ValueError('x')  # <- here", "raise"),
    _k("assert_on_kernel_value", "TileSyntaxError", "assert A[0] > 0  # <- here", "assert"),
    _k("nested_def", "TileSyntaxError", "def f(x):  # <- here\n    return x", "nested"),
    _k("lambda", "TileSyntaxError", "f = lambda x: x  # <- here", "lambda"),
    _k("import", "TileSyntaxError", "import math  # <- here", "import"),
    _k("global_stmt", "TileSyntaxError", "global G  # <- here", "global"),
    _k("del_stmt", "TileSyntaxError", "x = 1\ndel x  # <- here", "del"),
    _k("matmul_operator", "TileSyntaxError", "A[0] = A[0] @ A[1]  # <- here", "MatMult"),
    _k("unknown_T_name", "TileNameError", "s = T.alloc_shraed((16,), 'float32')  # <- here",
       "alloc_shraed"),
    _k("undefined_name", "TileNameError", "A[0] = undefined_thing  # <- here", "undefined_thing"),
    _k("python_call", "TileSyntaxError", "A[0] = print(1)  # <- here", "print"),
    _k("tile_op_in_parallel", "TileSyntaxError",
       "s = T.alloc_shared((16,), 'float32')\nfor i in T.Parallel(16):\n    T.copy(A, s)  # <- here"),
    _k("immutable_reassigned_in_loop", "TileBindingError",
       "acc = A[0] * 2.0\nfor i in T.serial(16):\n    acc = acc + A[i]  # <- here\nA[0] = acc",
       "alloc_var"),
    _k("literal_accumulator", "TileBindingError",
       "s = 0.0\nfor i in T.serial(16):\n    s = s + A[i]  # <- here\nA[0] = s", "alloc_var"),
    _k("literal_accumulator_augassign", "TileBindingError",
       "s = 0.0\nfor i in T.serial(16):\n    s += A[i]  # <- here\nA[0] = s", "alloc_var"),
    _k("literal_set_in_branch", "TileBindingError",
       "x = 0.0\nif A[0] > 0.0:\n    x = A[1]  # <- here\nA[2] = x", "alloc_var"),
    _k("int_literal_counter_in_loop", "TileBindingError",
       "c = 0\nfor i in T.serial(16):\n    c = c + 1  # <- here\nA[0] = c", "alloc_var"),
    # a loop reusing an enclosing index's name is legal (TileLang scoping); its index is
    # gone after the loop
    _k("inner_loop_index_after_loop", "TileNameError",
       "for i in T.serial(4):\n    for j in T.serial(4):\n        A[j] = 1.0\n    A[j] = 2.0  # <- here",
       "'j'"),
    # integers compute in int64 at most: a larger constant was a different number per target
    # (emu crashed with OverflowError on `x < 2**64 - 1`)
    _k("constant_beyond_int64", "TileTypeError",
       "if A[0] < 18446744073709551615:  # <- here\n    A[1] = 1", "does not fit int64",
       header='A: T.Tensor((16,), "int32")'),
    _k("loop_bound_float", "TileTypeError",
       "for i in T.serial(A[0]):  # <- here\n    A[i] = 1.0", "integers"),
    _whole("kernel_binding_count", "TileBindingError",
           '@T.prim_func\ndef k(A: T.Tensor((16,), "float32")):\n'
           "    with T.Kernel(2, 2, threads=32) as (bx, by, bz):  # <- here\n        A[0] = 1.0\n",
           "grid dimension"),
    _whole("no_kernel", "TileSyntaxError",
           '@T.prim_func\ndef k(A: T.Tensor((16,), "float32")):  # <- here\n    x = 1\n', "T.Kernel"),
    _whole("kernel_inside_loop", "TileSyntaxError",
           '@T.prim_func\ndef k(A: T.Tensor((16,), "float32")):\n    for i in range(2):\n'
           "        with T.Kernel(1, threads=32) as bx:  # <- here\n            A[0] = 1.0\n", "top"),
    _k("with_not_kernel", "TileSyntaxError", "with open('x') as f:  # <- here\n    pass"),
    _k("copy_extent_mismatch", "TileShapeError",
       "s = T.alloc_shared((16,), 'float32')\nf = T.alloc_fragment((8,), 'float32')\nT.copy(A, s)\n"
       "T.copy(s, f)  # <- here", "extents"),
    _k("gemm_k_mismatch", "TileShapeError",
       "a = T.alloc_shared((16, 32), 'float16')\nb = T.alloc_shared((16, 16), 'float16')\n"
       "c = T.alloc_fragment((16, 16), 'float32')\nT.gemm(a, b, c)  # <- here", "K mismatch"),
    _k("gemm_dtype_mismatch", "TileTypeError",
       "a = T.alloc_shared((16, 16), 'float16')\nb = T.alloc_shared((16, 16), 'bfloat16')\n"
       "c = T.alloc_fragment((16, 16), 'float32')\nT.gemm(a, b, c)  # <- here"),
    _k("gemm_accumulator_dtype", "TileTypeError",
       "a = T.alloc_shared((16, 16), 'int8')\nb = T.alloc_shared((16, 16), 'int8')\n"
       "c = T.alloc_fragment((16, 16), 'float16')\nT.gemm(a, b, c)  # <- here"),
    _k("gemm_transpose_shape", "TileShapeError",
       "a = T.alloc_shared((16, 32), 'float16')\nb = T.alloc_shared((16, 32), 'float16')\n"
       "c = T.alloc_fragment((16, 16), 'float32')\nT.gemm(a, b, c, transpose_B=False)  # <- here"),
    _k("non_constant_tile_shape", "TileShapeError",
       "s = T.alloc_shared((m,), 'float32')  # <- here", "compile-time constant",
       header='A: T.Tensor((m,), "float32")', pre='m = T.dynamic("m")\n'),
    _k("unknown_dtype_alloc", "TileNameError", "s = T.alloc_shared((16,), 'float17')  # <- here",
       "float17"),
    _k("negative_alloc_shape", "TileShapeError", "s = T.alloc_fragment((-4,), 'float32')  # <- here"),
    _k("zero_alloc_shape", "TileShapeError", "s = T.alloc_shared((0, 16), 'float32')  # <- here"),
    _k("unknown_dtype_alloc_var", "TileNameError", "v = T.alloc_var('int33')  # <- here", "int33"),
    _k("unknown_dtype_cast", "TileNameError", "A[0] = T.cast(A[1], 'float17')  # <- here", "float17"),
    _whole("missing_annotation", "TileTypeError",
           "@T.prim_func\ndef k(A):  # <- here\n    with T.Kernel(1, threads=32) as bx:\n"
           "        A[0] = 1.0\n", "annotated"),
    _whole("annotation_not_tensor", "TileTypeError",
           "@T.prim_func\ndef k(A: list):  # <- here\n    with T.Kernel(1, threads=32) as bx:\n"
           "        A[0] = 1.0\n", "T.Tensor"),
    _whole("float_scalar_param", "TileTypeError",
           "@T.prim_func\ndef k(A: T.Tensor((16,), 'float32'), x: T.float32):  # <- here\n"
           "    with T.Kernel(1, threads=32) as bx:\n        A[0] = 1.0\n", "scalar"),
    _whole("unknown_dtype_annotation", "TileNameError",
           "@T.prim_func\ndef k(A: T.Tensor((16,), 'float17')):  # <- here\n"
           "    with T.Kernel(1, threads=32) as bx:\n        A[0] = 1.0\n", "float17"),
    _whole("float_dimension", "TileShapeError",
           "@T.prim_func\ndef k(A: T.Tensor((16.0,), 'float32')):  # <- here\n"
           "    with T.Kernel(1, threads=32) as bx:\n        A[0] = 1.0\n", "16.0"),
    _whole("negative_dimension", "TileShapeError",
           "@T.prim_func\ndef k(A: T.Tensor((-16,), 'float32')):  # <- here\n"
           "    with T.Kernel(1, threads=32) as bx:\n        A[0] = 1.0\n", "-16"),
    _whole("varargs_kernel", "TileSyntaxError",
           "@T.prim_func\ndef k(*args):  # <- here\n    with T.Kernel(1, threads=32) as bx:\n"
           "        pass\n", "positional"),
    _k("num_stages_negative", "TileShapeError",
       "for i in T.Pipelined(4, num_stages=-2):  # <- here\n    A[i] = 1.0", "num_stages"),
    _k("parallel_dynamic_extent", "TileShapeError",
       "for i in T.Parallel(m):  # <- here\n    A[i] = 1.0", "compile-time",
       header='A: T.Tensor((m,), "float32")', pre='m = T.dynamic("m")\n'),
    _k("loop_step_zero", "TileShapeError", "for i in T.serial(0, 4, 0):  # <- here\n    A[i] = 1.0",
       "step"),
    _k("index_rank_mismatch", "TileShapeError", "A[0, 0] = 1.0  # <- here", "dimension"),
    _k("float_index", "TileTypeError", "A[1.5] = 1.0  # <- here", "integer"),
    _k("float_expr_index", "TileTypeError", "A[A[0]] = 1.0  # <- here", "float32"),
    _k("assign_tuple_to_slice", "TileShapeError", "A[0:4] = (1.0, 2.0)  # <- here", "to a slice"),
    _k("whole_tile_arithmetic", "TileTypeError",
       "s = T.alloc_shared((16,), 'float32')\nA[0] = s + 1.0  # <- here", "whole tile"),
    _k("discarded_value", "TileSyntaxError", "A[0] + 1.0  # <- here", "discarded"),
    _k("for_else", "TileSyntaxError",
       "for i in T.serial(4):  # <- here\n    A[i] = 1.0\nelse:\n    pass", "else"),
    _k("loop_target_not_name", "TileSyntaxError",
       "for A[0] in T.serial(4):  # <- here\n    pass", "plain names"),
    _k("loop_over_int", "TileSyntaxError", "for i in 4:  # <- here\n    A[i] = 1.0", "T.Parallel"),
    _k("annotated_without_value", "TileSyntaxError", "x: T.float32  # <- here", "value"),
    _k("strided_slice", "TileShapeError",
       "s = T.alloc_shared((8,), 'float32')\nT.copy(A[0:16:2], s)  # <- here", "strided"),
    _k("tuple_assign_length", "TileSyntaxError", "a, b = 1, 2, 3  # <- here", "tuple"),
    _k("dict_unpack", "TileSyntaxError", "d = {**{}}  # <- here", "**"),
    _k("loop_binds_too_many", "TileBindingError",
       "for i, j, q in T.Parallel(4, 4):  # <- here\n    A[i] = 1.0", "binds"),
    _whole("kernel_four_dims", "TileShapeError",
           '@T.prim_func\ndef k(A: T.Tensor((16,), "float32")):\n'
           "    with T.Kernel(1, 1, 1, 1, threads=32) as bx:  # <- here\n        A[0] = 1.0\n", "3"),
    _whole("kernel_zero_threads", "TileShapeError",
           '@T.prim_func\ndef k(A: T.Tensor((16,), "float32")):\n'
           "    with T.Kernel(1, threads=0) as bx:  # <- here\n        A[0] = 1.0\n", "threads"),
    _whole("kernel_float_grid", "TileTypeError",
           '@T.prim_func\ndef k(A: T.Tensor((16,), "float32")):\n'
           "    with T.Kernel(1.5, threads=32) as bx:  # <- here\n        A[0] = 1.0\n", "integer"),
    _whole("kernel_prelude", "TileSyntaxError",
           '@T.prim_func\ndef k(A: T.Tensor((16,), "float32")):\n'
           "    with T.Kernel(1, threads=32, prelude='int x;') as bx:  # <- here\n        A[0] = 1.0\n",
           "prelude"),
    _k("reduce_dim_out_of_range", "TileShapeError",
       "f = T.alloc_fragment((4, 4), 'float32')\no = T.alloc_fragment((4,), 'float32')\n"
       "T.fill(f, 1.0)\nT.reduce_sum(f, o, dim=3)  # <- here", "dim"),
    _k("reduce_shape_mismatch", "TileShapeError",
       "f = T.alloc_fragment((4, 8), 'float32')\no = T.alloc_fragment((5,), 'float32')\n"
       "T.fill(f, 1.0)\nT.reduce_max(f, o, dim=1)  # <- here"),
    _k("cumsum_dim_out_of_range", "TileShapeError",
       "f = T.alloc_fragment((16,), 'float32')\nT.fill(f, 1.0)\nT.cumsum(f, dim=2)  # <- here", "dim"),
    _k("copy_scalar_source", "TileTypeError",
       "s = T.alloc_shared((16,), 'float32')\nT.copy(1.0, s)  # <- here"),
    _k("copy_missing_argument", "TileSyntaxError", "T.copy(A)  # <- here", "T.copy"),
    _k("parallel_without_extent", "TileShapeError", "for i in T.Parallel():  # <- here\n    pass",
       "extent"),
    _k("serial_float_bound", "TileTypeError", "for i in T.serial(4.5):  # <- here\n    A[0] = 1.0",
       "integer"),
    _k("subscript_block_index", "TileTypeError", "A[bx[0]] = 1.0  # <- here", "subscripted"),
    _k("python_list_dynamic_index", "TileTypeError",
       "xs = [1.0, 2.0]\nfor i in T.serial(2):\n    A[i] = xs[i]  # <- here", "constant"),
    _k("in_on_kernel_value", "TileTypeError", "if A[0] in (1.0, 2.0):  # <- here\n    A[1] = 1.0", "in"),
    _k("buffer_attribute", "TileNameError", "A[0] = A.nosuch  # <- here", "nosuch"),
    _k("set_literal", "TileSyntaxError", "x = {1, 2}  # <- here", "Set"),
    _k("fstring", "TileSyntaxError", "x = f'{bx}'  # <- here", "JoinedStr"),
    _k("starred_target", "TileSyntaxError", "a, *b = (1, 2, 3)  # <- here"),
    _k("walrus", "TileSyntaxError", "A[(j := 0)] = 1.0  # <- here", "NamedExpr"),
    _k("comprehension_over_kernel_loop", "TileSyntaxError",
       "xs = [A[i] for i in T.serial(3)]  # <- here", "comprehension"),
    _k("generator_over_kernel_loop", "TileSyntaxError",
       "x = sum(A[i] for i in T.serial(3))  # <- here", "comprehension"),
    _k("macro_bad_arguments", "TileSyntaxError", "helper(A, 1, 2, 3)  # <- here", "helper",
       pre="@T.macro\ndef helper(A, x):\n    A[0] = x\n\n\n"),
    _k("if_then_else_tile", "TileTypeError",
       "s = T.alloc_shared((16,), 'float32')\nA[0] = T.if_then_else(A[0] > 0.0, s, 1.0)  # <- here"),
    _k("alloc_inside_parallel", "TileSyntaxError",
       "for i in T.Parallel(16):\n    s = T.alloc_shared((16,), 'float32')  # <- here", "T.Parallel"),
]
