"""TileLang compatibility (issue 14): the host API under tilecore's names, build-time Python in
kernel bodies, accepted-but-warned hints and layouts, and the small T.* names of the long tail."""

import importlib.util
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from optional_backends import needs_interp  # noqa: E402

import tilecore
import tilecore.language as T
from tilecore import dtypes as dt
from tilecore.errors import TileConfigWarning, TileError
from tilecore.options import CHOICES, HONOURED, options_from_pass_configs

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
ROOT = Path(__file__).resolve().parents[1]


def test_math_and_top_level_names():
    assert tilecore.cdiv(7, 2) == 4 and tilecore.cdiv(8, 2) == 4 and tilecore.cdiv(-7, 2) == -3
    assert [tilecore.math.next_power_of_2(x) for x in (0, 1, 2, 3, 5, 64, 65)] == [1, 1, 2, 4, 8, 64, 128]
    assert tilecore.math.prev_power_of_2(65) == 64 and tilecore.math.is_power_of_2(64)
    assert not tilecore.math.is_power_of_2(0) and not tilecore.math.is_power_of_2(6)


def test_every_pass_config_key_is_known_to_the_options():
    # each PassConfigKey member is honoured or warned, never an unknown-key error
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TileConfigWarning)
        for key in tilecore.PassConfigKey:
            choices = CHOICES.get(HONOURED.get(key.value), (True,))  # an int option: a valid value
            options_from_pass_configs({key: choices[0]})
    fast = options_from_pass_configs({tilecore.PassConfigKey.TL_ENABLE_FAST_MATH: True})
    assert fast.fast_math
    with pytest.raises(TileError, match="unknown pass_configs key"):
        options_from_pass_configs({"tl.no_such_key": True})


def test_dtype_objects_compare_with_spellings():
    assert T.float16 == "float16" and T.float16 == "half" and T.float16 != "float32"
    assert T.dtype("bfloat16") is dt.bfloat16 and {T.float32: 1}["float32"] == 1
    assert T.int8 != T.uint8 and T.float16 != 3
    if HAVE_TORCH:
        import torch

        assert T.dtype("float16").as_torch() is torch.float16 and T.float16 == torch.float16


def test_python_side_integer_helpers():
    assert (T.truncdiv(-7, 2), T.truncmod(-7, 2)) == (-3, -1)
    assert (T.floordiv(-7, 2), T.floormod(-7, 2)) == (-4, 1)
    assert T.clamp(5, 0, 3) == 3 and T.clamp(-1, 0, 3) == 0


def _helper_index(i, base):
    """A plain Python helper called from a kernel body: runs at build time on expressions."""
    return base + i * 2


