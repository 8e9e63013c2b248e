"""The core/backend contract: hook documentation, artifact protocol, answer types, Options."""

from __future__ import annotations

import enum
import inspect
import warnings

import numpy as np
import pytest
from optional_backends import needs_interp  # noqa: E402

import tilecore
import tilecore.language as T
from tilecore import hookspec, plugins
from tilecore.contract import Artifact, Declined, MmaPlan
from tilecore.errors import TileConfigWarning, TileError, TileInternalError
from tilecore.hookspec import hookimpl
from tilecore.options import HONOURED, NOT_APPLIED, Options, options_from_pass_configs
from tilecore.target import Target, TargetFacts, TargetInfo


def _hooks():
    return [(n, f) for n, f in vars(hookspec).items() if n.startswith("tile_") and callable(f)]


def test_every_hook_documents_its_parameters_return_and_firstresult():
    assert len(_hooks()) == 11  # + tile_cache_token, tile_artifact_load (compile cache), tile_build_begin
    for name, fn in _hooks():
        doc = inspect.getdoc(fn) or ""
        assert ":return:" in doc, name
        for p in inspect.signature(fn).parameters:
            assert f":param {p}:" in doc, (name, p)
        first = getattr(fn, "tilecore_spec", {}).get("firstresult", False)
        assert ("firstresult" in doc) == first or (not first and "collected" in doc), name


@needs_interp
def test_interp_artifact_satisfies_the_protocol():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4) as bx:
            for i in T.Parallel(4):
                B[bx * 4 + i] = A[bx * 4 + i] + 1.0

    kern = tilecore.compile(k, [1], "interp")
    assert isinstance(kern.artifact, Artifact)
    np.testing.assert_array_equal(kern(np.arange(4, dtype=np.float32)), np.arange(1, 5, dtype=np.float32))
    assert kern.desc.target == kern.desc.lowering == Target("interp")
    assert not kern.desc.facts.lowers_to_threads and kern.diagnostics == ()


def test_declined_needs_a_reason():
    with pytest.raises(TypeError):
        Declined("")
    assert Declined("why").reason == "why"


def test_a_tensorize_answer_of_the_wrong_type_is_an_internal_error():
    class Junk:
        @hookimpl
        def tile_targets(self):
            return [TargetInfo("junkgpu", "junk", priority=-60)]

        @hookimpl
        def tile_target_facts(self, target):
            if target.kind == "junkgpu":
                return TargetFacts(target, lowers_to_threads=True, warp_size=4, shared_memory_bytes=4096)
            return None

        @hookimpl
        def tile_gemm_tensorize(self, target, query):
            return "tensor cores please" if target.kind == "junkgpu" else None

    @T.prim_func
    def g(A: T.Tensor((8, 8), "float16"), C: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=8):
            a = T.alloc_shared((8, 8), "float16")
            c = T.alloc_fragment((8, 8), "float32")
            T.copy(A[0, 0], a)
            T.gemm(a, a, c, clear_accum=True)
            T.copy(c, C[0, 0])

    plugins.register(Junk(), name="junkgpu")
    try:
        with pytest.raises(TileInternalError, match="expected an MmaPlan, a Declined or None"):
            plugins.describe(Target("junkgpu"), g)
    finally:
        plugins.unregister("junkgpu")
    assert MmaPlan(mma=None, warps=(1, 1)).loaders == ()


class Key(str, enum.Enum):
    """Like TileLang's PassConfigKey."""

    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"


def test_options_from_tilelang_pass_configs():
    o = options_from_pass_configs({Key.TL_DISABLE_TMA_LOWER: True, "tl.disable_warp_specialized": True,
                                   "tl.disable_thread_storage_sync": True})
    assert o == Options(disable_tma_lower=True, disable_warp_specialized=True,
                        disable_thread_storage_sync=True)
    assert options_from_pass_configs(None) == Options()
    assert set(HONOURED.values()) <= {f for f in Options.__dataclass_fields__}
    assert not set(HONOURED) & set(NOT_APPLIED)


def test_unknown_pass_config_is_an_error_naming_the_key():
    with pytest.raises(TileError, match="tl.disable_tma_lowr"):
        options_from_pass_configs({"tl.disable_tma_lowr": True})
    with pytest.raises(TileError, match="True or False"):
        options_from_pass_configs({"tl.disable_tma_lower": "yes"})
    with pytest.raises(TileError, match="unknown pass_configs key"):
        tilecore.jit(out_idx=[-1], pass_configs={"tl.no_such_thing": 1})


def test_known_but_unapplied_pass_config_warns_once():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        options_from_pass_configs({"tl.layout_visualization_formats": "svg"})
        options_from_pass_configs({"tl.layout_visualization_formats": "png"})
    got = [w for w in seen if issubclass(w.category, TileConfigWarning)]
    assert len(got) == 1 and "tl.layout_visualization_formats" in str(got[0].message)
    assert got[0].filename == __file__
