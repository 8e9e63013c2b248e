"""`emu:<lowering target>` for any installed thread-lowering backend, with no vendor name in emu."""

from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest
import tilecore_emu.plugin as emu_plugin

import tilecore
import tilecore.language as T
from tilecore import plugins
from tilecore.errors import TileTargetError
from tilecore.hookspec import hookimpl
from tilecore.target import Target, TargetFacts, TargetInfo


def _row_sum(M=8, N=32, threads=32):
    @T.prim_func
    def row_sum(A: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads):
            a = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((M,), "float32")
            T.copy(A[0, 0], a)
            T.reduce_sum(a, s, dim=1)
            T.copy(s, S[0])

    return row_sum


class FakeGpu:
    """A lowering-only backend registered at run time: facts, no renderer, no tensor cores."""

    def __init__(self, kind="fakegpu", archs=("fg1",), warp=8):
        self.kind, self.archs, self.warp = kind, archs, warp

    @hookimpl
    def tile_targets(self):
        return [TargetInfo(self.kind, "a made-up GPU", priority=-70, archs=self.archs,
                           default_arch=self.archs[0])]

    @hookimpl
    def tile_target_facts(self, target):
        if target.kind != self.kind:
            return None
        return TargetFacts(target, lowers_to_threads=True, warp_size=self.warp, max_threads=256,
                           shared_memory_bytes=8192, vector_bytes=8)


@pytest.fixture
def fakegpu():
    backend = FakeGpu()
    plugins.register(backend, name=backend.kind)
    yield backend
    plugins.unregister(backend.kind)


@pytest.mark.parametrize("spec", ["emu:fg1", "emu:fakegpu", "emu:fakegpu:fg1"])
def test_emu_runs_a_backend_it_has_never_heard_of(fakegpu, spec):
    a = np.random.default_rng(0).integers(-8, 8, (8, 32)).astype(np.float32)
    kern = tilecore.jit(_row_sum(), out_idx=[1], target=spec)
    assert kern.desc.lowering == Target("fakegpu", "fg1")
    assert "warp 8" in kern.get_ir("lower-threads")
    np.testing.assert_array_equal(kern(a), a.sum(axis=1))


def test_an_arch_two_backends_declare_is_ambiguous(fakegpu):
    other = FakeGpu("othergpu", ("fg1",), warp=16)
    plugins.register(other, name=other.kind)
    try:
        with pytest.raises(TileTargetError, match="ambiguous.*fakegpu, othergpu"):
            tilecore.jit(_row_sum(), out_idx=[1], target="emu:fg1")
        kern = tilecore.jit(_row_sum(), out_idx=[1], target="emu:othergpu:fg1")
        assert "warp 16" in kern.get_ir("final")
    finally:
        plugins.unregister(other.kind)


def test_unknown_arch_and_tile_level_targets_are_errors():
    with pytest.raises(TileTargetError, match="no installed thread-lowering backend has arch 'gfx000'"):
        tilecore.jit(_row_sum(), out_idx=[1], target="emu:gfx000")
    with pytest.raises(TileTargetError, match="does not lower to threads"):
        tilecore.jit(_row_sum(), out_idx=[1], target="emu:interp")


def test_emu_names_no_vendor():
    """Only docstrings may mention one (as examples); no code or string constant does."""
    tree = ast.parse(inspect.getsource(emu_plugin))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef)) and ast.get_docstring(node) is not None:
            docs.add(id(node.body[0].value))
    kinds = (ast.Constant, ast.Name, ast.Attribute)
    words = " ".join(
        str(n.value) if isinstance(n, ast.Constant) else getattr(n, "id", "") + getattr(n, "attr", "")
        for n in ast.walk(tree) if id(n) not in docs and isinstance(n, kinds))
    for vendor in ("cuda", "sm_", "nvidia", "hip", "gfx", "metal"):
        assert vendor not in words.lower(), vendor


cuda_lowering = pytest.importorskip("tilecore_cuda.lowering")


def test_short_and_full_spellings_lower_identically():
    import gemm

    func = gemm.program(M=64, N=64, K=32, block_M=64, block_N=64, block_K=32)
    short = tilecore.jit(func, out_idx=[-1], target="emu:sm_80")
    full = tilecore.jit(func, out_idx=[-1], target="emu:cuda:sm_80")
    assert short.desc.lowering == full.desc.lowering == Target("cuda", "sm_80")
    assert short.get_ir("final") == full.get_ir("final")
    assert "mma" in full.get_ir("final") and full.diagnostics == ()
    assert plugins.resolve("emu").arch == "cuda:sm_80"
    a, b = gemm.make_inputs(np.random.default_rng(1), M=64, N=64, K=32)
    np.testing.assert_array_equal(short(a, b), full(a, b))


def test_emu_asks_the_lowering_target_not_itself():
    desc = plugins.describe(plugins.resolve("emu:sm_90"))
    real = plugins.facts(Target("cuda", "sm_90"))
    assert desc.target == Target("emu", "sm_90") and desc.lowering == Target("cuda", "sm_90")
    assert desc.facts == real