def _ops_kernel(op_name, scale):
    @T.prim_func
    def f(A: T.Tensor((8, 16), "int32"), Out: T.Tensor((8,), "int32"), Q: T.Tensor((8, 16), "int32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_fragment((8, 16), "int32")
            R = T.alloc_fragment((8,), "int32")
            T.copy(A, S)
            assert scale is not None, "scale is required"
            getattr(T, "reduce_" + op_name)(S, R, dim=1)  # resolved when the kernel is built
            for i in T.Parallel(8):
                Out[i] = R[i] * scale if op_name in ("sum", "max") else R[i]
            for i, j in T.Parallel(8, 16):
                Q[i, j] = T.clamp(T.truncdiv(S[i, j], 3) + T.truncmod(S[i, j], 3) * 100,
                                  _helper_index(-1, -150), 150)
    return f


@needs_interp
@pytest.mark.parametrize("op_name", ["sum", "max"])
def test_build_time_python_in_a_kernel(op_name):
    k = tilecore.compile(_ops_kernel(op_name, 2), out_idx=[1, 2], target="interp")
    a = np.arange(-64, 64, dtype=np.int32).reshape(8, 16)
    out, q = k(a)
    ref = a.sum(axis=1) if op_name == "sum" else a.max(axis=1)
    np.testing.assert_array_equal(out, ref * 2)
    tq = np.trunc(a / 3).astype(np.int32)
    np.testing.assert_array_equal(q, np.clip(tq + (a - tq * 3) * 100, -152, 150))


def test_build_time_assert_names_the_line():
    with pytest.raises(TileError, match="scale is required") as err:
        _ops_kernel("sum", None)
    assert "test_tilelang_compat.py" in str(err.value)


@needs_interp
def test_explicit_layouts_and_hints_warn_and_keep_values():
    def dq_layout(buf):  # TileLang's style: a helper returning a T.Layout
        return T.Layout(buf.shape, lambda i, j: [j, i])

    with pytest.warns(TileConfigWarning) as rec:
        @T.prim_func
        def f(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=32):
                T.disable_warp_group_reg_alloc()
                S = T.alloc_shared((16, 16), "float32")
                F = T.alloc_fragment((16, 16), "float32")
                T.annotate_layout({F: dq_layout(F), B: dq_layout(B)})
                for k in T.Pipelined(1, num_stages=1, order=[0, 1], stage=[0, 0]):
                    T.copy(A, S)
                T.copy(S, F, disable_tma=True)
                T.copy(F, B)

        k = tilecore.compile(f, target="interp")  # the register hint warns here (no setmaxnreg)

    text = " | ".join(str(r.message) for r in rec)
    for what in ("explicit Layout of F", "explicit Layout of B", "order, stage", "disable_tma",
                 "T.disable_warp_group_reg_alloc() has nothing to turn off on interp"):
        assert what in text
    a = np.arange(256, dtype=np.float32).reshape(16, 16)
    b = np.zeros_like(a)
    k(a, b)
    np.testing.assert_array_equal(b, a)
    lay = T.Layout((4, 8), lambda i, j: [j, i])
    assert lay.forward(1, 2) == [2, 1] and lay.get_output_shape() == [8, 4]


def _eager_scale():
    @tilecore.jit(target="interp")
    def scale(X, block=8, factor=2):
        M = T.const("M")
        X: T.Tensor((M,), "float32")
        Y = T.empty((M,), "float32")
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] * factor
        return Y

    return scale


@needs_interp
@needs_torch
def test_profiler_checks_and_times_a_kernel():

    k = _eager_scale().compile(M=32)
    prof = k.get_profiler(tensor_supply_type=tilecore.TensorSupplyType.Integer)
    prof.assert_allclose(lambda x: x * 2, atol=0, rtol=0)
    with pytest.raises(AssertionError, match="differ"):
        prof.assert_allclose(lambda x: x * 3)
    ms = prof.do_bench(warmup=1, rep=2)
    assert ms > 0 and prof.do_bench(lambda x: x * 2, n_repeat=2) > 0
    (x,) = prof.supply_inputs()  # NumPy arrays for a NumPy target (interp), torch tensors on GPUs
    x = np.asarray(x)
    assert x.dtype == np.float32 and x.shape == (32,) and set(np.unique(x).tolist()) <= {-2, -1, 0, 1, 2}
    assert tilecore.profiler.do_bench(lambda: None, quantiles=[0.5, 0.9], rep=1)[0] >= 0


@needs_torch
def test_torch_assert_close_allows_the_mismatch_ratio():
    import torch

    from tilecore.testing import torch_assert_close

    a = torch.zeros(1000)
    b = a.clone()
    b[:5] = 1.0
    torch_assert_close(a, b, atol=1e-3, rtol=0, max_mismatched_ratio=0.01)  # 0.5% differ
    with pytest.raises(AssertionError, match="5 of 1000"):
        torch_assert_close(a, b, atol=1e-3, rtol=0, max_mismatched_ratio=0.001)


@needs_interp
@needs_torch
def test_autotune_picks_a_config_and_explicit_configs_skip_tuning():
    from tilecore.autotuner import autotune

    configs = [{"block": 8}, {"block": 16}]

    @autotune(configs=configs, warmup=1, rep=1, ref_prog=lambda x: x * 2)
    @tilecore.jit(out_idx=[-1], target="interp")
    def scale(M, block=8):
        @T.prim_func
        def f(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
                for i in T.Parallel(block):
                    Y[bx * block + i] = X[bx * block + i] * 2
        return f

    best = scale(32)
    assert best.config in configs and best.latency > 0
    assert scale(32) is best  # cached
    plain = scale(32, block=16)  # every tuned parameter given: no search
    assert not hasattr(plain, "config")
    np.testing.assert_array_equal(plain(np.ones(32, np.float32)), np.full(32, 2, np.float32))


@needs_interp
def test_target_override_runs_a_program_written_for_another_target(monkeypatch):
    monkeypatch.setenv("TILECORE_TARGET_OVERRIDE", "interp")

    @T.prim_func
    def f(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(4):
                A[i] = A[i] + 1

    k = tilecore.compile(f, target="cuda")
    assert k.target.kind == "interp"


_EXAMPLE = '''
import argparse
import torch
import tilelang
import tilelang.language as T
from tilelang.profiler import do_bench


@tilelang.jit(out_idx=[-1])
def add(M, block):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] + 1
    return main


def main(m=4096):
    assert m == 256, m  # the driver's size was shrunk
    a = torch.randn(m, device="cuda")
    b = add(m, 64)(a)
    torch.testing.assert_close(b, a + 1)
    do_bench(lambda: add(m, 64)(a), rep=1)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--m", type=int, default=8192)
    main(p.parse_args().m // 2)
'''


@needs_interp
@needs_torch
def test_port_tool_runs_an_example_by_import_swap(tmp_path):
    (tmp_path / "add").mkdir()
    (tmp_path / "add" / "example_add.py").write_text(textwrap.dedent(_EXAMPLE))
    (tmp_path / "add" / "test_add.py").write_text("# a test file: not in the runnable set\n")
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "tilelang_port.py"), "--examples",
                          str(tmp_path), "--jobs", "1", "--timeout", "120"], capture_output=True,
                         text=True, timeout=150)
    assert "1 of 1 pass" in out.stdout, out.stdout + out.stderr


