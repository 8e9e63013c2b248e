"""tilecore.torch.custom_op: a model snippet with a tilecore RMSNorm and a tilecore GEMM runs
under torch.compile(fullgraph=True) on the CPU (interp and cpu targets) and matches torch."""

import importlib.util
import subprocess
import sys

import gemm
import numpy as np
import pytest
import rmsnorm
from optional_backends import needs_interp

import tilecore
import tilecore.language as T

torch = pytest.importorskip("torch")
pytestmark = needs_interp
HAVE_CPU = importlib.util.find_spec("tilecore_cpu") is not None


def _ops(target):
    rms = tilecore.torch.custom_op(rmsnorm.program(M=16, N=64, threads=32, dtype="float32"),
                                   out_idx=[-1], target=target)
    mm = tilecore.torch.custom_op(gemm.program(M=16, N=32, K=64, block_M=16, block_N=32, block_K=32,
                                               dtype="float32"), out_idx=[-1], target=target)
    return rms, mm


class Block(torch.nn.Module):
    """RMSNorm -> projection -> GELU + residual, the first two in tilecore."""

    def __init__(self, rms, mm):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.rms, self.mm = rms, mm
        self.w = torch.nn.Parameter(torch.rand(64, generator=g) + 0.5)
        self.proj = torch.nn.Parameter(torch.randn(64, 32, generator=g) / 8)

    def forward(self, x):
        return torch.nn.functional.gelu(self.mm(self.rms(x, self.w), self.proj)) + x[:, :32]

    def reference(self, x):
        h = torch.nn.functional.rms_norm(x, (64,), self.w, 1e-6) @ self.proj
        return torch.nn.functional.gelu(h) + x[:, :32]


@pytest.mark.parametrize("target", ["interp", pytest.param("cpu", marks=pytest.mark.skipif(
    not HAVE_CPU, reason="the cpu backend is not installed"))])
def test_model_snippet_under_torch_compile_fullgraph(target):
    block = Block(*_ops(target))
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = block.reference(x)
        torch.testing.assert_close(block(x), want, rtol=1e-4, atol=1e-4)
        torch._dynamo.reset()
        # aot_eager: dynamo (fullgraph: any graph break is an error) and AOTAutograd's fake
        # tensors through the ops' meta functions, without inductor's C++ build of the GELU
        got = torch.compile(block, fullgraph=True, backend="aot_eager")(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_inductor_calls_the_ops():
    rms, mm = _ops("interp")
    w, p = torch.rand(64) + 0.5, torch.randn(64, 32)
    x = torch.randn(16, 64)
    torch._dynamo.reset()
    f = torch.compile(lambda x: mm(rms(x, w), p), fullgraph=True)  # inductor, the default
    torch.testing.assert_close(f(x), torch.nn.functional.rms_norm(x, (64,), w, 1e-6) @ p,
                               rtol=1e-4, atol=1e-4)


def _dyn_add():
    n = T.dynamic("n")

    @T.prim_func
    def add(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    C[bx * 32 + i] = A[bx * 32 + i] + B[bx * 32 + i]

    return add


def test_fake_shapes_follow_symbolic_dimensions():
    op = tilecore.torch.custom_op(_dyn_add(), out_idx=[-1], target="interp")
    assert op is tilecore.torch.custom_op(_dyn_add(), out_idx=[-1], target="interp")
    with torch._subclasses.fake_tensor.FakeTensorMode():
        out = op(torch.empty(77), torch.empty(77))
        assert out.shape == (77,) and out.dtype == torch.float32
    a, b = torch.arange(45.0), torch.ones(45)
    torch.testing.assert_close(op(a, b), a + 1)
    torch.library.opcheck(op, (a, b))


def test_without_out_idx_the_op_mutates_its_arguments():
    op = tilecore.torch.custom_op(_dyn_add(), target="interp", name="dyn_add_inplace")
    a, b, c = torch.arange(40.0), torch.ones(40), torch.zeros(40)
    assert op(a, b, c) is None
    torch.testing.assert_close(c, a + 1)


def test_dlpack_arrays_in_and_out():
    k = tilecore.jit(_dyn_add(), out_idx=[-1], target="interp")
    a = np.arange(33, dtype=np.float32)
    out = tilecore.torch.call_dlpack(k, a, a)  # NumPy arrays are DLPack producers
    np.testing.assert_array_equal(np.from_dlpack(out), 2 * a)


def test_custom_op_needs_a_prim_func():
    with pytest.raises(tilecore.TileError, match="prim_func"):
        tilecore.torch.custom_op(_dyn_add, out_idx=[-1], target="interp")


def test_import_tilecore_does_not_import_torch():
    code = "import sys, tilecore; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def _doubling(dtype):
    @T.prim_func
    def double(A: T.Tensor((4, 8), dtype)):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(4, 8):
                A[i, j] = A[i, j] * 2

    return double


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8_e4m3fn"])
def test_a_written_non_contiguous_torch_tensor_gets_its_values_back(dtype):
    """A transposed (non-contiguous) torch tensor runs on a contiguous copy, which is copied
    back after the run: narrow floats (bf16, fp8) too, which torch.from_numpy cannot take."""
    kernel = tilecore.compile(_doubling(dtype), out_idx=None, target="interp")
    a = (torch.arange(32, dtype=torch.float32).reshape(8, 4) / 8).to(getattr(torch, dtype)).t()
    want = (a.float() * 2).to(a.dtype)
    kernel(a)
    assert not a.is_contiguous() and torch.equal(a, want)