_NESTED = '''
from __future__ import annotations
import tilecore.language as T


def outer(n):
    shape = [n]          # used only in the annotations of a kernel two factories down

    def kernel_func(block):
        @T.prim_func
        def f(A: T.Tensor(shape, "float32")):
            with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
                for i in T.Parallel(block):
                    A[bx * block + i] = A[bx * block + i] + 1
        return f

    return kernel_func(8)
'''


@needs_interp
def test_string_annotations_resolve_through_outer_factories(tmp_path):
    src = tmp_path / "nested_kern.py"
    src.write_text(_NESTED)
    spec = importlib.util.spec_from_file_location("nested_kern", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a = np.zeros(16, np.float32)
    tilecore.compile(mod.outer(16), target="interp")(a)
    np.testing.assert_array_equal(a, np.ones(16, np.float32))


@needs_interp
@needs_torch
def test_a_tensor_that_requires_grad_is_accepted():
    import torch

    x = torch.ones(32, requires_grad=True)
    y = _eager_scale()(x)
    assert torch.equal(y, torch.full((32,), 2.0))


def _diag_mask(i, j, width):
    """A helper comparing kernel values with == (parsed and inlined, never run as Python)."""
    same = i // width == j // width
    if width > 2:  # decided at build time
        return T.if_then_else(same, 1, 0)
    return 7


@needs_interp
def test_a_helper_given_kernel_values_is_parsed_so_equality_builds_ir():
    @T.prim_func
    def f(Out: T.Tensor((8, 8), "int32")):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(8, 8):
                Out[i, j] = _diag_mask(i, j, 4) + _diag_mask(i, j, 1)

    out = np.zeros((8, 8), np.int32)
    tilecore.compile(f, target="interp")(out)
    r = np.arange(8)
    np.testing.assert_array_equal(out, (r[:, None] // 4 == r[None, :] // 4).astype(np.int32) + 7)


@needs_interp
def test_dynamic_names_and_chained_assignment():
    n, m = T.dynamic("n, m")
    assert (n.name, m.name) == ("n", "m") and T.dynamic("k").name == "k"

    @T.prim_func
    def f(A: T.Tensor((n, m), "float32")):
        with T.Kernel(1, threads=32):
            bi = bj = 4
            for i, j in T.Parallel(bi, bj):
                A[i, j] = A[i, j] + 1

    a = np.zeros((4, 6), np.float32)
    tilecore.compile(f, target="interp")(a)
    assert a[:, :4].sum() == 16 and a[:, 4:].sum() == 0


def _two_pass_sum(n, parts):
    @T.prim_func
    def f(A: T.Tensor((parts, n), "float32"), Out: T.Tensor((n,), "float32")):
        partial = T.alloc_global((parts, n), "float32")  # scratch shared by the two kernels
        with T.Kernel(parts, threads=32) as bx:
            for i in T.Parallel(n):
                partial[bx, i] = A[bx, i] * 2
        with T.Kernel(1, threads=32):
            acc = T.alloc_fragment((n,), "float32")
            T.clear(acc)
            for p in T.serial(parts):
                for i in T.Parallel(n):
                    acc[i] += partial[p, i]
            T.copy(acc, Out)

    return f


@needs_interp
def test_alloc_global_scratch_and_several_kernels_run_on_interp():
    k = tilecore.compile(_two_pass_sum(16, 3), out_idx=[-1], target="interp")
    assert [p.name for p in k.inputs] == ["A"]
    a = np.arange(48, dtype=np.float32).reshape(3, 16)
    np.testing.assert_array_equal(k(a), a.sum(axis=0) * 2)


def test_several_kernels_are_refused_by_thread_lowered_targets():
    with pytest.raises(TileError, match="2 `with T.Kernel` blocks"):
        tilecore.compile(_two_pass_sum(16, 3), out_idx=[-1], target="toy:w4")


@needs_interp
def test_slice_extents_are_proved_through_let_names():
    @T.prim_func
    def f(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 16), "float32")):
        with T.Kernel(4, threads=32) as bx:
            S = T.alloc_shared((16,), "float32")
            lo = (bx % 2) * 32 + 8
            hi = lo + 16
            T.copy(A[bx, lo:hi], S)
            T.copy(S, B[bx, :])

    a = np.arange(256, dtype=np.float32).reshape(4, 64)
    b = np.zeros((4, 16), np.float32)
    tilecore.compile(f, target="interp")(a, b)
    for r in range(4):
        lo = (r % 2) * 32 + 8
        np.testing.assert_array_equal(b[r], a[r, lo:lo + 16])


@needs_interp
def test_comprehensions_over_python_sequences():
    sizes = [4, 8, 12]

    @T.prim_func
    def f(Out: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(4):
                Out[i] = sum(s * i for s in sizes if s > 4) + len([s for s in sizes])

    out = np.zeros(4, np.int32)
    tilecore.compile(f, target="interp")(out)
    np.testing.assert_array_equal(out, np.arange(4) * 20 + 3)


@needs_interp
@needs_torch
def test_autotune_refuses_a_partial_set_of_tuned_parameters():
    from tilecore.autotuner import autotune

    configs = [{"block": b, "threads": t} for b in (8, 16) for t in (32, 64)]

    @autotune(configs=configs, warmup=1, rep=1)
    @tilecore.jit(out_idx=[-1], target="interp")
    def scale(M, block=8, threads=32):
        @T.prim_func
        def f(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, block), threads=threads) as bx:
                for i in T.Parallel(block):
                    Y[bx * block + i] = X[bx * block + i] * 2
        return f

    # tilecore's autotune takes all tuned parameters (no search) or none of them
    with pytest.raises(TileError, match="tuned parameter"):
        scale(32, block=16)


@needs_interp
def test_clear_and_fill_of_an_alloc_var():
    @T.prim_func
    def f(Out: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32):
            v = T.alloc_var("float32")
            w = T.alloc_var("float32")
            T.fill(v, 3.0)
            T.clear(w)
            Out[0] = v
            Out[1] = w

    out = np.full(2, 9, np.float32)
    tilecore.compile(f, target="interp")(out)
    np.testing.assert_array_equal(out, [3.0, 0.0])


@needs_interp
def test_eager_constants_bind_from_tensors_whose_shapes_hold_expressions():
    @tilecore.jit(target="interp")
    def half(X, H, groups=2):
        n, h = T.const("n, h")
        h_kv = h // groups
        X: T.Tensor((n, h_kv), "float32")  # n binds from here though h // groups is an expression
        H: T.Tensor((n, h), "float32")
        Y = T.empty((n, h_kv), "float32")
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(n, h_kv):
                Y[i, j] = X[i, j] + H[i, j * groups]
        return Y

    x, hh = np.ones((4, 3), np.float32), np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(half(x, hh), x + hh[:, ::2])
